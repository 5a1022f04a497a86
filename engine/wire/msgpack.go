package wire

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/cairn-dev/cairn/engine"
)

// The msgpack form: maps with the JSON form's keys; an entity is
// {"pk", "rk", "ts" (ticks, replies only), "p": engine.EncodeProperties},
// "pk" and "rk" required (strings, not nil) and no field twice. An outbox
// message is [queue, id, body] or ["", id, body, subject].

// maxItems bounds array and map lengths read from the wire.
const maxItems = 1 << 16

type encoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
	err error
}

// encoders are reused: a reply is encoded for every command a node
// answers, and each new encoder was its msgpack state and a buffer grown
// to the message (4 allocations, 688 bytes for an insert's reply; a
// 1 KB request 3.8 KB). finish copies out what one encoded.
var encoders = sync.Pool{New: func() any {
	e := &encoder{}
	e.enc = msgpack.NewEncoder(&e.buf)
	return e
}}

// maxPooledEncoder is the largest buffer an encoder goes back to the pool
// with; a larger one (a page of entities) is handed to the caller as it
// is rather than copied.
const maxPooledEncoder = 64 << 10

func newEncoder() *encoder {
	e := encoders.Get().(*encoder)
	e.buf.Reset()
	e.err = nil
	return e
}

// finish returns what e encoded, in a slice of the caller's own; e must
// not be used after.
func (e *encoder) finish() []byte {
	if e.buf.Cap() > maxPooledEncoder {
		return e.buf.Bytes()
	}
	b := bytes.Clone(e.buf.Bytes())
	encoders.Put(e)
	return b
}

func (e *encoder) do(errs ...error) {
	for _, err := range errs {
		if e.err == nil && err != nil {
			e.err = err
		}
	}
}

func (e *encoder) str(k, v string) { e.do(e.enc.EncodeString(k), e.enc.EncodeString(v)) }

func (e *encoder) entity(ent *engine.Entity) {
	n := 3
	if ent.Timestamp != 0 {
		n++
	}
	e.do(e.enc.EncodeMapLen(n))
	e.str("pk", ent.PartitionKey)
	e.str("rk", ent.RowKey)
	if ent.Timestamp != 0 {
		e.do(e.enc.EncodeString("ts"), e.enc.EncodeInt(ent.Timestamp))
	}
	e.do(e.enc.EncodeString("p"), engine.EncodeProperties(e.enc, ent.Properties))
}

// EncodeRequestMsgpack encodes a request as msgpack.
func EncodeRequestMsgpack(r *engine.Request) ([]byte, error) {
	e := newEncoder()
	e.request(r)
	if e.err != nil {
		return nil, fmt.Errorf("wire: encode request: %w", e.err)
	}
	return e.finish(), nil
}

func (e *encoder) request(r *engine.Request) {
	// Keys are written when set, and always where they name the entity
	// ("" is a key there).
	withPK, withRK := r.PartitionKey != "" || byKeys(r), r.RowKey != "" || byKeys(r)
	n := 1
	for _, set := range []bool{r.ID != "", r.IfMatch != "", r.Entity != nil, withPK, withRK, len(r.Ops) > 0, r.Table != "", len(r.Messages) > 0, r.AsOf != 0, r.Position != 0} {
		if set {
			n++
		}
	}
	e.do(e.enc.EncodeMapLen(n))
	e.str("op", r.Op)
	if r.ID != "" {
		e.str("id", r.ID)
	}
	if r.IfMatch != "" {
		e.str("ifMatch", r.IfMatch)
	}
	if r.Entity != nil {
		e.do(e.enc.EncodeString("entity"))
		e.entity(r.Entity)
	}
	if withPK {
		e.str("partitionKey", r.PartitionKey)
	}
	if withRK {
		e.str("rowKey", r.RowKey)
	}
	if len(r.Ops) > 0 {
		e.do(e.enc.EncodeString("ops"), e.enc.EncodeArrayLen(len(r.Ops)))
		for i := range r.Ops {
			e.request(&r.Ops[i])
		}
	}
	if r.Table != "" {
		e.str("table", r.Table)
	}
	if len(r.Messages) > 0 {
		e.do(e.enc.EncodeString("messages"), e.enc.EncodeArrayLen(len(r.Messages)))
		for _, m := range r.Messages {
			if m.Subject == "" {
				e.do(e.enc.EncodeArrayLen(3), e.enc.EncodeString(m.Queue), e.enc.EncodeString(m.ID), e.enc.EncodeBytes(m.Body))
			} else {
				e.do(e.enc.EncodeArrayLen(4), e.enc.EncodeString(m.Queue), e.enc.EncodeString(m.ID), e.enc.EncodeBytes(m.Body), e.enc.EncodeString(m.Subject))
			}
		}
	}
	if r.AsOf != 0 {
		e.do(e.enc.EncodeString("asOf"), e.enc.EncodeUint(r.AsOf))
	}
	if r.Position != 0 {
		e.do(e.enc.EncodeString("position"), e.enc.EncodeUint(r.Position))
	}
}

// EncodeReplyMsgpack encodes a reply as msgpack.
func EncodeReplyMsgpack(r *engine.Reply) []byte {
	e := newEncoder()
	n := 0
	for _, set := range []bool{r.ETag != "", r.Timestamp != 0, r.Seq != 0, len(r.Results) > 0, r.Entity != nil, len(r.Tables) > 0, r.Duplicate, r.Error != nil} {
		if set {
			n++
		}
	}
	e.do(e.enc.EncodeMapLen(n))
	if r.ETag != "" {
		e.str("etag", r.ETag)
	}
	if r.Timestamp != 0 {
		e.do(e.enc.EncodeString("timestamp"), e.enc.EncodeInt(r.Timestamp))
	}
	if r.Seq != 0 {
		e.do(e.enc.EncodeString("seq"), e.enc.EncodeUint(r.Seq))
	}
	if len(r.Results) > 0 {
		e.do(e.enc.EncodeString("results"), e.enc.EncodeArrayLen(len(r.Results)))
		for _, res := range r.Results {
			e.do(e.enc.EncodeArrayLen(2), e.enc.EncodeString(res.ETag), e.enc.EncodeInt(res.Timestamp))
		}
	}
	if r.Entity != nil {
		e.do(e.enc.EncodeString("entity"))
		e.entity(r.Entity)
	}
	if len(r.Tables) > 0 {
		e.do(e.enc.EncodeString("tables"), e.enc.EncodeArrayLen(len(r.Tables)))
		for _, t := range r.Tables {
			e.do(e.enc.EncodeArrayLen(3), e.enc.EncodeString(t.Name), e.enc.EncodeUint(t.Epoch), e.enc.EncodeInt(t.Created))
		}
	}
	if r.Duplicate {
		e.do(e.enc.EncodeString("duplicate"), e.enc.EncodeBool(true))
	}
	if r.Error != nil {
		e.do(e.enc.EncodeString("error"), e.enc.EncodeMapLen(3))
		e.str("code", string(r.Error.Code))
		e.str("message", r.Error.Message)
		e.do(e.enc.EncodeString("index"), e.enc.EncodeInt(int64(r.Error.Index)))
	}
	if e.err != nil {
		// Encoding into memory fails only on a value this package cannot
		// represent; answer with the failure rather than nothing.
		return EncodeReplyMsgpack(&engine.Reply{Error: engine.Errorf(engine.CodeInternalError, "encode reply: %v", e.err)})
	}
	return e.finish()
}

// decoder reads msgpack. Over bytes (newDecoder), it knows them: an
// entity's strings are then cut from one string of the entity's bytes
// (entity), and field names are read without making them strings.
type decoder struct {
	dec  *msgpack.Decoder
	r    bytes.Reader
	data []byte // what r reads; nil when dec reads anything else
	key  [32]byte
}

func newDecoder(data []byte) *decoder {
	d := &decoder{}
	d.dec = msgpack.NewDecoder(&d.r)
	d.reset(data)
	return d
}

func (d *decoder) reset(data []byte) {
	d.r.Reset(data)
	d.data = data
}

// requestDecoders keeps the decoders of requests, a few hundred bytes
// each, from one request to the next.
var requestDecoders = sync.Pool{New: func() any { return newDecoder(nil) }}

// rest is the bytes not read yet.
func (d *decoder) rest() []byte { return d.data[len(d.data)-d.r.Len():] }

// pass moves past n bytes that were read from rest.
func (d *decoder) pass(n int) {
	_, _ = d.r.Seek(int64(n), io.SeekCurrent) // relative, never before the start: cannot fail
}

func (d *decoder) mapLen() (int, error) {
	n, err := d.dec.DecodeMapLen()
	if err != nil {
		return 0, invalid("want a map: %v", err)
	}
	if n < 0 || n > maxItems {
		return 0, invalid("map of %d entries", n)
	}
	return n, nil
}

func (d *decoder) arrayLen() (int, error) {
	n, err := d.dec.DecodeArrayLen()
	if err != nil {
		return 0, invalid("want an array: %v", err)
	}
	if n > maxItems {
		return 0, invalid("array of %d entries", n)
	}
	return max(n, 0), nil
}

func (d *decoder) str(key string) (string, error) {
	s, err := d.dec.DecodeString()
	if err != nil {
		return "", invalid("%q must be a string: %v", key, err)
	}
	return s, nil
}

// name reads a field name, or an operation's, as str does, into bytes
// valid until the next name.
func (d *decoder) name(key string) ([]byte, error) {
	n, err := d.dec.DecodeBytesLen()
	if err == nil && n > d.r.Len() && d.data != nil {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, invalid("%q must be a string: %v", key, err)
	}
	b := d.key[:0]
	if n > len(d.key) {
		b = make([]byte, n)
	}
	b = b[:max(n, 0)]
	if err := d.dec.ReadFull(b); err != nil {
		return nil, invalid("%q must be a string: %v", key, err)
	}
	return b, nil
}

// span is where a string is in d.data.
type span struct{ at, n int }

// strSpan reads a string as str does, and says where it is instead of
// copying it.
func (d *decoder) strSpan(key string) (span, error) {
	n, err := d.dec.DecodeBytesLen()
	if err == nil && n > d.r.Len() {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return span{}, invalid("%q must be a string: %v", key, err)
	}
	sp := span{at: len(d.data) - d.r.Len(), n: max(n, 0)}
	d.pass(sp.n)
	return sp, nil
}

// entity reads an entity. Over bytes, its keys and properties are cut
// from one string of its bytes when share is set: one allocation where
// there were two for every property. share is for an entity whose strings
// live and die together, one the store replaces whole or a reply's; a
// merge's properties are strings of their own. (Views copy every entity
// into its packed form, engine.Packed, so since then a merge's substrings
// would no longer outlive its command there either.)
func (d *decoder) entity(share bool) (*engine.Entity, error) {
	n, err := d.mapLen()
	if err != nil {
		return nil, err
	}
	e := &engine.Entity{}
	var given keysGiven
	var seen [4]bool // pk, rk, ts, p
	var pk, rk, props span
	for i := 0; i < n; i++ {
		key, err := d.name("key")
		if err != nil {
			return nil, err
		}
		f := slices.Index(entityFields[:], string(key))
		if f < 0 {
			return nil, invalid("unknown entity field %q", key)
		}
		k := entityFields[f]
		if seen[f] {
			return nil, engine.Errorf(engine.CodeDuplicatePropertiesSpecified, "entity field %q is given more than once", k)
		}
		seen[f] = true
		switch k {
		case "pk", "rk":
			// The empty string is a key; nil is no value.
			if c, perr := d.dec.PeekCode(); perr == nil && c == msgpcode.Nil {
				return nil, engine.Errorf(engine.CodePropertiesNeedValue, "entity field %q is nil: a key needs a value (the empty string is one)", k)
			}
			var sp span
			var s string
			if d.data != nil {
				sp, err = d.strSpan(k)
			} else {
				s, err = d.str(k)
			}
			if k == "pk" {
				pk, e.PartitionKey = sp, s
				given |= givenPK
			} else {
				rk, e.RowKey = sp, s
				given |= givenRK
			}
		case "ts":
			e.Timestamp, err = d.dec.DecodeInt64()
		case "p":
			if d.data == nil {
				e.Properties, err = engine.DecodeProperties(d.dec)
				break
			}
			props.at = len(d.data) - d.r.Len()
			if props.n, err = engine.PropertiesLen(d.rest()); err == nil {
				d.pass(props.n)
			}
		}
		if err != nil {
			return nil, at(k, err)
		}
	}
	if err := given.require(); err != nil {
		return nil, err
	}
	if d.data != nil {
		if err := d.entityText(e, pk, rk, props, share); err != nil {
			return nil, at("p", err)
		}
	}
	return e, nil
}

// entityFields are the fields of an entity.
var entityFields = [4]string{"pk", "rk", "ts", "p"}

// entityText makes the strings of an entity read from d.data at the
// spans given: substrings of one string of its bytes when share is set,
// strings of their own otherwise.
func (d *decoder) entityText(e *engine.Entity, pk, rk, props span, share bool) error {
	if !share {
		e.PartitionKey = string(d.data[pk.at : pk.at+pk.n])
		e.RowKey = string(d.data[rk.at : rk.at+rk.n])
		if props.n > 0 {
			var err error
			e.Properties, _, err = engine.DecodePropertiesBytes(d.data[props.at:])
			return err
		}
		return nil
	}
	// From the first of the three to the end of the last: what lies
	// between (field names, a time) is a few bytes.
	lo, hi := min(pk.at, rk.at), max(pk.at+pk.n, rk.at+rk.n)
	if props.n > 0 {
		lo, hi = min(lo, props.at), max(hi, props.at+props.n)
	}
	s := string(d.data[lo:hi])
	e.PartitionKey = s[pk.at-lo : pk.at-lo+pk.n]
	e.RowKey = s[rk.at-lo : rk.at-lo+rk.n]
	if props.n > 0 {
		var err error
		e.Properties, _, err = engine.DecodePropertiesString(s[props.at-lo:])
		return err
	}
	return nil
}

// DecodeRequestMsgpack decodes a msgpack request. Its keys are the
// protocol's fields, each once and each one its operation takes
// (fields.go): anything else is refused with InvalidInput.
func DecodeRequestMsgpack(data []byte) (*engine.Request, error) {
	if len(data) > maxBody {
		return nil, engine.Errorf(engine.CodeRequestBodyTooLarge, "request of %d bytes; the limit is %d", len(data), maxBody)
	}
	d := requestDecoders.Get().(*decoder)
	d.reset(data)
	r := &engine.Request{}
	if err := d.request(r, false); err != nil {
		// Not put back: a decoder that failed may be in any state.
		return nil, at("request", err)
	}
	d.reset(nil)
	requestDecoders.Put(d)
	return r, nil
}

// request decodes a request, or an operation of a Batch (inBatch), into r.
func (d *decoder) request(r *engine.Request, inBatch bool) error {
	n, err := d.mapLen()
	if err != nil {
		return err
	}
	sh := shape{inBatch: inBatch}
	var op *operation
	for i := 0; i < n; i++ {
		key, err := d.name("key")
		if err != nil {
			return err
		}
		if err := sh.add(key); err != nil {
			return err
		}
		k := requestFields.name(key) // a known field: sh.add refuses the others
		switch k {
		case "op":
			var name []byte
			if name, err = d.name(k); err == nil {
				if op = operationNamed(name); op != nil {
					r.Op = op.name
				} else {
					r.Op = string(name)
				}
			}
		case "id":
			r.ID, err = d.str(k)
		case "ifMatch":
			r.IfMatch, err = d.str(k)
		case "partitionKey", "rowKey":
			// nil is no value; a missing key is read as "" (clients
			// before this rule left an empty key out).
			if c, perr := d.dec.PeekCode(); perr == nil && c == msgpcode.Nil {
				return engine.Errorf(engine.CodePropertiesNeedValue, "%q is nil: a key needs a value (the empty string is one)", k)
			}
			if k == "partitionKey" {
				r.PartitionKey, err = d.str(k)
			} else {
				r.RowKey, err = d.str(k)
			}
		case "table":
			r.Table, err = d.str(k)
		case "entity":
			// Properties come sorted by name. An entity that comes
			// before its operation, or a merge's, is not shared.
			r.Entity, err = d.entity(op != nil && !op.merges)
		case "ops":
			var m int
			if m, err = d.arrayLen(); err == nil {
				if err := engine.ValidateBatchOps(m); err != nil {
					return err
				}
				r.Ops = make([]engine.Request, m)
				for j := 0; j < m && err == nil; j++ {
					if err = d.request(&r.Ops[j], true); err != nil {
						err = engine.AsError(at(fmt.Sprintf("[%d]", j), err)).AtIndex(j)
					}
				}
			}
		case "messages":
			r.Messages, err = d.messages()
		case "asOf":
			if r.AsOf, err = d.dec.DecodeUint64(); err == nil && r.AsOf == 0 {
				return errAsOfZero()
			}
		case "position":
			r.Position, err = d.dec.DecodeUint64()
		default:
			// A Query's field: a Query is decoded by DecodeQueryRequest,
			// and the check below refuses it on any other operation.
			err = skip(d.dec)
		}
		if err != nil {
			return at(k, err)
		}
	}
	return sh.check([]byte(r.Op))
}

func (d *decoder) messages() ([]engine.Message, error) {
	n, err := d.arrayLen()
	if err != nil {
		return nil, err
	}
	if err := engine.ValidateMessageCount(n); err != nil {
		return nil, err
	}
	out := make([]engine.Message, n)
	for i := range out {
		m, err := d.arrayLen()
		if err != nil || m != 3 && m != 4 {
			return nil, invalid("message %d must be [queue, id, body] or [\"\", id, body, subject]", i)
		}
		if out[i].Queue, err = d.str("queue"); err != nil {
			return nil, err
		}
		if out[i].ID, err = d.str("id"); err != nil {
			return nil, err
		}
		if out[i].Body, err = d.dec.DecodeBytes(); err != nil {
			return nil, invalid("message %d body: %v", i, err)
		}
		if m == 4 {
			if out[i].Subject, err = d.str("subject"); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// DecodeReplyMsgpack decodes a msgpack reply; unknown fields are skipped.
func DecodeReplyMsgpack(data []byte) (*engine.Reply, error) {
	d := newDecoder(data)
	n, err := d.mapLen()
	if err != nil {
		return nil, at("reply", err)
	}
	r := &engine.Reply{}
	for i := 0; i < n; i++ {
		k, err := d.str("key")
		if err != nil {
			return nil, at("reply", err)
		}
		switch k {
		case "etag":
			r.ETag, err = d.str(k)
		case "timestamp":
			r.Timestamp, err = d.dec.DecodeInt64()
		case "seq":
			r.Seq, err = d.dec.DecodeUint64()
		case "duplicate":
			r.Duplicate, err = d.dec.DecodeBool()
		case "entity":
			r.Entity, err = d.entity(true)
		case "results":
			var m int
			if m, err = d.arrayLen(); err == nil {
				r.Results = make([]engine.Result, m)
				for j := 0; j < m && err == nil; j++ {
					if _, err = d.arrayLen(); err == nil {
						if r.Results[j].ETag, err = d.str("etag"); err == nil {
							r.Results[j].Timestamp, err = d.dec.DecodeInt64()
						}
					}
				}
			}
		case "tables":
			var m int
			if m, err = d.arrayLen(); err == nil {
				r.Tables = make([]engine.TableInfo, m)
				for j := 0; j < m && err == nil; j++ {
					t := &r.Tables[j]
					if _, err = d.arrayLen(); err == nil {
						if t.Name, err = d.str("name"); err == nil {
							if t.Epoch, err = d.dec.DecodeUint64(); err == nil {
								t.Created, err = d.dec.DecodeInt64()
							}
						}
					}
				}
			}
		case "error":
			r.Error, err = d.error()
		default:
			err = skip(d.dec)
		}
		if err != nil {
			return nil, at("reply: "+k, err)
		}
	}
	return r, nil
}

func (d *decoder) error() (*engine.Error, error) {
	n, err := d.mapLen()
	if err != nil {
		return nil, err
	}
	e := &engine.Error{Index: engine.NoIndex}
	for i := 0; i < n; i++ {
		k, err := d.str("key")
		if err != nil {
			return nil, err
		}
		switch k {
		case "code":
			var c string
			c, err = d.str(k)
			e.Code = engine.Code(c)
		case "message":
			e.Message, err = d.str(k)
		case "index":
			var ix int64
			ix, err = d.dec.DecodeInt64()
			e.Index = int(ix)
		default:
			err = skip(d.dec)
		}
		if err != nil {
			return nil, err
		}
	}
	return e, nil
}

// EncodeEntity writes an entity in the msgpack form of the protocol
// ({"pk", "rk", "ts", "p"}); other msgpack formats (the function ABI) embed
// entities this way.
func EncodeEntity(enc *msgpack.Encoder, ent *engine.Entity) error {
	e := &encoder{enc: enc}
	e.entity(ent)
	return e.err
}

// DecodeEntity reads an entity written by EncodeEntity.
func DecodeEntity(dec *msgpack.Decoder) (*engine.Entity, error) {
	return (&decoder{dec: dec}).entity(true)
}
