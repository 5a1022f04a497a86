package wire

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting of objects and arrays, the outermost
// counting as one: encoding/json's bound, so that the same texts are refused.
const maxJSONDepth = 10000

// jsonKind is the kind of a JSON value.
type jsonKind uint8

// The kinds of JSON values; true and false are kindBool.
const (
	kindInvalid jsonKind = iota
	kindString
	kindNumber
	kindBool
	kindNull
	kindObject
	kindArray
)

// String names the kind as error messages do.
func (k jsonKind) String() string {
	switch k {
	case kindString:
		return "string"
	case kindNumber:
		return "number"
	case kindBool:
		return "boolean"
	case kindNull:
		return "null"
	case kindObject:
		return "object"
	case kindArray:
		return "array"
	}
	return "invalid value"
}

// jsonValue is a scanned JSON value: its kind and its text in the input.
type jsonValue struct {
	// text is the value's text; for a string, the part between the quotes.
	text []byte
	kind jsonKind
	// plain is set on a string with neither escapes nor non-ASCII bytes:
	// its text is its value.
	plain bool
}

// str returns the value of a string as encoding/json reads it: the text
// itself when there is nothing to resolve, else a decoded copy.
func (v jsonValue) str() []byte {
	if v.plain {
		return v.text
	}
	return unquote(v.text)
}

// isTrue reports whether a boolean is true.
func (v jsonValue) isTrue() bool { return v.kind == kindBool && v.text[0] == 't' }

// jsonScanner reads JSON text (RFC 8259, exactly what encoding/json
// accepts), validating it as it goes. Its methods return false on invalid
// text, with the reason in err and its offset in errAt.
type jsonScanner struct {
	data  []byte
	pos   int
	depth int
	err   string
	errAt int
}

// fail records why the text is invalid at offset at, and returns false.
func (s *jsonScanner) fail(at int, why string) bool {
	if at >= len(s.data) {
		why = "unexpected end of input: " + why
	}
	s.err, s.errAt = why, at
	return false
}

// at reports whether the byte at s.pos is c.
func (s *jsonScanner) at(c byte) bool { return s.pos < len(s.data) && s.data[s.pos] == c }

// space skips white space.
func (s *jsonScanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// valid reads the text from s.pos as one JSON value, ignoring what
// follows it.
func (s *jsonScanner) valid() bool {
	_, ok := s.value()
	return ok
}

// value reads the value after white space at s.pos.
func (s *jsonScanner) value() (jsonValue, bool) {
	s.space()
	if s.pos >= len(s.data) {
		return jsonValue{}, s.fail(s.pos, "expected a value")
	}
	start := s.pos
	switch c := s.data[s.pos]; {
	case c == '"':
		return s.str()
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true", kindBool)
	case c == 'f':
		return s.literal("false", kindBool)
	case c == 'n':
		return s.literal("null", kindNull)
	case c == '{':
		ok := s.object(nil)
		return jsonValue{text: s.data[start:s.pos], kind: kindObject}, ok
	case c == '[':
		ok := s.array()
		return jsonValue{text: s.data[start:s.pos], kind: kindArray}, ok
	default:
		return jsonValue{}, s.fail(s.pos, fmt.Sprintf("invalid character %q looking for a value", c))
	}
}

// enter counts one more level of nesting, failing beyond maxJSONDepth.
func (s *jsonScanner) enter() bool {
	if s.depth++; s.depth > maxJSONDepth {
		return s.fail(s.pos, fmt.Sprintf("more than %d nested objects and arrays", maxJSONDepth))
	}
	return true
}

// object reads the object at s.pos, handing each member to visit unless
// visit is nil.
func (s *jsonScanner) object(visit func(name, value jsonValue)) bool {
	return s.members(func(name jsonValue) bool {
		v, ok := s.value()
		if ok && visit != nil {
			visit(name, v)
		}
		return ok
	})
}

// members reads the object at s.pos, calling member with each member's
// name once s.pos is at its value: member reads the value, and returns
// false to stop (with s.err set when the text is invalid).
func (s *jsonScanner) members(member func(name jsonValue) bool) bool {
	if !s.enter() {
		return false
	}
	s.pos++ // '{'
	s.space()
	if s.at('}') {
		s.pos++
		s.depth--
		return true
	}
	for {
		s.space()
		if !s.at('"') {
			return s.fail(s.pos, "expected a member name")
		}
		name, ok := s.str()
		if !ok {
			return false
		}
		s.space()
		if !s.at(':') {
			return s.fail(s.pos, "expected ':' after a member name")
		}
		s.pos++
		s.space()
		if !member(name) {
			return false
		}
		s.space()
		switch {
		case s.at(','):
			s.pos++
		case s.at('}'):
			s.pos++
			s.depth--
			return true
		default:
			return s.fail(s.pos, "expected ',' or '}' after an object member")
		}
	}
}

// array reads the array at s.pos.
func (s *jsonScanner) array() bool {
	return s.elements(func() bool {
		_, ok := s.value()
		return ok
	})
}

// elements reads the array at s.pos, calling element once s.pos is at
// each element: element reads it, and returns false to stop (with s.err
// set when the text is invalid).
func (s *jsonScanner) elements(element func() bool) bool {
	if !s.enter() {
		return false
	}
	s.pos++ // '['
	s.space()
	if s.at(']') {
		s.pos++
		s.depth--
		return true
	}
	for {
		s.space()
		if !element() {
			return false
		}
		s.space()
		switch {
		case s.at(','):
			s.pos++
		case s.at(']'):
			s.pos++
			s.depth--
			return true
		default:
			return s.fail(s.pos, "expected ',' or ']' after an array element")
		}
	}
}

// literal reads true, false or null.
func (s *jsonScanner) literal(word string, kind jsonKind) (jsonValue, bool) {
	end := s.pos + len(word)
	if end > len(s.data) || string(s.data[s.pos:end]) != word {
		return jsonValue{}, s.fail(s.pos, "invalid literal (expected "+word+")")
	}
	v := jsonValue{text: s.data[s.pos:end], kind: kind}
	s.pos = end
	return v, true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number() (jsonValue, bool) {
	d, i := s.data, s.pos
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = digitsEnd(d, i)
	default:
		return jsonValue{}, s.fail(i, "expected a digit in a number")
	}
	if i < len(d) && d[i] == '.' {
		if i = digitsEnd(d, i+1); d[i-1] == '.' {
			return jsonValue{}, s.fail(i, "expected a digit after a decimal point")
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if j := digitsEnd(d, i); j > i {
			i = j
		} else {
			return jsonValue{}, s.fail(i, "expected a digit in an exponent")
		}
	}
	v := jsonValue{text: d[s.pos:i], kind: kindNumber}
	s.pos = i
	return v, true
}

// digitsEnd returns the end of the run of decimal digits at d[i:].
func digitsEnd(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}

// specialBytes flags, in the high bit of each of the eight bytes of x
// (read little endian), the control characters, quotes and backslashes,
// and the non-ASCII bytes too if nonASCII is set. It is the SWAR test of
// appendString (the high bit of a byte of (y-lsb*n)&^y is set when the
// byte of y is below n): the lowest flag is exact, flags above it may be
// false.
func specialBytes(x uint64, nonASCII bool) uint64 {
	q, bs := x^(lsb*'"'), x^(lsb*'\\')
	m := (x-lsb*0x20)&^x | (q-lsb)&^q | (bs-lsb)&^bs
	if nonASCII {
		m |= x
	}
	return m & msb
}

// skipPlain returns the index in d of the first byte from i that
// specialBytes flags, or one at or past the end of d.
func skipPlain(d []byte, i int, nonASCII bool) int {
	for rest := d[i:]; len(rest) >= 8; rest = rest[8:] {
		if m := specialBytes(binary.LittleEndian.Uint64(rest), nonASCII); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	return i
}

// str reads the string whose opening quote is at s.pos: no control
// characters, only JSON's escapes (their meaning is left to unquote),
// valid UTF-8, and no \u escape of half a surrogate pair without its other
// half. (encoding/json reads bad UTF-8 and lone surrogates as U+FFFD, which
// would make different keys or names one; they are refused instead.)
func (s *jsonScanner) str() (jsonValue, bool) {
	d := s.data
	start := s.pos + 1
	plain := true // no escapes and ASCII so far
	for i := start; ; {
		i = skipPlain(d, i, plain)
		if i >= len(d) {
			return jsonValue{}, s.fail(i, "unterminated string")
		}
		switch c := d[i]; {
		case c == '"':
			// (A plain string is ASCII; after an escape, skipPlain no
			// longer stops at non-ASCII bytes, so they are checked here.)
			if !plain && !utf8.Valid(d[start:i]) {
				return jsonValue{}, s.fail(start+invalidUTF8At(d[start:i]), "invalid UTF-8 in string")
			}
			s.pos = i + 1
			return jsonValue{text: d[start:i], kind: kindString, plain: plain}, true
		case c == '\\':
			plain = false
			n := escapeLen(d[i:])
			if n == 0 {
				return jsonValue{}, s.fail(i, "invalid escape in string")
			}
			if n == 6 {
				if r := hex4(d[i+2:]); utf16.IsSurrogate(r) {
					if r >= 0xdc00 || i+6 >= len(d) || d[i+6] != '\\' || escapeLen(d[i+6:]) != 6 || d[i+7] != 'u' {
						return jsonValue{}, s.fail(i, "unpaired surrogate escape in string")
					}
					if low := hex4(d[i+8:]); low < 0xdc00 || low > 0xdfff {
						return jsonValue{}, s.fail(i, "unpaired surrogate escape in string")
					}
					n = 12
				}
			}
			i += n
		case c < 0x20:
			return jsonValue{}, s.fail(i, fmt.Sprintf("control character %q in string", c))
		default:
			plain = plain && c < utf8.RuneSelf
			i++
		}
	}
}

// invalidUTF8At returns the offset of the first byte of b that does not
// begin a valid UTF-8 sequence.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// escapeLen returns the length of the valid escape that e starts with
// (e[0] is a backslash), or 0.
func escapeLen(e []byte) int {
	if len(e) < 2 {
		return 0
	}
	switch e[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if len(e) >= 6 && hex4(e[2:6]) >= 0 {
			return 6
		}
	}
	return 0
}

// hex4 reads four hex digits, or returns -1.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}
