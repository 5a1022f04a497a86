package engine

import (
	"fmt"
	"io"
	"math"

	"github.com/vmihailenco/msgpack/v5"
)

// The msgpack form of a property list, shared by the journal and the wire:
// an array of [name, type, value] triples, where type is the Type number and
// value is a msgpack str (String), int (Int32, Int64, DateTime ticks),
// float64 (Double), bool (Boolean) or bin (Guid: 16 bytes; Binary). The type
// number keeps every value's type exact: an Int64 never comes back as a
// Double, a Guid never as a String.

// EncodeProperties writes props in the msgpack form above.
func EncodeProperties(enc *msgpack.Encoder, props []Property) error {
	if err := enc.EncodeArrayLen(len(props)); err != nil {
		return err
	}
	for _, p := range props {
		if err := enc.EncodeArrayLen(3); err != nil {
			return err
		}
		if err := enc.EncodeString(p.Name); err != nil {
			return err
		}
		if err := enc.EncodeUint8(uint8(p.Value.t)); err != nil {
			return err
		}
		if err := encodeValue(enc, p.Value); err != nil {
			return err
		}
	}
	return nil
}

func encodeValue(enc *msgpack.Encoder, v Value) error {
	switch v.t {
	case TypeString:
		return enc.EncodeString(v.s)
	case TypeInt32, TypeInt64, TypeDateTime:
		return enc.EncodeInt(int64(v.n))
	case TypeDouble:
		return enc.EncodeFloat64(math.Float64frombits(v.n))
	case TypeBoolean:
		return enc.EncodeBool(v.n != 0)
	case TypeGuid, TypeBinary:
		// What EncodeBytes writes of a non-nil slice (a length, then the
		// bytes), without copying the value into one where the writer
		// takes strings (the journal's and the wire's do).
		if w, ok := enc.Writer().(io.StringWriter); ok {
			if err := enc.EncodeBytesLen(len(v.s)); err != nil {
				return err
			}
			_, err := w.WriteString(v.s)
			return err
		}
		return enc.EncodeBytes([]byte(v.s))
	}
	return fmt.Errorf("engine: encode property of invalid type %d", v.t)
}

// DecodeProperties reads a property list written by EncodeProperties. It
// checks the shape and the types, not the limits (see Validate). The result
// is sorted by name.
func DecodeProperties(dec *msgpack.Decoder) ([]Property, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, nil
	}
	if n > maxDecodeProperties {
		return nil, fmt.Errorf("property list of %d entries", n)
	}
	props := make([]Property, 0, n)
	sorted := true
	for i := 0; i < n; i++ {
		m, err := dec.DecodeArrayLen()
		if err != nil {
			return nil, err
		}
		if m != 3 {
			return nil, fmt.Errorf("property %d: want [name, type, value], got %d elements", i, m)
		}
		name, err := dec.DecodeString()
		if err != nil {
			return nil, fmt.Errorf("property %d name: %w", i, err)
		}
		t, err := dec.DecodeUint8()
		if err != nil {
			return nil, fmt.Errorf("property %q type: %w", name, err)
		}
		v, err := decodeValue(dec, Type(t))
		if err != nil {
			return nil, fmt.Errorf("property %q: %w", name, err)
		}
		if i > 0 && props[i-1].Name > name {
			sorted = false
		}
		props = append(props, Property{Name: name, Value: v})
	}
	if !sorted {
		e := Entity{Properties: props}
		e.sortProperties()
	}
	return props, nil
}

// maxDecodeProperties bounds the allocation a hostile length prefix can
// cause; it is far above the 252-property limit that validation enforces.
const maxDecodeProperties = 1 << 16

func decodeValue(dec *msgpack.Decoder, t Type) (Value, error) {
	switch t {
	case TypeString:
		s, err := dec.DecodeString()
		return Value{t: t, s: s}, err
	case TypeInt32:
		i, err := dec.DecodeInt64()
		if err == nil && (i < math.MinInt32 || i > math.MaxInt32) {
			return Value{}, fmt.Errorf("Edm.Int32 value %d out of range", i)
		}
		return Value{t: t, n: uint64(i)}, err
	case TypeInt64, TypeDateTime:
		i, err := dec.DecodeInt64()
		return Value{t: t, n: uint64(i)}, err
	case TypeDouble:
		f, err := dec.DecodeFloat64()
		return Value{t: t, n: math.Float64bits(f)}, err
	case TypeBoolean:
		b, err := dec.DecodeBool()
		return Bool(b), err
	case TypeGuid:
		b, err := decodeBytes(dec, 16)
		if err == nil && len(b) != 16 {
			return Value{}, fmt.Errorf("Edm.Guid of %d bytes, want 16", len(b))
		}
		return Value{t: t, s: string(b)}, err
	case TypeBinary:
		// Bounded by the entity's limit, not the property's, so that a
		// value a little too large is still refused by validation, with
		// PropertyValueTooLarge.
		b, err := decodeBytes(dec, MaxEntitySize)
		return Value{t: t, s: string(b)}, err
	}
	return Value{}, fmt.Errorf("unknown property type %d", t)
}

// decodeBytes reads a bin (or str) value of at most limit bytes. The
// length prefix is checked before anything is allocated: msgpack's
// DecodeBytes allocates whatever length the input claims, so five bytes
// of a hostile record or request could otherwise take 4 GiB.
func decodeBytes(dec *msgpack.Decoder, limit int) ([]byte, error) {
	n, err := dec.DecodeBytesLen()
	if err != nil || n < 0 {
		return nil, err
	}
	if n > limit {
		return nil, fmt.Errorf("a value of %d bytes; at most %d", n, limit)
	}
	b := make([]byte, n)
	if err := dec.ReadFull(b); err != nil {
		return nil, err
	}
	return b, nil
}
