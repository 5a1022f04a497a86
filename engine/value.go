package engine

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"time"
)

// Type is an entity property's type. The numeric values are written into the
// journal and onto the wire: they never change and are never reused.
type Type uint8

// The eight property types of the Azure Table data model.
const (
	TypeInvalid  Type = 0
	TypeString   Type = 1
	TypeInt32    Type = 2
	TypeInt64    Type = 3
	TypeDouble   Type = 4
	TypeBoolean  Type = 5
	TypeDateTime Type = 6
	TypeGuid     Type = 7
	TypeBinary   Type = 8
)

var typeNames = [...]string{
	TypeInvalid:  "Invalid",
	TypeString:   "Edm.String",
	TypeInt32:    "Edm.Int32",
	TypeInt64:    "Edm.Int64",
	TypeDouble:   "Edm.Double",
	TypeBoolean:  "Edm.Boolean",
	TypeDateTime: "Edm.DateTime",
	TypeGuid:     "Edm.Guid",
	TypeBinary:   "Edm.Binary",
}

// String returns the EDM name of the type ("Edm.Int64").
func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Valid reports whether t is one of the eight property types.
func (t Type) Valid() bool { return t >= TypeString && t <= TypeBinary }

// ParseType maps an EDM type name ("Edm.Int64") to its Type.
func ParseType(name string) (Type, bool) {
	for t := TypeString; t <= TypeBinary; t++ {
		if typeNames[t] == name {
			return t, true
		}
	}
	return TypeInvalid, false
}

// Value is one typed property value. It is immutable: Binary and Guid bytes
// are copied in when the value is made, so a value handed to the store never
// changes afterwards. The zero Value is invalid.
type Value struct {
	t Type
	n uint64 // Int32, Int64, Boolean (0/1), DateTime ticks, Double bits
	s string // String; Binary bytes; Guid's 16 bytes
}

// Ticks are 100-nanosecond intervals since 1970-01-01T00:00:00Z, the
// resolution of an Azure DateTime.
const ticksPerSecond = 10_000_000

// MinDateTime and MaxDateTime bound a DateTime value as Azure does.
var (
	MinDateTime = time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxDateTime = time.Date(9999, 12, 31, 23, 59, 59, 999_999_900, time.UTC)
)

// TimeToTicks converts t to ticks, truncating below 100 ns.
func TimeToTicks(t time.Time) int64 {
	sec := t.Unix()
	return sec*ticksPerSecond + int64(t.Nanosecond()/100)
}

// TicksToTime converts ticks to a UTC time.
func TicksToTime(ticks int64) time.Time {
	sec, rem := ticks/ticksPerSecond, ticks%ticksPerSecond
	if rem < 0 {
		sec--
		rem += ticksPerSecond
	}
	return time.Unix(sec, rem*100).UTC()
}

// String makes a String value.
func String(s string) Value { return Value{t: TypeString, s: s} }

// Int32 makes an Int32 value.
func Int32(i int32) Value { return Value{t: TypeInt32, n: uint64(int64(i))} }

// Int64 makes an Int64 value.
func Int64(i int64) Value { return Value{t: TypeInt64, n: uint64(i)} }

// Double makes a Double value.
func Double(f float64) Value { return Value{t: TypeDouble, n: math.Float64bits(f)} }

// Bool makes a Boolean value.
func Bool(b bool) Value {
	v := Value{t: TypeBoolean}
	if b {
		v.n = 1
	}
	return v
}

// DateTime makes a DateTime value, truncated to 100 ns and kept in UTC.
func DateTime(t time.Time) Value { return Value{t: TypeDateTime, n: uint64(TimeToTicks(t))} }

// DateTimeTicks makes a DateTime value from ticks since the Unix epoch.
func DateTimeTicks(ticks int64) Value { return Value{t: TypeDateTime, n: uint64(ticks)} }

// Guid makes a Guid value from its 16 bytes in the canonical (big-endian,
// as printed) order.
func Guid(g [16]byte) Value { return Value{t: TypeGuid, s: string(g[:])} }

// Binary makes a Binary value; b is copied.
func Binary(b []byte) Value { return Value{t: TypeBinary, s: string(b)} }

// ParseGuid parses "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (hex, any case).
func ParseGuid(s string) ([16]byte, error) {
	var g [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return g, fmt.Errorf("guid %q is not of the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", s)
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	if _, err := hex.Decode(g[:], []byte(h)); err != nil {
		return g, fmt.Errorf("guid %q: %v", s, err)
	}
	return g, nil
}

// Type returns the value's type; TypeInvalid for the zero Value.
func (v Value) Type() Type { return v.t }

// Str returns a String value's text ("" for other types).
func (v Value) Str() string {
	if v.t != TypeString {
		return ""
	}
	return v.s
}

// Int returns an Int32 or Int64 value as int64 (0 for other types).
func (v Value) Int() int64 {
	if v.t != TypeInt32 && v.t != TypeInt64 {
		return 0
	}
	return int64(v.n)
}

// Float returns a Double value (0 for other types).
func (v Value) Float() float64 {
	if v.t != TypeDouble {
		return 0
	}
	return math.Float64frombits(v.n)
}

// Boolean returns a Boolean value (false for other types).
func (v Value) Boolean() bool { return v.t == TypeBoolean && v.n != 0 }

// Ticks returns a DateTime value in ticks since the Unix epoch.
func (v Value) Ticks() int64 {
	if v.t != TypeDateTime {
		return 0
	}
	return int64(v.n)
}

// Time returns a DateTime value as a UTC time.
func (v Value) Time() time.Time { return TicksToTime(v.Ticks()) }

// GuidBytes returns a Guid value's 16 bytes.
func (v Value) GuidBytes() [16]byte {
	var g [16]byte
	if v.t == TypeGuid {
		copy(g[:], v.s)
	}
	return g
}

// GuidString returns a Guid value in its canonical lowercase text form.
func (v Value) GuidString() string {
	g := v.GuidBytes()
	h := hex.EncodeToString(g[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Bytes returns a copy of a Binary value's bytes.
func (v Value) Bytes() []byte {
	if v.t != TypeBinary {
		return nil
	}
	return []byte(v.s)
}

// Equal reports whether two values have the same type and the same bits.
// Doubles compare by bits, so NaN equals NaN and 0 differs from -0: this is
// identity of stored values, not query comparison.
func (v Value) Equal(o Value) bool { return v.t == o.t && v.n == o.n && v.s == o.s }

// GoString renders the value for test failures and logs.
func (v Value) GoString() string {
	switch v.t {
	case TypeString:
		return fmt.Sprintf("String(%q)", v.s)
	case TypeInt32, TypeInt64:
		return fmt.Sprintf("%s(%d)", strings.TrimPrefix(v.t.String(), "Edm."), v.Int())
	case TypeDouble:
		return fmt.Sprintf("Double(%v)", v.Float())
	case TypeBoolean:
		return fmt.Sprintf("Boolean(%v)", v.Boolean())
	case TypeDateTime:
		return fmt.Sprintf("DateTime(%s)", v.Time().Format(time.RFC3339Nano))
	case TypeGuid:
		return fmt.Sprintf("Guid(%s)", v.GuidString())
	case TypeBinary:
		return fmt.Sprintf("Binary(%x)", v.s)
	}
	return "Invalid"
}

// Compare orders two values of the same type (-1, 0, 1); it is the order of
// query comparisons. Strings and Binary compare as bytes (ordinal), Guids by
// their bytes, Doubles numerically. ok is false when the types differ.
func (v Value) Compare(o Value) (c int, ok bool) {
	if v.t != o.t {
		if (v.t == TypeInt32 || v.t == TypeInt64) && (o.t == TypeInt32 || o.t == TypeInt64) {
			return cmpInt(v.Int(), o.Int()), true
		}
		return 0, false
	}
	switch v.t {
	case TypeString, TypeGuid:
		return strings.Compare(v.s, o.s), true
	case TypeBinary:
		return bytes.Compare([]byte(v.s), []byte(o.s)), true
	case TypeInt32, TypeInt64, TypeDateTime:
		return cmpInt(int64(v.n), int64(o.n)), true
	case TypeBoolean:
		return cmpInt(int64(v.n), int64(o.n)), true
	case TypeDouble:
		a, b := v.Float(), o.Float()
		switch {
		case a < b:
			return -1, true
		case a > b:
			return 1, true
		case a == b:
			return 0, true
		}
		return 0, false // NaN
	}
	return 0, false
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Len returns the length in bytes of a String (UTF-8), Binary or Guid
// value, and 0 for the fixed-size types.
func (v Value) Len() int { return len(v.s) }
