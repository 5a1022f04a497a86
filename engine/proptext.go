package engine

import (
	"fmt"
	"io"
	"math"
)

// A property list read straight from its bytes, without msgpack.Decoder:
// the hot paths (a request at the door, a record at the view) decode
// every entity, and the Decoder makes each name and each String, Guid and
// Binary value a string of its own, twenty allocations for ten
// properties. DecodePropertiesString makes them substrings of one string
// instead: the caller converts the entity's bytes once, and the list costs
// that string and the slice. The reader accepts exactly what
// DecodeProperties accepts, with the Decoder's leniencies (nil for an
// empty string, zero or false; any integer code for the type number and a
// number; str or bin for a string), which FuzzDecodePropertiesString
// holds it to.
//
// What it costs: every value cut from a string keeps the whole string
// alive, so a caller hands it the text of one whole entity and no more
// (never a message with other entities or bodies), and only where the
// entity's properties live and die together (see engine/wire).

// PropertiesLen returns the length in bytes of the property list at the
// start of b, which it checks as DecodeProperties does, allocating
// nothing.
func PropertiesLen(b []byte) (int, error) {
	_, n, err := parseProperties(b, false)
	return n, err
}

// DecodePropertiesString reads the property list at the start of s, as
// DecodeProperties does, and returns it with its length in bytes. Names and
// String, Guid and Binary values are substrings of s: they keep s alive.
func DecodePropertiesString(s string) ([]Property, int, error) {
	return parseProperties(s, true)
}

// DecodePropertiesBytes reads the property list at the start of b, as
// DecodeProperties does, and returns it with its length in bytes. Each
// name and value is a string of its own: none keeps b or another alive.
func DecodePropertiesBytes(b []byte) ([]Property, int, error) {
	return parseProperties(b, true)
}

// text is what the reader reads: a string, whose slices are free
// substrings, or bytes.
type text interface{ ~string | ~[]byte }

// parseProperties reads a property list from the start of src, keeping
// the properties when keep is set (only checking them otherwise), and
// returns the bytes it read.
func parseProperties[T text](src T, keep bool) ([]Property, int, error) {
	r := propReader[T]{src: src}
	n, err := r.arrayLen()
	if err != nil {
		return nil, 0, err
	}
	if n < 0 {
		return nil, r.off, nil
	}
	if n > maxDecodeProperties || n > (len(src)-r.off)/minPropertyBytes {
		return nil, 0, fmt.Errorf("property list of %d entries in %d bytes", n, len(src)-r.off)
	}
	var props []Property
	if keep {
		props = make([]Property, 0, n)
	}
	sorted := true
	for i := 0; i < n; i++ {
		m, err := r.arrayLen()
		if err != nil {
			return nil, 0, err
		}
		if m != 3 {
			return nil, 0, fmt.Errorf("property %d: want [name, type, value], got %d elements", i, m)
		}
		name, err := r.str()
		if err != nil {
			return nil, 0, fmt.Errorf("property %d name: %w", i, err)
		}
		t, err := r.uint()
		if err != nil {
			return nil, 0, fmt.Errorf("property %q type: %w", name, err)
		}
		v, err := r.value(Type(t), keep)
		if err != nil {
			return nil, 0, fmt.Errorf("property %q: %w", name, err)
		}
		if keep {
			if i > 0 && props[i-1].Name > string(name) {
				sorted = false
			}
			props = append(props, Property{Name: string(name), Value: v})
		}
	}
	if !sorted {
		e := Entity{Properties: props}
		e.sortProperties()
	}
	return props, r.off, nil
}

// msgpack codes the reader knows (the spec's names).
const (
	mpNil      = 0xc0
	mpFalse    = 0xc2
	mpTrue     = 0xc3
	mpBin8     = 0xc4
	mpBin16    = 0xc5
	mpBin32    = 0xc6
	mpFloat    = 0xca
	mpDouble   = 0xcb
	mpUint8    = 0xcc
	mpUint16   = 0xcd
	mpUint32   = 0xce
	mpUint64   = 0xcf
	mpInt8     = 0xd0
	mpInt16    = 0xd1
	mpInt32    = 0xd2
	mpInt64    = 0xd3
	mpStr8     = 0xd9
	mpStr16    = 0xda
	mpStr32    = 0xdb
	mpArray16  = 0xdc
	mpArray32  = 0xdd
	mpFixArray = 0x90 // to 0x9f, the length in the low nibble
	mpFixStr   = 0xa0 // to 0xbf, the length in the low five bits
)

// minPropertyBytes is the smallest encoding of a property, [name, type,
// value] in one byte each: a list's length above the bytes left over
// this is refused before its slice is allocated.
const minPropertyBytes = 4

var errShort = io.ErrUnexpectedEOF

// propReader reads msgpack values from src at off.
type propReader[T text] struct {
	src T
	off int
}

func (r *propReader[T]) code() (byte, error) {
	if r.off >= len(r.src) {
		return 0, errShort
	}
	c := r.src[r.off]
	r.off++
	return c, nil
}

// be reads a big-endian unsigned integer of size bytes.
func (r *propReader[T]) be(size int) (uint64, error) {
	if len(r.src)-r.off < size {
		return 0, errShort
	}
	var n uint64
	for i := range size {
		n = n<<8 | uint64(r.src[r.off+i])
	}
	r.off += size
	return n, nil
}

// arrayLen reads an array's length: -1 for nil.
func (r *propReader[T]) arrayLen() (int, error) {
	c, err := r.code()
	switch {
	case err != nil:
		return 0, err
	case c == mpNil:
		return -1, nil
	case c&0xf0 == mpFixArray:
		return int(c & 0x0f), nil
	case c == mpArray16:
		n, err := r.be(2)
		return int(n), err
	case c == mpArray32:
		n, err := r.be(4)
		return int(n), err
	}
	return 0, fmt.Errorf("invalid code %#x for an array", c)
}

// bytesLen reads the length of a str or bin: -1 for nil.
func (r *propReader[T]) bytesLen() (int, error) {
	c, err := r.code()
	switch {
	case err != nil:
		return 0, err
	case c == mpNil:
		return -1, nil
	case c&0xe0 == mpFixStr:
		return int(c & 0x1f), nil
	case c == mpStr8 || c == mpBin8:
		n, err := r.be(1)
		return int(n), err
	case c == mpStr16 || c == mpBin16:
		n, err := r.be(2)
		return int(n), err
	case c == mpStr32 || c == mpBin32:
		n, err := r.be(4)
		return int(n), err
	}
	return 0, fmt.Errorf("invalid code %#x for a string", c)
}

// str reads a str or bin (nil is empty), no longer than the bytes left.
func (r *propReader[T]) str() (T, error) {
	return r.strMax(math.MaxInt)
}

// strMax reads a str or bin of at most limit bytes.
func (r *propReader[T]) strMax(limit int) (T, error) {
	var none T
	n, err := r.bytesLen()
	if err != nil || n < 0 {
		return none, err
	}
	if n > limit {
		return none, fmt.Errorf("a value of %d bytes; at most %d", n, limit)
	}
	if n > len(r.src)-r.off {
		return none, errShort
	}
	s := r.src[r.off : r.off+n]
	r.off += n
	return s, nil
}

// integer reads any integer code (nil is 0) as msgpack.Decoder's
// DecodeInt64 and DecodeUint64 do: signed codes are sign-extended, the
// 64-bit ones taken as they are.
func (r *propReader[T]) integer() (uint64, error) {
	c, err := r.code()
	if err != nil {
		return 0, err
	}
	return r.integerOf(c)
}

func (r *propReader[T]) integerOf(c byte) (uint64, error) {
	switch {
	case c == mpNil:
		return 0, nil
	case c <= 0x7f || c >= 0xe0: // positive and negative fixint
		return uint64(int8(c)), nil
	}
	var n uint64
	var err error
	switch c {
	case mpUint8:
		return r.be(1)
	case mpUint16:
		return r.be(2)
	case mpUint32:
		return r.be(4)
	case mpUint64, mpInt64:
		return r.be(8)
	case mpInt8:
		n, err = r.be(1)
		return uint64(int8(n)), err
	case mpInt16:
		n, err = r.be(2)
		return uint64(int16(n)), err
	case mpInt32:
		n, err = r.be(4)
		return uint64(int32(n)), err
	}
	return 0, fmt.Errorf("invalid code %#x for an integer", c)
}

// uint reads the type number as DecodeUint8 does: truncated to 8 bits.
func (r *propReader[T]) uint() (uint8, error) {
	n, err := r.integer()
	return uint8(n), err
}

func (r *propReader[T]) float() (float64, error) {
	c, err := r.code()
	if err != nil {
		return 0, err
	}
	switch c {
	case mpFloat:
		n, err := r.be(4)
		return float64(math.Float32frombits(uint32(n))), err
	case mpDouble:
		n, err := r.be(8)
		return math.Float64frombits(n), err
	}
	n, err := r.integerOf(c)
	return float64(int64(n)), err
}

func (r *propReader[T]) bool() (bool, error) {
	c, err := r.code()
	switch {
	case err != nil:
		return false, err
	case c == mpNil, c == mpFalse:
		return false, nil
	case c == mpTrue:
		return true, nil
	}
	return false, fmt.Errorf("invalid code %#x for a bool", c)
}

// value reads a value of type t; the limits are decodeValue's.
func (r *propReader[T]) value(t Type, keep bool) (Value, error) {
	switch t {
	case TypeString:
		s, err := r.str()
		return keptValue(t, s, keep), err
	case TypeInt32:
		n, err := r.integer()
		if i := int64(n); err == nil && (i < math.MinInt32 || i > math.MaxInt32) {
			return Value{}, fmt.Errorf("Edm.Int32 value %d out of range", i)
		}
		return Value{t: t, n: n}, err
	case TypeInt64, TypeDateTime:
		n, err := r.integer()
		return Value{t: t, n: n}, err
	case TypeDouble:
		f, err := r.float()
		return Value{t: t, n: math.Float64bits(f)}, err
	case TypeBoolean:
		b, err := r.bool()
		return Bool(b), err
	case TypeGuid:
		b, err := r.strMax(16)
		if err == nil && len(b) != 16 {
			return Value{}, fmt.Errorf("Edm.Guid of %d bytes, want 16", len(b))
		}
		return keptValue(t, b, keep), err
	case TypeBinary:
		// Bounded by the entity's limit, as decodeValue is.
		b, err := r.strMax(MaxEntitySize)
		return keptValue(t, b, keep), err
	}
	return Value{}, fmt.Errorf("unknown property type %d", t)
}

func keptValue[T text](t Type, s T, keep bool) Value {
	if !keep {
		return Value{t: t}
	}
	return Value{t: t, s: string(s)}
}
