package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cairn-dev/cairn/engine"
)

// parseEntityJSONReference is parseEntity (ParseEntityJSON but for the
// keys' presence) as it was written on encoding/json (a map of raw
// members, then json.Unmarshal per value), kept as the reference that the
// differential tests hold the scanner to.
func parseEntityJSONReference(data []byte) (*engine.Entity, keysGiven, error) {
	return parseEntityJSONReferenceFrom(data, -1)
}

// parseEntityJSONReferenceFrom is parseEntityJSONReference visiting the
// members in name order from the first-th (in map order if first < 0):
// with several faults, the one reported is the first visited.
func parseEntityJSONReferenceFrom(data []byte, first int) (*engine.Entity, keysGiven, error) {
	// encoding/json reads bad UTF-8 and lone surrogate escapes as U+FFFD;
	// Cairn refuses them.
	if !utf8.Valid(data) {
		return nil, 0, invalid("the entity is not valid UTF-8")
	}
	if hasLoneSurrogate(data) {
		return nil, 0, invalid("the entity has an unpaired surrogate escape")
	}
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, 0, invalid("the entity is not a JSON object: %v", referenceErrText(err))
	}
	if dec.More() {
		return nil, 0, invalid("the entity has data after its JSON object")
	}
	if name, dup := duplicateName(data); dup {
		return nil, 0, engine.Errorf(engine.CodeDuplicatePropertiesSpecified, "%q is given more than once", name)
	}
	e := &engine.Entity{}
	var given keysGiven
	var props []engine.Property
	keys := slices.Collect(maps.Keys(m))
	if first >= 0 {
		slices.Sort(keys)
		first %= max(len(keys), 1)
		keys = append(keys[first:], keys[:first]...)
	}
	for _, k := range keys {
		raw := m[k]
		switch {
		case k == "PartitionKey" || k == "RowKey":
			if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
				return nil, 0, engine.Errorf(engine.CodePropertiesNeedValue, "%s is null", k)
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, 0, engine.Errorf(engine.CodeInvalidValueType, "%s must be a string", k)
			}
			if k == "PartitionKey" {
				e.PartitionKey, given = s, given|givenPK
			} else {
				e.RowKey, given = s, given|givenRK
			}
		case k == "Timestamp", strings.HasPrefix(k, "odata."):
		case strings.HasSuffix(k, "@odata.type"):
			name := strings.TrimSuffix(k, "@odata.type")
			if _, ok := m[name]; !ok && name != "Timestamp" {
				return nil, 0, invalid("annotation %q names no property", k)
			}
			var typ *string
			isType := func(want string) bool { return json.Unmarshal(raw, &typ) == nil && (typ == nil || *typ == want) }
			switch {
			case name == "Timestamp" && !isType("Edm.DateTime"):
				return nil, 0, invalid("annotation %q: Timestamp is an Edm.DateTime", k)
			case (name == "PartitionKey" || name == "RowKey") && !isType("Edm.String"):
				return nil, 0, invalid("annotation %q: the keys are Edm.String", k)
			}
		default:
			if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
				continue
			}
			typ := ""
			if a, ok := m[k+"@odata.type"]; ok {
				if err := json.Unmarshal(a, &typ); err != nil {
					return nil, 0, invalid("annotation %q must be a string", k+"@odata.type")
				}
			}
			v, err := parseValueReference(raw, typ)
			if err != nil {
				return nil, 0, at("property "+strconv.Quote(k), err)
			}
			props = append(props, engine.Property{Name: k, Value: v})
		}
	}
	ent := engine.NewEntity(e.PartitionKey, e.RowKey, props...)
	return ent, given, nil
}

// duplicateName reports a name that the object in data (valid JSON) has
// twice, reading its members as encoding/json's tokens.
func duplicateName(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.Token() // '{'
	seen := map[string]bool{}
	for dec.More() {
		tok, _ := dec.Token()
		name, _ := tok.(string)
		if seen[name] {
			return name, true
		}
		seen[name] = true
		var skip json.RawMessage
		dec.Decode(&skip)
	}
	return "", false
}

// hasLoneSurrogate reports whether JSON text has a \u escape of half a
// surrogate pair that is not followed (high) or preceded (low) by the
// other half. Outside strings a backslash is invalid JSON anyway.
func hasLoneSurrogate(data []byte) bool {
	high := false // the escape just read was a high surrogate
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' || i+1 >= len(data) {
			if high {
				return true
			}
			continue
		}
		if data[i+1] != 'u' || i+6 > len(data) {
			if high {
				return true
			}
			i++ // the escaped character
			continue
		}
		n, err := strconv.ParseUint(string(data[i+2:i+6]), 16, 16)
		i += 5
		if err != nil {
			continue // invalid JSON: refused anyway
		}
		isHigh, isLow := n >= 0xd800 && n < 0xdc00, n >= 0xdc00 && n <= 0xdfff
		switch {
		case high && !isLow, !high && isLow:
			return true
		case high:
			high = false
		default:
			high = isHigh
		}
	}
	return high
}

func referenceErrText(err error) string {
	if err == nil {
		return "null"
	}
	return err.Error()
}

func referenceWrongKind(typ, kind string) error {
	return engine.Errorf(engine.CodeInvalidValueType, "a %s value cannot be a JSON %s", typ, kind)
}

// parseValueReference reads one property value, annotated with typ ("" for
// none).
func parseValueReference(raw json.RawMessage, typ string) (engine.Value, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return engine.Value{}, invalid("empty value")
	}
	kind := "number"
	switch raw[0] {
	case '"':
		kind = "string"
	case 't', 'f':
		kind = "boolean"
	case '{', '[':
		return engine.Value{}, invalid("nested objects and arrays are not property values")
	}
	var str string
	if kind == "string" {
		if err := json.Unmarshal(raw, &str); err != nil {
			return engine.Value{}, invalid("bad string: %v", err)
		}
	}
	num := func() (json.Number, error) {
		var n json.Number
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&n); err != nil {
			return "", invalid("bad number %s", raw)
		}
		return n, nil
	}
	switch typ {
	case "":
		switch kind {
		case "string":
			return engine.String(str), nil
		case "boolean":
			return engine.Bool(raw[0] == 't'), nil
		}
		n, err := num()
		if err != nil {
			return engine.Value{}, err
		}
		if i, err := strconv.ParseInt(string(n), 10, 32); err == nil {
			return engine.Int32(int32(i)), nil
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return engine.Value{}, invalid("number %s is out of range", n)
		}
		return engine.Double(f), nil
	case "Edm.String":
		if kind != "string" {
			return engine.Value{}, referenceWrongKind(typ, kind)
		}
		return engine.String(str), nil
	case "Edm.Boolean":
		if kind != "boolean" {
			return engine.Value{}, referenceWrongKind(typ, kind)
		}
		return engine.Bool(raw[0] == 't'), nil
	case "Edm.Int32":
		if kind != "number" {
			return engine.Value{}, referenceWrongKind(typ, kind)
		}
		n, err := num()
		if err != nil {
			return engine.Value{}, err
		}
		i, err := strconv.ParseInt(string(n), 10, 32)
		if err != nil {
			return engine.Value{}, invalid("Edm.Int32 value %s is not a 32-bit integer", n)
		}
		return engine.Int32(int32(i)), nil
	case "Edm.Int64":
		s := str
		if kind == "number" {
			n, err := num()
			if err != nil {
				return engine.Value{}, err
			}
			s = string(n)
		} else if kind != "string" {
			return engine.Value{}, referenceWrongKind(typ, kind)
		}
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return engine.Value{}, invalid("Edm.Int64 value %q is not a 64-bit integer", s)
		}
		return engine.Int64(i), nil
	case "Edm.Double":
		switch kind {
		case "string":
			switch str {
			case "NaN":
				return engine.Double(math.NaN()), nil
			case "Infinity", "INF":
				return engine.Double(math.Inf(1)), nil
			case "-Infinity", "-INF":
				return engine.Double(math.Inf(-1)), nil
			}
			if !json.Valid([]byte(str)) || str == "" || !strings.ContainsAny(str[:1], "-0123456789") || str != strings.TrimSpace(str) {
				return engine.Value{}, invalid("Edm.Double value %q is not a number", str)
			}
			f, err := strconv.ParseFloat(str, 64)
			if err != nil {
				return engine.Value{}, invalid("Edm.Double value %q is out of range", str)
			}
			return engine.Double(f), nil
		case "number":
			n, err := num()
			if err != nil {
				return engine.Value{}, err
			}
			f, err := strconv.ParseFloat(string(n), 64)
			if err != nil {
				return engine.Value{}, invalid("Edm.Double value %s is out of range", n)
			}
			return engine.Double(f), nil
		}
		return engine.Value{}, referenceWrongKind(typ, kind)
	case "Edm.DateTime":
		if kind != "string" {
			return engine.Value{}, referenceWrongKind(typ, kind)
		}
		t, err := ParseTime(str)
		if err != nil {
			return engine.Value{}, invalid("Edm.DateTime value %q is not an RFC 3339 time", str)
		}
		return engine.DateTimeTicks(t), nil
	case "Edm.Guid":
		if kind != "string" {
			return engine.Value{}, referenceWrongKind(typ, kind)
		}
		g, err := engine.ParseGuid(str)
		if err != nil {
			return engine.Value{}, invalid("%v", err)
		}
		return engine.Guid(g), nil
	case "Edm.Binary":
		if kind != "string" {
			return engine.Value{}, referenceWrongKind(typ, kind)
		}
		b, err := base64.StdEncoding.DecodeString(str)
		if err != nil {
			if b, err = base64.RawStdEncoding.DecodeString(str); err != nil {
				return engine.Value{}, invalid("Edm.Binary value is not base64")
			}
		}
		return engine.Binary(b), nil
	}
	return engine.Value{}, invalid("unknown type %q (use Edm.String, Edm.Int32, Edm.Int64, Edm.Double, Edm.Boolean, Edm.DateTime, Edm.Guid or Edm.Binary)", typ)
}
