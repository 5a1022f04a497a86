package wire

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/cairn-dev/cairn/engine"
)

// A Query (docs/PROTOCOL.md) is a request on a table's command subject
// with "op": "Query": a page of the entities a filter matches, in key order
// (or reverse key order), and a continuation when more remain. The filter
// and the selection are read (and refused) by the front door, which owns
// the query language; here they are strings.

// MaxQueryPage is the most entities one Query page returns, and the page
// size when "top" is absent (as the Table service's $top).
const MaxQueryPage = 1000

// QueryRequest asks for a page of a table's entities.
type QueryRequest struct {
	// Filter is an OData $filter ("" matches every entity).
	Filter string
	// Select names the properties to return besides the keys and the
	// Timestamp (none: all).
	Select []string
	// Top bounds the page (1..MaxQueryPage; 0: MaxQueryPage).
	Top int
	// Continuation is the previous page's, unchanged ("": the first page).
	Continuation string
	// Descending walks the keys from the highest down.
	Descending bool
	// AsOf reads the table as it was at that journal position (0: now).
	AsOf uint64
	// Position is a journal position the view must have reached first
	// (0: none).
	Position uint64
}

// QueryEntity is one entity of a page, with its ETag.
type QueryEntity struct {
	Entity *engine.Entity
	ETag   string
}

// QueryReply is a page of a Query, or an error.
type QueryReply struct {
	Error    *engine.Error
	Entities []QueryEntity
	// Continuation is what to send for the next page; "" when none is left.
	Continuation string
	// Seq is the journal position the page was read at.
	Seq uint64
}

type queryForm struct {
	Op           string      `json:"op" msgpack:"op"`
	Filter       string      `json:"filter,omitempty" msgpack:"filter,omitempty"`
	Select       selectNames `json:"select,omitempty" msgpack:"select,omitempty"`
	Top          int         `json:"top,omitempty" msgpack:"top,omitempty"`
	Continuation string      `json:"continuation,omitempty" msgpack:"continuation,omitempty"`
	Descending   bool        `json:"descending,omitempty" msgpack:"descending,omitempty"`
	AsOf         *uint64     `json:"asOf,omitempty" msgpack:"asOf,omitempty"`
	Position     uint64      `json:"position,omitempty" msgpack:"position,omitempty"`
}

// IsQuery reports whether a request body is a Query ("op": "Query",
// spelled so), without decoding the rest. Bodies that cannot be one (no
// "Query" in their bytes, the common case for writes) cost one byte
// search.
func IsQuery(data []byte, enc Encoding) bool {
	if enc == JSON {
		if !bytes.Contains(data, []byte("Query")) && !bytes.Contains(data, []byte(`\u`)) {
			return false
		}
		return string(jsonOp(data)) == "Query"
	}
	return bytes.Contains(data, []byte("Query")) && msgpackOp(data) == "Query"
}

// DecodeQueryRequest decodes a Query. Its fields are named exactly as the
// protocol names them, each once; any other, a field a Query does not
// take, a "top" outside 1..MaxQueryPage, an "asOf" of 0 and an op other
// than Query are InvalidInput (InvalidAsOfPosition for the "asOf").
func DecodeQueryRequest(data []byte, enc Encoding) (*QueryRequest, error) {
	if len(data) > maxBody {
		return nil, engine.Errorf(engine.CodeRequestBodyTooLarge, "request of %d bytes; the limit is %d", len(data), maxBody)
	}
	var f queryForm
	if enc == JSON {
		if err := checkRequestJSON(data, "query"); err != nil {
			return nil, err
		}
	} else if err := checkRequestMsgpack(newDecoder(data).dec); err != nil {
		return nil, at("query", err)
	}
	if err := decodeStrict(enc, data, &f); err != nil {
		return nil, at("query", err)
	}
	if f.Op != "Query" {
		return nil, invalid("query: op %q is not Query", f.Op)
	}
	r := &QueryRequest{Filter: f.Filter, Select: f.Select, Top: f.Top, Continuation: f.Continuation,
		Descending: f.Descending, Position: f.Position}
	switch {
	case f.Top == 0:
		r.Top = MaxQueryPage
	case f.Top < 0 || f.Top > MaxQueryPage:
		return nil, invalid("query: top %d is not 1..%d", f.Top, MaxQueryPage)
	}
	if f.AsOf != nil {
		if *f.AsOf == 0 {
			return nil, errAsOfZero()
		}
		r.AsOf = *f.AsOf
	}
	return r, nil
}

// EncodeQueryRequest encodes a Query (for clients); Top 0 is left out.
func EncodeQueryRequest(r *QueryRequest, enc Encoding) ([]byte, error) {
	f := queryForm{Op: "Query", Filter: r.Filter, Select: r.Select, Top: r.Top, Continuation: r.Continuation,
		Descending: r.Descending, Position: r.Position}
	if r.AsOf != 0 {
		f.AsOf = &r.AsOf
	}
	return marshalForm(enc, f)
}

// EncodeQueryReply encodes a Query's page. In JSON each entity is
// Azure-shaped entity JSON with its odata.etag and Timestamp, as a
// Retrieve's; in msgpack each is {"etag", "entity"} with the entity in
// the protocol's msgpack form. An error reply is a command reply's
// ({"error": …}).
func EncodeQueryReply(r *QueryReply, enc Encoding) []byte {
	if r.Error != nil {
		return EncodeReply(&engine.Reply{Error: r.Error}, enc)
	}
	if enc == JSON {
		b := append(make([]byte, 0, 256), `{"entities":[`...)
		for i, qe := range r.Entities {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendEntityJSON(b, qe.Entity, qe.ETag, MinimalMetadata)
		}
		b = append(b, ']')
		if r.Continuation != "" {
			b = append(b, `,"continuation":`...)
			b = AppendJSONString(b, r.Continuation)
		}
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, r.Seq, 10)
		return append(b, '}')
	}
	e := newEncoder()
	n := 2
	if r.Continuation != "" {
		n++
	}
	e.do(e.enc.EncodeMapLen(n), e.enc.EncodeString("entities"), e.enc.EncodeArrayLen(len(r.Entities)))
	for _, qe := range r.Entities {
		e.do(e.enc.EncodeMapLen(2))
		e.str("etag", qe.ETag)
		e.do(e.enc.EncodeString("entity"))
		e.entity(qe.Entity)
	}
	if r.Continuation != "" {
		e.str("continuation", r.Continuation)
	}
	e.do(e.enc.EncodeString("seq"), e.enc.EncodeUint(r.Seq))
	if e.err != nil {
		return EncodeReply(&engine.Reply{Error: engine.Errorf(engine.CodeInternalError, "encode query page: %v", e.err)}, enc)
	}
	return e.finish()
}

// DecodeQueryReply decodes a Query's reply (for clients and tests): a
// page, or the error of an error reply.
func DecodeQueryReply(data []byte, enc Encoding) (*QueryReply, error) {
	if enc == JSON {
		var jr struct {
			Entities     []json.RawMessage `json:"entities"`
			Continuation string            `json:"continuation"`
			Seq          uint64            `json:"seq"`
			Error        json.RawMessage   `json:"error"`
		}
		if err := json.Unmarshal(data, &jr); err != nil {
			return nil, invalid("query reply: %v", err)
		}
		if len(jr.Error) > 0 {
			rep, err := DecodeReplyJSON(data)
			if err != nil {
				return nil, err
			}
			return &QueryReply{Error: rep.Error}, nil
		}
		r := &QueryReply{Continuation: jr.Continuation, Seq: jr.Seq, Entities: make([]QueryEntity, 0, len(jr.Entities))}
		for i, raw := range jr.Entities {
			e, err := ParseEntityJSON(raw)
			if err != nil {
				return nil, at("query reply: entities["+strconv.Itoa(i)+"]", err)
			}
			var meta struct {
				ETag      string `json:"odata.etag"`
				Timestamp string `json:"Timestamp"`
			}
			_ = json.Unmarshal(raw, &meta)
			if meta.Timestamp != "" {
				if e.Timestamp, err = ParseTime(meta.Timestamp); err != nil {
					return nil, invalid("query reply: entities[%d]: Timestamp %q: %v", i, meta.Timestamp, err)
				}
			}
			r.Entities = append(r.Entities, QueryEntity{Entity: e, ETag: meta.ETag})
		}
		return r, nil
	}
	d := newDecoder(data)
	n, err := d.mapLen()
	if err != nil {
		return nil, at("query reply", err)
	}
	r := &QueryReply{}
	for i := 0; i < n; i++ {
		k, err := d.str("key")
		if err != nil {
			return nil, at("query reply", err)
		}
		switch k {
		case "entities":
			var m int
			if m, err = d.arrayLen(); err == nil {
				r.Entities = make([]QueryEntity, m)
				for j := 0; j < m && err == nil; j++ {
					err = d.queryEntity(&r.Entities[j])
				}
			}
		case "continuation":
			r.Continuation, err = d.str(k)
		case "seq":
			r.Seq, err = d.dec.DecodeUint64()
		case "error":
			r.Error, err = d.error()
		default:
			err = skip(d.dec)
		}
		if err != nil {
			return nil, at("query reply: "+k, err)
		}
	}
	return r, nil
}

func (d *decoder) queryEntity(qe *QueryEntity) error {
	n, err := d.mapLen()
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		k, err := d.str("key")
		if err != nil {
			return err
		}
		switch k {
		case "etag":
			qe.ETag, err = d.str(k)
		case "entity":
			qe.Entity, err = d.entity(true)
		default:
			err = skip(d.dec)
		}
		if err != nil {
			return at(k, err)
		}
	}
	if qe.Entity == nil {
		return invalid("an entity of the page has no \"entity\"")
	}
	return nil
}

// ErrorEncoding is the encoding an error reply to a request takes: the
// request's (Detect), except that a body Detect takes for msgpack without
// a Content-Type saying so, and that is not one whole msgpack map (text
// typed at a terminal, an empty body, anything truncated), is answered in
// JSON, which a person can read. It costs a walk of the body's msgpack
// structure, on the error path only.
func ErrorEncoding(data []byte, contentType string) Encoding {
	enc := Detect(data, contentType)
	ct := strings.ToLower(contentType)
	saysMsgpack := strings.HasPrefix(ct, "application/msgpack") || strings.HasPrefix(ct, "application/x-msgpack")
	if enc == JSON || saysMsgpack || isMsgpackMap(data) {
		return enc
	}
	return JSON
}

// isMsgpackMap reports whether data is exactly one msgpack map.
func isMsgpackMap(data []byte) bool {
	if len(data) == 0 {
		return false
	}
	if c := data[0]; !msgpcode.IsFixedMap(c) && c != msgpcode.Map16 && c != msgpcode.Map32 {
		return false
	}
	r := bytes.NewReader(data)
	if skip(msgpack.NewDecoder(r)) != nil {
		return false
	}
	return r.Len() == 0
}

// maxSelect bounds a Query's select: every property an entity may have,
// its keys and Timestamp included. More could only name properties no
// entity has.
const maxSelect = engine.MaxUserProperties + 3

// selectNames is a Query's select, decoded one name at a time: more than
// maxSelect are refused before the rest is decoded.
type selectNames []string

func (s *selectNames) UnmarshalJSON(data []byte) error {
	return decodeBoundedJSON((*[]string)(s), data, maxSelect, "query: select")
}

func (s *selectNames) DecodeMsgpack(d *msgpack.Decoder) error {
	return decodeBoundedMsgpack((*[]string)(s), d, maxSelect, "query: select")
}
