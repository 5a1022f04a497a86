package sdk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/functions/abi"
)

// The guest's msgpack codec for the ABI's messages, written out instead of
// msgpack's reflection: in a Go guest under wazero with close-on-context-
// done every loop iteration checks in with the runtime, and reflection's many
// small loops made decoding a trigger the largest part of an invocation.
// Entities, whose form engine/wire defines, go through abi.Entity's own
// (non-reflecting) coder. codec_test.go checks the result against
// abi.Marshal and abi.Unmarshal.

// ent encodes entities and decodes them; one of each serves the guest,
// which runs one call at a time.
var ent struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
	rd  bytes.Reader
	dec *msgpack.Decoder
}

func init() {
	ent.enc = msgpack.NewEncoder(&ent.buf)
	ent.enc.UseCompactInts(true)
	ent.dec = msgpack.NewDecoder(&ent.rd)
}

// Encoding: msgpack appended to a slice.

func appendMapLen(b []byte, n int) []byte { return append(b, 0x80|byte(n)) } // n < 16

// appendLen appends the header of a map (fix 0x80, 16-bit 0xde, 32-bit
// 0xdf) or an array (0x90, 0xdc, 0xdd) of n entries.
func appendLen(b []byte, fix, wide byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, fix|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, wide), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, wide+1), uint32(n))
}

func appendStr(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xda)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0xdb)
		b = binary.BigEndian.AppendUint32(b, uint32(n))
	}
	return append(b, s...)
}

func appendBin(b, v []byte) []byte {
	switch n := len(v); {
	case n <= math.MaxUint8:
		b = append(b, 0xc4, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xc5)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0xc6)
		b = binary.BigEndian.AppendUint32(b, uint32(n))
	}
	return append(b, v...)
}

func appendInt(b []byte, i int64) []byte {
	switch {
	case i >= 0 && i <= 0x7f, i < 0 && i >= -32:
		return append(b, byte(i))
	case i >= math.MinInt32 && i <= math.MaxInt32:
		b = append(b, 0xd2)
		return binary.BigEndian.AppendUint32(b, uint32(i))
	}
	b = append(b, 0xd3)
	return binary.BigEndian.AppendUint64(b, uint64(i))
}

// encodeRequest encodes the request of an operation (see abi's types).
func encodeRequest(req any) ([]byte, error) {
	switch r := req.(type) {
	case *abi.GetRequest:
		b := appendMapLen(make([]byte, 0, 16+len(r.Table)+len(r.PartitionKey)+len(r.RowKey)), 3)
		b = appendStr(appendStr(b, "t"), r.Table)
		b = appendStr(appendStr(b, "pk"), r.PartitionKey)
		return appendStr(appendStr(b, "rk"), r.RowKey), nil
	case *abi.QueryRequest:
		b := appendMapLen(make([]byte, 0, 32+len(r.Table)+len(r.PartitionKey)+len(r.Filter)), 4)
		b = appendStr(appendStr(b, "t"), r.Table)
		b = appendStr(appendStr(b, "pk"), r.PartitionKey)
		b = appendStr(appendStr(b, "f"), r.Filter)
		return appendInt(appendStr(b, "top"), int64(r.Top)), nil
	case *abi.SettingRequest:
		b := appendMapLen(make([]byte, 0, 8+len(r.Name)), 1)
		return appendStr(appendStr(b, "k"), r.Name), nil
	case *abi.EnqueueRequest:
		b := appendMapLen(make([]byte, 0, 16+len(r.Queue)+len(r.Body)), 2)
		b = appendStr(appendStr(b, "q"), r.Queue)
		return appendBin(appendStr(b, "b"), r.Body), nil
	case *abi.WriteRequest:
		ent.buf.Reset()
		if err := r.Entity.EncodeMsgpack(ent.enc); err != nil {
			return nil, err
		}
		b := appendMapLen(make([]byte, 0, 32+len(r.Table)+len(r.Op)+len(r.IfMatch)+ent.buf.Len()), 4)
		b = appendStr(appendStr(b, "t"), r.Table)
		b = appendStr(appendStr(b, "op"), r.Op)
		b = append(appendStr(b, "e"), ent.buf.Bytes()...)
		return appendStr(appendStr(b, "if"), r.IfMatch), nil
	case *abi.RespondRequest:
		b := appendInt(appendStr(appendMapLen(make([]byte, 0, 64), 2), "s"), int64(r.Status))
		b = appendLen(appendStr(b, "h"), 0x80, 0xde, len(r.Header))
		for k, vs := range r.Header {
			b = appendLen(appendStr(b, k), 0x90, 0xdc, len(vs))
			for _, v := range vs {
				b = appendStr(b, v)
			}
		}
		return b, nil
	}
	return nil, fmt.Errorf("cannot encode a %T", req)
}

// Decoding.

var errShort = errors.New("the message ends early")

// reader reads msgpack; its first error sticks and ends the reading.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.fail(errShort)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) next(n uint64) []byte {
	if uint64(len(r.b)) < n {
		r.fail(errShort)
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

func (r *reader) u16() uint64 {
	if b := r.next(2); b != nil {
		return uint64(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *reader) u32() uint64 {
	if b := r.next(4); b != nil {
		return uint64(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.next(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// null consumes a nil if one is next.
func (r *reader) null() bool {
	if len(r.b) > 0 && r.b[0] == 0xc0 {
		r.b = r.b[1:]
		return true
	}
	return false
}

// mapLen reads a map's length (0 for nil).
func (r *reader) mapLen() int {
	switch c := r.byte(); {
	case c&0xf0 == 0x80:
		return int(c & 0x0f)
	case c == 0xde:
		return int(r.u16())
	case c == 0xdf:
		return r.length(r.u32())
	case c == 0xc0:
		return 0
	}
	r.fail(errors.New("want a map"))
	return 0
}

// arrayLen reads an array's length (0 for nil).
func (r *reader) arrayLen() int {
	switch c := r.byte(); {
	case c&0xf0 == 0x90:
		return int(c & 0x0f)
	case c == 0xdc:
		return int(r.u16())
	case c == 0xdd:
		return r.length(r.u32())
	case c == 0xc0:
		return 0
	}
	r.fail(errors.New("want an array"))
	return 0
}

// length bounds a declared length by what is left (each item is at least
// a byte), so that a bad message cannot make a huge allocation.
func (r *reader) length(n uint64) int {
	if n > uint64(len(r.b)) {
		r.fail(errShort)
		return 0
	}
	return int(n)
}

// raw reads a string's or binary's bytes, aliasing the message.
func (r *reader) raw() []byte {
	switch c := r.byte(); {
	case c&0xe0 == 0xa0:
		return r.next(uint64(c & 0x1f))
	case c == 0xd9, c == 0xc4:
		return r.next(uint64(r.byte()))
	case c == 0xda, c == 0xc5:
		return r.next(r.u16())
	case c == 0xdb, c == 0xc6:
		return r.next(r.u32())
	case c == 0xc0:
		return nil
	}
	r.fail(errors.New("want a string"))
	return nil
}

func (r *reader) str() string { return string(r.raw()) }

func (r *reader) bin() []byte {
	if b := r.raw(); b != nil {
		return append([]byte{}, b...)
	}
	return nil
}

func (r *reader) bool() bool {
	switch r.byte() {
	case 0xc3:
		return true
	case 0xc2, 0xc0:
		return false
	}
	r.fail(errors.New("want a boolean"))
	return false
}

// int reads an integer of any width as its 64 bits (uint64 values above
// MaxInt64 keep their bits).
func (r *reader) int() int64 {
	switch c := r.byte(); {
	case c <= 0x7f, c >= 0xe0:
		return int64(int8(c))
	case c == 0xcc:
		return int64(r.byte())
	case c == 0xcd:
		return int64(r.u16())
	case c == 0xce:
		return int64(r.u32())
	case c == 0xcf:
		return int64(r.u64())
	case c == 0xd0:
		return int64(int8(r.byte()))
	case c == 0xd1:
		return int64(int16(r.u16()))
	case c == 0xd2:
		return int64(int32(r.u32()))
	case c == 0xd3:
		return int64(r.u64())
	case c == 0xc0:
		return 0
	}
	r.fail(errors.New("want an integer"))
	return 0
}

// skip skips one value of any type.
func (r *reader) skip() {
	for n := 1; n > 0 && r.err == nil; n-- {
		switch c := r.byte(); {
		case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		case c&0xf0 == 0x80:
			n += 2 * int(c&0x0f)
		case c&0xf0 == 0x90:
			n += int(c & 0x0f)
		case c&0xe0 == 0xa0:
			r.next(uint64(c & 0x1f))
		case c == 0xcc, c == 0xd0:
			r.next(1)
		case c == 0xcd, c == 0xd1, c == 0xd4:
			r.next(2)
		case c == 0xd5:
			r.next(3)
		case c == 0xca, c == 0xce, c == 0xd2:
			r.next(4)
		case c == 0xd6:
			r.next(5)
		case c == 0xcb, c == 0xcf, c == 0xd3:
			r.next(8)
		case c == 0xd7:
			r.next(9)
		case c == 0xd8:
			r.next(17)
		case c == 0xc4, c == 0xd9:
			r.next(uint64(r.byte()))
		case c == 0xc5, c == 0xda:
			r.next(r.u16())
		case c == 0xc6, c == 0xdb:
			r.next(r.u32())
		case c == 0xc7:
			r.next(uint64(r.byte()) + 1)
		case c == 0xc8:
			r.next(r.u16() + 1)
		case c == 0xc9:
			r.next(r.u32() + 1)
		case c == 0xdc:
			n += int(r.u16())
		case c == 0xdd:
			n += r.length(r.u32())
		case c == 0xde:
			n += 2 * int(r.u16())
		case c == 0xdf:
			n += 2 * r.length(r.u32())
		default:
			r.fail(fmt.Errorf("unknown msgpack code 0x%02x", c))
		}
	}
}

// entity reads an abi.Entity with its own decoder.
func (r *reader) entity() abi.Entity {
	var e abi.Entity
	if r.err != nil || r.null() {
		return e
	}
	ent.rd.Reset(r.b)
	ent.dec.Reset(&ent.rd)
	if err := e.DecodeMsgpack(ent.dec); err != nil {
		r.fail(err)
		return abi.Entity{}
	}
	r.b = r.b[len(r.b)-ent.rd.Len():]
	return e
}

// decodeResponse decodes the runner's answer. Unknown fields are skipped.
func decodeResponse(b []byte, resp *abi.Response) error {
	if len(b) == 1 && b[0] == 0x80 { // the usual empty answer
		return nil
	}
	r := &reader{b: b}
	for n := r.mapLen(); n > 0 && r.err == nil; n-- {
		switch string(r.raw()) {
		case "err":
			if !r.null() {
				resp.Error = r.error()
			}
		case "trig":
			if !r.null() {
				resp.Trigger = r.trigger()
			}
		case "e":
			if !r.null() {
				e := r.entity()
				resp.Entity = &e
			}
		case "v":
			if !r.null() {
				v := r.str()
				resp.Value = &v
			}
		case "es":
			n := r.arrayLen()
			if n > 0 {
				resp.Entities = make([]abi.Entity, n)
			}
			for i := range n {
				resp.Entities[i] = r.entity()
			}
		default:
			r.skip()
		}
	}
	if r.err != nil {
		return r.err
	}
	if len(r.b) > 0 {
		return errors.New("trailing bytes after the message")
	}
	return nil
}

func (r *reader) error() *abi.Error {
	e := &abi.Error{}
	for n := r.mapLen(); n > 0 && r.err == nil; n-- {
		switch string(r.raw()) {
		case "c":
			e.Code = r.str()
		case "m":
			e.Message = r.str()
		default:
			r.skip()
		}
	}
	return e
}

func (r *reader) trigger() *abi.Trigger {
	t := &abi.Trigger{}
	for n := r.mapLen(); n > 0 && r.err == nil; n-- {
		switch string(r.raw()) {
		case "id":
			t.ID = r.str()
		case "kind":
			t.Kind = r.str()
		case "fn":
			t.Function = r.str()
		case "ver":
			t.Version = int(r.int())
		case "q":
			t.Queue = r.str()
		case "b":
			t.Body = r.bin()
		case "dq":
			t.DequeueCount = int(r.int())
		case "ts":
			t.Time = r.int()
		case "ch":
			if !r.null() {
				t.Change = r.change()
			}
		case "http":
			if !r.null() {
				t.HTTP = r.httpRequest()
			}
		default:
			r.skip()
		}
	}
	return t
}

func (r *reader) httpRequest() *abi.HTTPRequest {
	h := &abi.HTTPRequest{}
	for n := r.mapLen(); n > 0 && r.err == nil; n-- {
		switch string(r.raw()) {
		case "m":
			h.Method = r.str()
		case "p":
			h.Path = r.str()
		case "r":
			h.Route = r.str()
		case "qs":
			h.Query = r.str()
		case "c":
			h.Caller = r.str()
		case "pa":
			if !r.null() {
				h.Params = map[string]string{}
				for m := r.mapLen(); m > 0 && r.err == nil; m-- {
					k := r.str()
					h.Params[k] = r.str()
				}
			}
		case "h":
			if !r.null() {
				h.Header = map[string][]string{}
				for m := r.mapLen(); m > 0 && r.err == nil; m-- {
					k := r.str()
					vs := make([]string, 0, 1)
					for a := r.arrayLen(); a > 0 && r.err == nil; a-- {
						vs = append(vs, r.str())
					}
					h.Header[k] = vs
				}
			}
		default:
			r.skip()
		}
	}
	return h
}

func (r *reader) change() *abi.Change {
	c := &abi.Change{}
	for n := r.mapLen(); n > 0 && r.err == nil; n-- {
		switch string(r.raw()) {
		case "t":
			c.Table = r.str()
		case "seq":
			c.Seq = uint64(r.int())
		case "i":
			c.Index = int(r.int())
		case "del":
			c.Deleted = r.bool()
		case "e":
			c.Entity = r.entity()
		case "etag":
			c.ETag = r.str()
		case "petag":
			c.PrevETag = r.str()
		case "punk":
			c.PrevUnknown = r.bool()
		case "prev":
			if !r.null() {
				e := r.entity()
				c.Prev = &e
			}
		default:
			r.skip()
		}
	}
	return c
}
