package wire

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cairn-dev/cairn/engine"
)

// ParseEntityJSON parses an Azure Tables entity JSON object.
//
// It is on the path of every HTTP insert and of every operation of a
// $batch, so it avoids encoding/json's reflection: one validating scan
// splits the object into its members, and each value is read where it
// lies. Anything the scan does not accept (invalid JSON, or JSON that is
// not an object) takes the encoding/json path, whose errors it reports.
func ParseEntityJSON(data []byte) (*engine.Entity, error) {
	sc := scanner{data: data}
	members, ok := sc.object()
	if !ok {
		return parseEntityJSONDecoded(data)
	}
	return entityFromMembers(members)
}

// member is one name and value of a JSON object; raw is the value's text.
type member struct {
	name string
	raw  []byte
}

// members are an object's members, the last of a repeated name winning
// (as encoding/json does when decoding into a map).
type members []member

func (ms members) get(name string) ([]byte, bool) {
	if i := ms.index(name); i >= 0 {
		return ms[i].raw, true
	}
	return nil, false
}

// annotation returns the value of name@odata.type, without building that
// name.
func (ms members) annotation(name string) ([]byte, bool) {
	const suffix = "@odata.type"
	for i := range ms {
		n := ms[i].name
		if len(n) == len(name)+len(suffix) && strings.HasPrefix(n, name) && strings.HasSuffix(n, suffix) {
			return ms[i].raw, true
		}
	}
	return nil, false
}

func (ms members) index(name string) int {
	for i := range ms {
		if ms[i].name == name {
			return i
		}
	}
	return -1
}

// scanner reads one JSON text. It accepts only valid JSON: whatever it
// refuses is left to encoding/json to explain.
type scanner struct {
	data  []byte
	i     int
	depth int
}

// maxScanDepth bounds nesting; deeper input goes to encoding/json.
const maxScanDepth = 1000

func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next byte after white space (0 at the end).
func (s *scanner) peek() byte {
	s.space()
	if s.i < len(s.data) {
		return s.data[s.i]
	}
	return 0
}

// object reads the whole input as one object and returns its members.
func (s *scanner) object() (members, bool) {
	if s.peek() != '{' {
		return nil, false
	}
	s.i++
	ms := make(members, 0, 16)
	if s.peek() == '}' {
		s.i++
		return ms, s.peek() == 0 && s.i == len(s.data)
	}
	for {
		if s.peek() != '"' {
			return nil, false
		}
		start := s.i
		if !s.str() {
			return nil, false
		}
		name, err := jsonString(s.data[start:s.i])
		if err != nil || s.peek() != ':' {
			return nil, false
		}
		s.i++
		s.space()
		start = s.i
		if !s.value() {
			return nil, false
		}
		m := member{name: name, raw: s.data[start:s.i]}
		if j := ms.index(name); j >= 0 {
			ms[j] = m
		} else {
			ms = append(ms, m)
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return ms, s.peek() == 0 && s.i == len(s.data)
		default:
			return nil, false
		}
	}
}

// value reads any JSON value at s.i.
func (s *scanner) value() bool {
	if s.i >= len(s.data) {
		return false
	}
	switch c := s.data[s.i]; {
	case c == '"':
		return s.str()
	case c == '{' || c == '[':
		return s.nested(c)
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

func (s *scanner) literal(word string) bool {
	if !bytes.HasPrefix(s.data[s.i:], []byte(word)) {
		return false
	}
	s.i += len(word)
	return true
}

// nested reads an object or array (open is '{' or '[').
func (s *scanner) nested(open byte) bool {
	if s.depth++; s.depth > maxScanDepth {
		return false
	}
	defer func() { s.depth-- }()
	close := byte('}')
	if open == '[' {
		close = ']'
	}
	s.i++
	if s.peek() == close {
		s.i++
		return true
	}
	for {
		if open == '{' {
			if s.peek() != '"' || !s.str() || s.peek() != ':' {
				return false
			}
			s.i++
		}
		s.space()
		if !s.value() {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case close:
			s.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string: no control characters, only JSON's escapes.
func (s *scanner) str() bool {
	d := s.data
	for i := s.i + 1; i < len(d); i++ {
		switch c := d[i]; {
		case c == '"':
			s.i = i + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if i++; i >= len(d) {
				return false
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(d) {
					return false
				}
				for _, h := range d[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return false
					}
				}
				i += 4
			default:
				return false
			}
		}
	}
	return false
}

// number reads -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	d, i := s.data, s.i
	digits := func() bool {
		start := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	s.i = i
	return true
}

// jsonString returns the text of a JSON string literal: its bytes when it
// has no escapes and is valid UTF-8, else encoding/json's reading of it
// (escapes resolved, invalid UTF-8 as U+FFFD).
func jsonString(raw []byte) (string, error) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		body := raw[1 : len(raw)-1]
		if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
			return string(body), nil
		}
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// validNumber reports whether raw is one JSON number and nothing else.
func validNumber(raw []byte) bool {
	s := scanner{data: raw}
	return len(raw) > 0 && s.number() && s.i == len(raw)
}

var nullLiteral = []byte("null")

// entityFromMembers builds the entity: keys, properties with their Edm
// annotations; Timestamp and odata.* members are the server's and are
// ignored, null values are skipped.
func entityFromMembers(ms members) (*engine.Entity, error) {
	var pk, rk string
	props := make([]engine.Property, 0, len(ms))
	for _, m := range ms {
		k := m.name
		switch {
		case k == "PartitionKey" || k == "RowKey":
			s := ""
			if !bytes.Equal(m.raw, nullLiteral) {
				if m.raw[0] != '"' {
					return nil, engine.Errorf(engine.CodeInvalidValueType, "%s must be a string", k)
				}
				var err error
				if s, err = jsonString(m.raw); err != nil {
					return nil, engine.Errorf(engine.CodeInvalidValueType, "%s must be a string", k)
				}
			}
			if k == "PartitionKey" {
				pk = s
			} else {
				rk = s
			}
		case k == "Timestamp", strings.HasPrefix(k, "odata."):
		case strings.HasSuffix(k, "@odata.type"):
			name := strings.TrimSuffix(k, "@odata.type")
			if _, ok := ms.get(name); !ok && name != "Timestamp" {
				return nil, invalid("annotation %q names no property", k)
			}
		default:
			if bytes.Equal(m.raw, nullLiteral) {
				continue
			}
			typ := ""
			if a, ok := ms.annotation(k); ok && !bytes.Equal(a, nullLiteral) {
				var err error
				if a[0] != '"' {
					return nil, invalid("annotation %q must be a string", k+"@odata.type")
				}
				if typ, err = jsonString(a); err != nil {
					return nil, invalid("annotation %q must be a string", k+"@odata.type")
				}
			}
			v, err := parseValue(m.raw, typ)
			if err != nil {
				return nil, at("property "+strconv.Quote(k), err)
			}
			props = append(props, engine.Property{Name: k, Value: v})
		}
	}
	return engine.NewEntity(pk, rk, props...), nil
}
