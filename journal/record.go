package journal

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
)

// FormatVersion is the newest record format this code writes and reads.
// Every version ever written stays decodable (golden files in
// testdata/golden); a record of a newer version is refused, never skipped.
const FormatVersion = 1

// Record types, written as the envelope's "t" field.
const (
	typeCommit       = "commit"
	typeTableCreated = "table.created"
	typeTableDeleted = "table.deleted"
)

// CommandRef is a committed command inside a record: its client id (empty
// for commands sent without one) and which of the record's events are its
// own.
type CommandRef struct {
	ID           string
	First, Count uint32
}

// Record is a commit to one partition: one or more commands decided
// together (an entity group transaction, or a group commit), as one journal
// message.
type Record struct {
	// Time is the commit's server time in ticks: the Timestamp of every
	// entity the record writes.
	Time         int64
	PartitionKey string
	// Nonce identifies the record, so that an append whose acknowledgement
	// was lost can be recognised in the journal.
	Nonce    string
	Commands []CommandRef
	Events   []engine.Event
	// Messages are outbox messages committed with the writes (SPEC §6).
	Messages []engine.Message
	// Extra holds fields this version does not know, as raw msgpack; they
	// are written back unchanged when the record is encoded again.
	Extra map[string]msgpack.RawMessage
}

// CatalogKind is the kind of a catalog record.
type CatalogKind uint8

// Catalog record kinds.
const (
	CatalogTableCreated CatalogKind = 1
	CatalogTableDeleted CatalogKind = 2
)

// CatalogRecord creates or deletes a table.
type CatalogRecord struct {
	Kind  CatalogKind
	Name  string // as the creator spelled it
	Time  int64  // ticks
	Extra map[string]msgpack.RawMessage
}

// EncodeRecord encodes a commit record in the current format.
func EncodeRecord(r *Record) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(estimateSize(r))
	enc := msgpack.NewEncoder(&buf)
	n := 7 + len(r.Extra)
	if len(r.Messages) > 0 {
		n++
	}
	err := first(
		enc.EncodeMapLen(n),
		enc.EncodeString("v"), enc.EncodeUint(FormatVersion),
		enc.EncodeString("t"), enc.EncodeString(typeCommit),
		enc.EncodeString("ts"), enc.EncodeInt(r.Time),
		enc.EncodeString("pk"), enc.EncodeString(r.PartitionKey),
		enc.EncodeString("n"), enc.EncodeString(r.Nonce),
		enc.EncodeString("cmds"), enc.EncodeArrayLen(len(r.Commands)),
	)
	for _, c := range r.Commands {
		err = first(err, enc.EncodeArrayLen(3), enc.EncodeString(c.ID), enc.EncodeUint(uint64(c.First)), enc.EncodeUint(uint64(c.Count)))
	}
	err = first(err, enc.EncodeString("ev"), enc.EncodeArrayLen(len(r.Events)))
	for i := range r.Events {
		ev := &r.Events[i]
		err = first(err, enc.EncodeArrayLen(3), enc.EncodeUint(uint64(ev.Kind)), enc.EncodeString(ev.RowKey))
		if err == nil {
			err = engine.EncodeProperties(enc, ev.Properties)
		}
	}
	if len(r.Messages) > 0 {
		err = first(err, enc.EncodeString("out"), enc.EncodeArrayLen(len(r.Messages)))
		for _, m := range r.Messages {
			err = first(err, enc.EncodeArrayLen(3), enc.EncodeString(m.Queue), enc.EncodeString(m.ID), enc.EncodeBytes(m.Body))
		}
	}
	err = first(err, encodeExtra(enc, r.Extra))
	if err != nil {
		return nil, fmt.Errorf("journal: encode record: %w", err)
	}
	return buf.Bytes(), nil
}

// estimateSize guesses a record's encoded size from above, so that the
// buffer is allocated once (records of a batch are megabytes).
func estimateSize(r *Record) int {
	n := 64 + len(r.PartitionKey) + len(r.Nonce)
	for _, c := range r.Commands {
		n += 16 + len(c.ID)
	}
	for i := range r.Events {
		ev := &r.Events[i]
		n += 16 + len(ev.RowKey)
		for _, p := range ev.Properties {
			n += 16 + len(p.Name) + p.Value.Len()
		}
	}
	for _, m := range r.Messages {
		n += 16 + len(m.Queue) + len(m.ID) + len(m.Body)
	}
	return n
}

// EncodeCatalogRecord encodes a catalog record in the current format.
func EncodeCatalogRecord(r *CatalogRecord) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	t := typeTableCreated
	switch r.Kind {
	case CatalogTableCreated:
	case CatalogTableDeleted:
		t = typeTableDeleted
	default:
		return nil, fmt.Errorf("journal: encode catalog record: unknown kind %d", r.Kind)
	}
	err := first(
		enc.EncodeMapLen(4+len(r.Extra)),
		enc.EncodeString("v"), enc.EncodeUint(FormatVersion),
		enc.EncodeString("t"), enc.EncodeString(t),
		enc.EncodeString("name"), enc.EncodeString(r.Name),
		enc.EncodeString("ts"), enc.EncodeInt(r.Time),
		encodeExtra(enc, r.Extra),
	)
	if err != nil {
		return nil, fmt.Errorf("journal: encode catalog record: %w", err)
	}
	return buf.Bytes(), nil
}

func encodeExtra(enc *msgpack.Encoder, extra map[string]msgpack.RawMessage) error {
	for k, v := range extra {
		if err := enc.EncodeString(k); err != nil {
			return err
		}
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return nil
}

func first(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// Bounds on lengths read from a record, so a corrupt or hostile length
// prefix cannot allocate without limit. Real records are far below them
// (a record is at most a few MiB).
const (
	maxCommands = 1 << 16
	maxEvents   = 1 << 16
)

// DecodeRecord decodes a commit record of any known version.
func DecodeRecord(data []byte) (*Record, error) {
	r := &Record{}
	dec := msgpack.NewDecoder(bytes.NewReader(data))
	seen, err := decodeEnvelope(dec, typeCommit, func(key string) (bool, error) {
		var err error
		switch key {
		case "ts":
			r.Time, err = dec.DecodeInt64()
		case "pk":
			r.PartitionKey, err = dec.DecodeString()
		case "n":
			r.Nonce, err = dec.DecodeString()
		case "cmds":
			r.Commands, err = decodeCommands(dec)
		case "ev":
			r.Events, err = decodeEvents(dec)
		case "out":
			r.Messages, err = decodeMessages(dec)
		default:
			return false, nil
		}
		return true, err
	}, &r.Extra)
	if err != nil {
		return nil, fmt.Errorf("journal: decode record: %w", err)
	}
	for _, k := range []string{"ts", "pk", "cmds", "ev"} {
		if !seen[k] {
			return nil, fmt.Errorf("journal: decode record: field %q missing", k)
		}
	}
	for i, c := range r.Commands {
		if uint64(c.First)+uint64(c.Count) > uint64(len(r.Events)) {
			return nil, fmt.Errorf("journal: decode record: command %d refers to events %d..%d of %d", i, c.First, c.First+c.Count, len(r.Events))
		}
	}
	return r, nil
}

// PeekNonce reads a commit record's nonce without decoding the rest (the
// writer puts it among the first fields). ok is false when there is none
// or the data is not a commit record of a known version.
func PeekNonce(data []byte) (nonce string, ok bool) {
	dec := msgpack.NewDecoder(bytes.NewReader(data))
	n, err := dec.DecodeMapLen()
	if err != nil || n < 0 || n > 1<<10 {
		return "", false
	}
	known := false // the version comes first in every record this code writes
	for i := 0; i < n; i++ {
		key, err := dec.DecodeString()
		if err != nil {
			return "", false
		}
		switch key {
		case "v":
			v, err := dec.DecodeUint64()
			if err != nil || v == 0 || v > FormatVersion {
				return "", false
			}
			known = true
		case "n":
			if !known {
				return "", false
			}
			s, err := dec.DecodeString()
			return s, err == nil && s != ""
		default:
			if dec.Skip() != nil {
				return "", false
			}
		}
	}
	return "", false
}

// DecodeCatalogRecord decodes a catalog record of any known version.
func DecodeCatalogRecord(data []byte) (*CatalogRecord, error) {
	r := &CatalogRecord{}
	dec := msgpack.NewDecoder(bytes.NewReader(data))
	var typ string
	seen, err := decodeEnvelopeAny(dec, func(t string) error {
		switch t {
		case typeTableCreated:
			r.Kind = CatalogTableCreated
		case typeTableDeleted:
			r.Kind = CatalogTableDeleted
		default:
			return fmt.Errorf("record type %q is not a catalog record", t)
		}
		typ = t
		return nil
	}, func(key string) (bool, error) {
		var err error
		switch key {
		case "name":
			r.Name, err = dec.DecodeString()
		case "ts":
			r.Time, err = dec.DecodeInt64()
		default:
			return false, nil
		}
		return true, err
	}, &r.Extra)
	if err != nil {
		return nil, fmt.Errorf("journal: decode catalog record: %w", err)
	}
	if !seen["name"] || typ == "" {
		return nil, fmt.Errorf("journal: decode catalog record: field \"name\" or \"t\" missing")
	}
	return r, nil
}

// decodeEnvelope reads a record map whose type must be want.
func decodeEnvelope(dec *msgpack.Decoder, want string, field func(string) (bool, error), extra *map[string]msgpack.RawMessage) (map[string]bool, error) {
	return decodeEnvelopeAny(dec, func(t string) error {
		if t != want {
			return fmt.Errorf("record type %q, want %q", t, want)
		}
		return nil
	}, field, extra)
}

// decodeEnvelopeAny reads a record map: the version and type fields are
// checked, known fields go to field, unknown ones are kept raw in extra.
func decodeEnvelopeAny(dec *msgpack.Decoder, checkType func(string) error, field func(string) (bool, error), extra *map[string]msgpack.RawMessage) (map[string]bool, error) {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > 1<<10 {
		return nil, fmt.Errorf("record map of %d fields", n)
	}
	seen := make(map[string]bool, n)
	for i := 0; i < n; i++ {
		key, err := dec.DecodeString()
		if err != nil {
			return nil, fmt.Errorf("field name: %w", err)
		}
		if seen[key] {
			return nil, fmt.Errorf("field %q twice", key)
		}
		seen[key] = true
		switch key {
		case "v":
			v, err := dec.DecodeUint64()
			if err != nil {
				return nil, fmt.Errorf("version: %w", err)
			}
			if v == 0 || v > FormatVersion {
				return nil, fmt.Errorf("record version %d is newer than this host understands (max %d)", v, FormatVersion)
			}
			continue
		case "t":
			t, err := dec.DecodeString()
			if err != nil {
				return nil, fmt.Errorf("type: %w", err)
			}
			if err := checkType(t); err != nil {
				return nil, err
			}
			continue
		}
		ok, err := field(key)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", key, err)
		}
		if !ok {
			raw, err := dec.DecodeRaw()
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", key, err)
			}
			if *extra == nil {
				*extra = map[string]msgpack.RawMessage{}
			}
			(*extra)[key] = raw
		}
	}
	if !seen["v"] || !seen["t"] {
		return nil, fmt.Errorf("version or type missing")
	}
	return seen, nil
}

func decodeArrayLen(dec *msgpack.Decoder, max int) (int, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, nil
	}
	if n > max {
		return 0, fmt.Errorf("array of %d elements (at most %d)", n, max)
	}
	return n, nil
}

func decodeTuple(dec *msgpack.Decoder, want int) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("tuple of %d elements, want %d", n, want)
	}
	return nil
}

func decodeCommands(dec *msgpack.Decoder) ([]CommandRef, error) {
	n, err := decodeArrayLen(dec, maxCommands)
	if err != nil {
		return nil, err
	}
	out := make([]CommandRef, n)
	for i := range out {
		if err := decodeTuple(dec, 3); err != nil {
			return nil, err
		}
		if out[i].ID, err = dec.DecodeString(); err != nil {
			return nil, err
		}
		if out[i].First, err = dec.DecodeUint32(); err != nil {
			return nil, err
		}
		if out[i].Count, err = dec.DecodeUint32(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func decodeEvents(dec *msgpack.Decoder) ([]engine.Event, error) {
	n, err := decodeArrayLen(dec, maxEvents)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Event, n)
	for i := range out {
		ev := &out[i]
		if err := decodeTuple(dec, 3); err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
		k, err := dec.DecodeUint8()
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
		ev.Kind = engine.EventKind(k)
		if ev.Kind != engine.EventPut && ev.Kind != engine.EventDelete {
			return nil, fmt.Errorf("event %d: unknown kind %d", i, k)
		}
		if ev.RowKey, err = dec.DecodeString(); err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
		if ev.Properties, err = engine.DecodeProperties(dec); err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
	}
	return out, nil
}

func decodeMessages(dec *msgpack.Decoder) ([]engine.Message, error) {
	n, err := decodeArrayLen(dec, maxEvents)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Message, n)
	for i := range out {
		if err := decodeTuple(dec, 3); err != nil {
			return nil, err
		}
		if out[i].Queue, err = dec.DecodeString(); err != nil {
			return nil, err
		}
		if out[i].ID, err = dec.DecodeString(); err != nil {
			return nil, err
		}
		if out[i].Body, err = dec.DecodeBytes(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
