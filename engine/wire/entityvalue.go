package wire

import (
	"encoding/base64"
	"math"
	"strconv"

	"github.com/cairn-dev/cairn/engine"
)

// wrongKind refuses a value whose JSON kind does not suit its type.
func wrongKind(typ string, kind jsonKind) error {
	return engine.Errorf(engine.CodeInvalidValueType, "a %s value cannot be a JSON %s", typ, kind)
}

// parseValue reads one property value (not null), annotated with typ
// (empty for none).
func parseValue(v jsonValue, typ []byte) (engine.Value, error) {
	if v.kind == kindObject || v.kind == kindArray {
		return engine.Value{}, invalid("nested objects and arrays are not property values")
	}
	switch string(typ) {
	case "":
		return inferredValue(v)
	case "Edm.String":
		if v.kind != kindString {
			return engine.Value{}, wrongKind("Edm.String", v.kind)
		}
		return engine.String(string(v.str())), nil
	case "Edm.Boolean":
		if v.kind != kindBool {
			return engine.Value{}, wrongKind("Edm.Boolean", v.kind)
		}
		return engine.Bool(v.isTrue()), nil
	case "Edm.Int32":
		if v.kind != kindNumber {
			return engine.Value{}, wrongKind("Edm.Int32", v.kind)
		}
		i, ok := int32Of(v.text)
		if !ok {
			return engine.Value{}, invalid("Edm.Int32 value %s is not a 32-bit integer", v.text)
		}
		return engine.Int32(i), nil
	case "Edm.Int64":
		return int64Value(v)
	case "Edm.Double":
		return doubleValue(v)
	case "Edm.DateTime":
		if v.kind != kindString {
			return engine.Value{}, wrongKind("Edm.DateTime", v.kind)
		}
		s := v.str()
		t, err := ParseTime(string(s))
		if err != nil {
			return engine.Value{}, invalid("Edm.DateTime value %q is not an RFC 3339 time with a zone and at most 7 fractional digits", s)
		}
		return engine.DateTimeTicks(t), nil
	case "Edm.Guid":
		if v.kind != kindString {
			return engine.Value{}, wrongKind("Edm.Guid", v.kind)
		}
		g, err := engine.ParseGuid(string(v.str()))
		if err != nil {
			return engine.Value{}, invalid("%v", err)
		}
		return engine.Guid(g), nil
	case "Edm.Binary":
		if v.kind != kindString {
			return engine.Value{}, wrongKind("Edm.Binary", v.kind)
		}
		b, ok := decodeBase64(v.str())
		if !ok {
			return engine.Value{}, invalid("Edm.Binary value is not base64")
		}
		return engine.Binary(b), nil
	}
	return engine.Value{}, invalid("unknown type %q (use Edm.String, Edm.Int32, Edm.Int64, Edm.Double, Edm.Boolean, Edm.DateTime, Edm.Guid or Edm.Binary)", typ)
}

// inferredValue reads a value without annotation: a string, a boolean, an
// Int32 if the number is an integer that fits, else a Double.
func inferredValue(v jsonValue) (engine.Value, error) {
	switch v.kind {
	case kindString:
		return engine.String(string(v.str())), nil
	case kindBool:
		return engine.Bool(v.isTrue()), nil
	}
	if i, ok := int32Of(v.text); ok {
		return engine.Int32(i), nil
	}
	f, err := strconv.ParseFloat(string(v.text), 64)
	if err != nil {
		return engine.Value{}, invalid("number %s is out of range", v.text)
	}
	return engine.Double(f), nil
}

// int32Of reads a JSON number that is an integer of 32 bits, as
// strconv.ParseInt(num, 10, 32) does but without an error to allocate.
func int32Of(num []byte) (int32, bool) {
	digits := num
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	// JSON numbers have no leading zeros: more than 10 digits is too big.
	if len(digits) == 0 || len(digits) > 10 {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false // a fraction or an exponent
		}
		n = n*10 + int64(c-'0')
	}
	if len(digits) < len(num) {
		n = -n
	}
	if n != int64(int32(n)) {
		return 0, false
	}
	return int32(n), true
}

// int64Value reads an Edm.Int64: a number, or a string of one.
func int64Value(v jsonValue) (engine.Value, error) {
	var s []byte
	switch v.kind {
	case kindNumber:
		s = v.text
	case kindString:
		s = v.str()
	default:
		return engine.Value{}, wrongKind("Edm.Int64", v.kind)
	}
	i, err := strconv.ParseInt(string(s), 10, 64)
	if err != nil {
		return engine.Value{}, invalid("Edm.Int64 value %q is not a 64-bit integer", s)
	}
	return engine.Int64(i), nil
}

// doubleValue reads an Edm.Double: a number, or a string of a JSON number,
// of NaN or of an infinity (Infinity, -Infinity, INF, -INF). Other strings
// that strconv reads ("nan", "inf", "0x1p4", "+5") are refused.
func doubleValue(v jsonValue) (engine.Value, error) {
	switch v.kind {
	case kindNumber:
		f, err := strconv.ParseFloat(string(v.text), 64)
		if err != nil {
			return engine.Value{}, invalid("Edm.Double value %s is out of range", v.text)
		}
		return engine.Double(f), nil
	case kindString:
		s := v.str()
		switch string(s) {
		case "NaN":
			return engine.Double(math.NaN()), nil
		case "Infinity", "INF":
			return engine.Double(math.Inf(1)), nil
		case "-Infinity", "-INF":
			return engine.Double(math.Inf(-1)), nil
		}
		num := jsonScanner{data: s}
		if len(s) == 0 || !(s[0] == '-' || s[0] >= '0' && s[0] <= '9') {
			return engine.Value{}, invalid("Edm.Double value %q is not a number (nor NaN, Infinity or -Infinity)", s)
		}
		if _, ok := num.number(); !ok || num.pos != len(s) {
			return engine.Value{}, invalid("Edm.Double value %q is not a number (nor NaN, Infinity or -Infinity)", s)
		}
		f, err := strconv.ParseFloat(string(s), 64)
		if err != nil {
			return engine.Value{}, invalid("Edm.Double value %q is out of range", s)
		}
		return engine.Double(f), nil
	}
	return engine.Value{}, wrongKind("Edm.Double", v.kind)
}

// decodeBase64 reads standard base64, padded or not.
func decodeBase64(s []byte) ([]byte, bool) {
	// Unpadded input decodes to the most bytes.
	b := make([]byte, base64.RawStdEncoding.DecodedLen(len(s)))
	if n, err := base64.StdEncoding.Decode(b, s); err == nil {
		return b[:n], true
	}
	n, err := base64.RawStdEncoding.Decode(b, s)
	return b[:n], err == nil
}
