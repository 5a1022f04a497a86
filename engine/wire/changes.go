package wire

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
)

// The change feed (docs/PROTOCOL.md): a request names where to read from
// in a table's journal, a reply holds the changes of the records read.

// Limits of a change feed request.
const (
	MaxChanges        = 1000             // records per page
	DefaultChanges    = 100              // records per page when "max" is absent
	MaxChangesWait    = 30 * time.Second // the longest long-poll
	MaxFeedPartitions = 100              // partition keys one request may name
)

// ChangesRequest asks for a page of a table's change feed.
type ChangesRequest struct {
	// From is the journal sequence to read from (1, or 0: the beginning).
	From uint64
	// Max bounds the records of the page (1..MaxChanges; 0: DefaultChanges).
	// A record's changes are never split between pages.
	Max int
	// Partitions, if any, are the only partition keys read.
	Partitions []string
	// Wait is how long to wait for a change when there is none (0: answer
	// at once; at most MaxChangesWait).
	Wait time.Duration
}

// Change is one entity change of a change feed page.
type Change struct {
	// Seq and Index are the change's journal position: the record's
	// sequence and the change's place in it.
	Seq          uint64
	Index        uint32
	PartitionKey string
	RowKey       string
	// Deleted: the entity was deleted ("op": "delete"); otherwise it was
	// put ("op": "put") and Entity is what it is now.
	Deleted bool
	Entity  *engine.Entity
	// ETag is the entity's ETag after a put ("" after a delete).
	ETag string
	// PrevETag is the entity's ETag before the change: "" when it did not
	// exist, or when PrevUnknown (the record was written before Cairn
	// recorded previous versions).
	PrevETag    string
	PrevUnknown bool
	// Timestamp is the commit time in ticks.
	Timestamp int64
}

// ChangesReply is a page of a change feed, or an error.
type ChangesReply struct {
	Error   *engine.Error
	Changes []Change
	// Next is the sequence to ask from next; Head the journal's last
	// sequence when the page was read.
	Next, Head uint64
}

type changesRequestForm struct {
	From       uint64         `json:"from" msgpack:"from"`
	Max        int            `json:"max" msgpack:"max"`
	Partitions feedPartitions `json:"partitions" msgpack:"partitions"`
	Wait       string         `json:"wait" msgpack:"wait"`
}

// feedPartitions is a change feed request's partition keys, decoded one at
// a time (boundedStrings): more than MaxFeedPartitions are refused at the
// first one past the bound.
type feedPartitions []string

func (ps *feedPartitions) UnmarshalJSON(data []byte) error {
	return decodeBoundedJSON((*[]string)(ps), data, MaxFeedPartitions, "changes request: partitions")
}

func (ps *feedPartitions) DecodeMsgpack(d *msgpack.Decoder) error {
	return decodeBoundedMsgpack((*[]string)(ps), d, MaxFeedPartitions, "changes request: partitions")
}

// decodeBoundedJSON decodes a JSON array of strings (null: none) one at a
// time, refusing it at the first string past max, so that a request of
// a few bytes per string cannot make the decoder allocate millions of
// them; what names the field in the refusal.
func decodeBoundedJSON(out *[]string, data []byte, max int, what string) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		*out = nil
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return invalid("%s: not a JSON array of strings", what)
	}
	var got []string
	for dec.More() {
		if len(got) == max {
			return invalid("%s: more than %d", what, max)
		}
		var s string
		if err := dec.Decode(&s); err != nil {
			return invalid("%s[%d]: not a string", what, len(got))
		}
		got = append(got, s)
	}
	*out = got
	return nil
}

// decodeBoundedMsgpack decodes a msgpack array of strings (nil: none),
// refusing it from its length when that is past max, before any string.
func decodeBoundedMsgpack(out *[]string, d *msgpack.Decoder, max int, what string) error {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n > max {
		return invalid("%s: more than %d", what, max)
	}
	if n < 0 {
		*out = nil
		return nil
	}
	got := make([]string, n)
	for i := range got {
		if got[i], err = d.DecodeString(); err != nil {
			return err
		}
	}
	*out = got
	return nil
}

// DecodeChangesRequest decodes and checks a change feed request: unknown
// fields (names are case-sensitive: "from", never "From"), a field given
// twice, a max beyond MaxChanges, a wait that is not a duration of at
// most MaxChangesWait, more than MaxFeedPartitions partitions or one that
// is not a key are InvalidInput.
func DecodeChangesRequest(data []byte, enc Encoding) (*ChangesRequest, error) {
	var f changesRequestForm
	var err error
	switch {
	case len(bytes.TrimSpace(data)) == 0:
		// an empty request reads from the beginning
	case enc == JSON:
		err = checkObjectJSON(data, changesFields, "changes request")
	default:
		err = checkObjectMsgpack(newDecoder(data).dec, changesFields, "changes request")
	}
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) > 0 {
		if err := decodeStrict(enc, data, &f); err != nil {
			return nil, at("changes request", err)
		}
	}
	r := &ChangesRequest{From: max(f.From, 1), Max: f.Max, Partitions: f.Partitions}
	switch {
	case f.Max == 0:
		r.Max = DefaultChanges
	case f.Max < 0 || f.Max > MaxChanges:
		return nil, invalid("changes request: max %d is not 1..%d", f.Max, MaxChanges)
	}
	if f.Wait != "" {
		if r.Wait, err = time.ParseDuration(f.Wait); err != nil || r.Wait < 0 || r.Wait > MaxChangesWait {
			return nil, invalid("changes request: wait %q is not a duration of 0 to %v (\"5s\")", f.Wait, MaxChangesWait)
		}
	}
	for i, pk := range f.Partitions {
		if err := engine.ValidateKey("PartitionKey", pk); err != nil {
			return nil, invalid("changes request: partitions[%d]: %s", i, engine.AsError(err).Message)
		}
	}
	return r, nil
}

// EncodeChangesRequest encodes a change feed request (for clients).
func EncodeChangesRequest(r *ChangesRequest, enc Encoding) ([]byte, error) {
	f := changesRequestForm{From: r.From, Max: r.Max, Partitions: feedPartitions(r.Partitions)}
	if r.Wait > 0 {
		f.Wait = r.Wait.String()
	}
	return marshalForm(enc, f)
}

type jsonChange struct {
	Seq          uint64          `json:"seq"`
	Index        uint32          `json:"index"`
	PartitionKey string          `json:"partitionKey"`
	RowKey       string          `json:"rowKey"`
	Op           string          `json:"op"`
	Entity       json.RawMessage `json:"entity,omitempty"`
	ETag         string          `json:"etag,omitempty"`
	PrevETag     string          `json:"prevEtag,omitempty"`
	PrevUnknown  bool            `json:"prevUnknown,omitempty"`
	Timestamp    string          `json:"timestamp"`
}

type jsonChangesReply struct {
	Changes []jsonChange `json:"changes"`
	Next    uint64       `json:"next"`
	Head    uint64       `json:"head"`
}

type msgpackChange struct {
	Seq          uint64         `msgpack:"seq"`
	Index        uint32         `msgpack:"index"`
	PartitionKey string         `msgpack:"partitionKey"`
	RowKey       string         `msgpack:"rowKey"`
	Op           string         `msgpack:"op"`
	Entity       *msgpackEntity `msgpack:"entity,omitempty"`
	ETag         string         `msgpack:"etag,omitempty"`
	PrevETag     string         `msgpack:"prevEtag,omitempty"`
	PrevUnknown  bool           `msgpack:"prevUnknown,omitempty"`
	Timestamp    int64          `msgpack:"timestamp"`
}

type msgpackChangesReply struct {
	Changes []msgpackChange `msgpack:"changes"`
	Next    uint64          `msgpack:"next"`
	Head    uint64          `msgpack:"head"`
}

// msgpackEntity is an entity in the protocol's msgpack form.
type msgpackEntity struct{ e *engine.Entity }

func (m *msgpackEntity) EncodeMsgpack(enc *msgpack.Encoder) error { return EncodeEntity(enc, m.e) }

func (m *msgpackEntity) DecodeMsgpack(dec *msgpack.Decoder) error {
	e, err := DecodeEntity(dec)
	m.e = e
	return err
}

func opName(deleted bool) string {
	if deleted {
		return "delete"
	}
	return "put"
}

// EncodeChangesReply encodes a change feed reply: in JSON, entities are
// Azure-shaped entity JSON (minimal metadata: odata.etag and the type
// annotations a JSON value cannot carry) and times are RFC 3339; in
// msgpack, entities take the protocol's msgpack form and times are ticks.
// An error reply is a command reply's ({"error": …}).
func EncodeChangesReply(r *ChangesReply, enc Encoding) []byte {
	if r.Error != nil {
		return EncodeReply(&engine.Reply{Error: r.Error}, enc)
	}
	var b []byte
	var err error
	if enc == JSON {
		jr := jsonChangesReply{Changes: make([]jsonChange, len(r.Changes)), Next: r.Next, Head: r.Head}
		for i := range r.Changes {
			c := &r.Changes[i]
			jc := jsonChange{Seq: c.Seq, Index: c.Index, PartitionKey: c.PartitionKey, RowKey: c.RowKey, Op: opName(c.Deleted),
				ETag: c.ETag, PrevETag: c.PrevETag, PrevUnknown: c.PrevUnknown, Timestamp: formatTicks(c.Timestamp)}
			if c.Entity != nil {
				jc.Entity = AppendEntityJSON(nil, c.Entity, c.ETag, MinimalMetadata)
			}
			jr.Changes[i] = jc
		}
		b, err = json.Marshal(jr)
	} else {
		mr := msgpackChangesReply{Changes: make([]msgpackChange, len(r.Changes)), Next: r.Next, Head: r.Head}
		for i := range r.Changes {
			c := &r.Changes[i]
			mc := msgpackChange{Seq: c.Seq, Index: c.Index, PartitionKey: c.PartitionKey, RowKey: c.RowKey, Op: opName(c.Deleted),
				ETag: c.ETag, PrevETag: c.PrevETag, PrevUnknown: c.PrevUnknown, Timestamp: c.Timestamp}
			if c.Entity != nil {
				mc.Entity = &msgpackEntity{c.Entity}
			}
			mr.Changes[i] = mc
		}
		b, err = msgpack.Marshal(mr)
	}
	if err != nil {
		return EncodeReply(&engine.Reply{Error: engine.Errorf(engine.CodeInternalError, "encode changes: %v", err)}, enc)
	}
	return b
}

// DecodeChangesReply decodes a change feed reply (for clients): a page,
// or the error of an error reply.
func DecodeChangesReply(data []byte, enc Encoding) (*ChangesReply, error) {
	var isErr bool
	if enc == JSON {
		var probe struct {
			Error json.RawMessage `json:"error"`
		}
		_ = json.Unmarshal(data, &probe)
		isErr = len(probe.Error) > 0
	} else {
		var probe struct {
			Error msgpack.RawMessage `msgpack:"error"`
		}
		_ = msgpack.Unmarshal(data, &probe)
		isErr = len(probe.Error) > 0
	}
	if isErr {
		rep, err := decodeReply(data, enc)
		if err != nil {
			return nil, err
		}
		return &ChangesReply{Error: rep.Error}, nil
	}
	r := &ChangesReply{}
	if enc == JSON {
		var jr jsonChangesReply
		if err := json.Unmarshal(data, &jr); err != nil {
			return nil, invalid("changes reply: %v", err)
		}
		r.Next, r.Head = jr.Next, jr.Head
		for _, jc := range jr.Changes {
			c := Change{Seq: jc.Seq, Index: jc.Index, PartitionKey: jc.PartitionKey, RowKey: jc.RowKey, Deleted: jc.Op == "delete",
				ETag: jc.ETag, PrevETag: jc.PrevETag, PrevUnknown: jc.PrevUnknown}
			if jc.Timestamp != "" {
				ts, err := ParseTime(jc.Timestamp)
				if err != nil {
					return nil, invalid("changes reply: timestamp %q: %v", jc.Timestamp, err)
				}
				c.Timestamp = ts
			}
			if len(jc.Entity) > 0 {
				e, err := ParseEntityJSON(jc.Entity)
				if err != nil {
					return nil, at("changes reply: entity", err)
				}
				e.Timestamp = c.Timestamp
				c.Entity = e
			}
			r.Changes = append(r.Changes, c)
		}
		return r, nil
	}
	var mr msgpackChangesReply
	if err := msgpack.Unmarshal(data, &mr); err != nil {
		return nil, invalid("changes reply: %v", err)
	}
	r.Next, r.Head = mr.Next, mr.Head
	for _, mc := range mr.Changes {
		c := Change{Seq: mc.Seq, Index: mc.Index, PartitionKey: mc.PartitionKey, RowKey: mc.RowKey, Deleted: mc.Op == "delete",
			ETag: mc.ETag, PrevETag: mc.PrevETag, PrevUnknown: mc.PrevUnknown, Timestamp: mc.Timestamp}
		if mc.Entity != nil {
			c.Entity = mc.Entity.e
		}
		r.Changes = append(r.Changes, c)
	}
	return r, nil
}

// decodeReply decodes a command reply in either encoding.
func decodeReply(data []byte, enc Encoding) (*engine.Reply, error) {
	if enc == JSON {
		return DecodeReplyJSON(data)
	}
	return DecodeReplyMsgpack(data)
}

// decodeStrict decodes one request of enc into v, refusing fields v does
// not have and, in JSON, anything after the request.
func decodeStrict(enc Encoding, data []byte, v any) error {
	if enc == JSON {
		d := json.NewDecoder(bytes.NewReader(data))
		d.DisallowUnknownFields()
		err := d.Decode(v)
		if err == nil && d.More() {
			err = invalid("data after the request")
		}
		return err
	}
	d := msgpack.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields(true)
	return d.Decode(v)
}
