package wire

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"
	"strconv"

	"github.com/cairn-dev/cairn/engine"
)

// annotationSuffix ends the name of a member that gives a property's type.
const annotationSuffix = "@odata.type"

// ParseEntityJSON parses an Azure Tables entity JSON object: PartitionKey
// and RowKey, and properties with their optional Name@odata.type
// annotations. Timestamp and odata.* members are the server's and are
// ignored; null values are skipped.
//
// It is on the path of every HTTP insert and of every operation of a
// $batch, so it reads the text once and without reflection: a jsonScanner
// validates the object and notes where each member's name and value lie;
// the members are put in name order (a repeated name is refused:
// DuplicatePropertiesSpecified); annotations are matched with their
// properties; and each value is read where it lies.
//
// PartitionKey and RowKey must both be given, as strings (the empty string
// is a key): a key missing or null is PropertiesNeedValue.
func ParseEntityJSON(data []byte) (*engine.Entity, error) {
	e, given, err := parseEntity(data)
	if err != nil {
		return nil, err
	}
	if err := given.require(); err != nil {
		return nil, err
	}
	return e, nil
}

// parseEntity parses an entity object, reporting which keys it gave.
func parseEntity(data []byte) (*engine.Entity, keysGiven, error) {
	// Most entities fit: no allocation for the members.
	var buf [32]member
	var orderBuf [32]nameKey
	ms, err := scanMembers(data, buf[:0])
	if err != nil {
		return nil, 0, err
	}
	order, err := byName(ms, orderBuf[:0])
	if err != nil {
		return nil, 0, err
	}
	if err := linkAnnotations(ms, order); err != nil {
		return nil, 0, err
	}
	return buildEntity(ms, order)
}

// role is what a member of an entity object is, by its name.
type role uint8

const (
	roleProperty role = iota
	rolePartitionKey
	roleRowKey
	roleIgnored    // Timestamp and odata.*
	roleAnnotation // Name@odata.type
)

// roleOf classifies a member by its name.
func roleOf(name []byte) role {
	switch {
	case string(name) == "PartitionKey":
		return rolePartitionKey
	case string(name) == "RowKey":
		return roleRowKey
	case string(name) == "Timestamp", bytes.HasPrefix(name, []byte("odata.")):
		return roleIgnored
	case bytes.HasSuffix(name, []byte(annotationSuffix)):
		return roleAnnotation
	}
	return roleProperty
}

// member is one member of an entity object.
type member struct {
	name  []byte // decoded
	value jsonValue
	role  role
	// annotation is the index of a property's Name@odata.type member
	// plus one, or 0 (set by linkAnnotations).
	annotation int
}

// scanMembers reads data as one JSON object and nothing else, appending
// its members to ms in the order they come.
func scanMembers(data []byte, ms []member) ([]member, error) {
	s := jsonScanner{data: data}
	s.space()
	if !s.at('{') {
		if s.pos == len(data) {
			return nil, invalid("the entity is empty: it must be a JSON object")
		}
		return nil, invalid("the entity is not a JSON object: it starts with %q", data[s.pos])
	}
	ok := s.object(func(name, value jsonValue) {
		n := name.str()
		ms = append(ms, member{name: n, value: value, role: roleOf(n)})
	})
	if !ok {
		return nil, invalid("the entity is not valid JSON: %s at offset %d", s.err, s.errAt)
	}
	s.space()
	if s.pos != len(data) {
		return nil, invalid("the entity has data after its JSON object (at offset %d)", s.pos)
	}
	return ms, nil
}

// nameKey is a member's place in name order: its index, and the first
// eight bytes of its name as a big-endian number (zero-padded), which
// orders most names without comparing them.
type nameKey struct {
	prefix uint64
	i      int
}

// namePrefix is a nameKey's prefix for name.
func namePrefix(name []byte) uint64 {
	var b [8]byte
	copy(b[:], name)
	return binary.BigEndian.Uint64(b[:])
}

// compareName orders the member of key k against name, whose prefix is
// prefix.
func compareName(ms []member, k nameKey, name []byte, prefix uint64) int {
	if k.prefix != prefix {
		return cmp.Compare(k.prefix, prefix)
	}
	return bytes.Compare(ms[k.i].name, name)
}

// byName appends to order the keys of the members in name order, and
// refuses a name given twice (as the Table service does: with encoding/json
// into a map the last would silently win). Names compare as decoded, so
// "A" and "\u0041" are the same. (Keys are sorted rather than members:
// they move cheaply.)
func byName(ms []member, order []nameKey) ([]nameKey, error) {
	for i := range ms {
		order = append(order, nameKey{namePrefix(ms[i].name), i})
	}
	sortKeys(ms, order)
	for k := 1; k < len(order); k++ {
		if a, b := order[k-1], order[k]; a.prefix == b.prefix && bytes.Equal(ms[a.i].name, ms[b.i].name) {
			return nil, engine.Errorf(engine.CodeDuplicatePropertiesSpecified, "%q is given more than once", ms[a.i].name)
		}
	}
	return order, nil
}

// sortKeys sorts keys by name, stably: by insertion for the few members of
// most entities (quicker than slices' generic code), else by
// slices.SortStableFunc.
func sortKeys(ms []member, keys []nameKey) {
	if len(keys) > 32 {
		slices.SortStableFunc(keys, func(a, b nameKey) int {
			return compareName(ms, a, ms[b.i].name, b.prefix)
		})
		return
	}
	less := func(a, b nameKey) bool {
		return a.prefix < b.prefix || a.prefix == b.prefix && bytes.Compare(ms[a.i].name, ms[b.i].name) < 0
	}
	for i := 1; i < len(keys); i++ {
		k, j := keys[i], i
		for ; j > 0 && less(k, keys[j-1]); j-- {
			keys[j] = keys[j-1]
		}
		keys[j] = k
	}
}

// linkAnnotations points each property at its annotation. An annotation
// must name a member of the object (or Timestamp, which clients may
// annotate without sending); one of a key must say Edm.String, one of
// Timestamp Edm.DateTime (or be null).
func linkAnnotations(ms []member, order []nameKey) error {
	for k, key := range order {
		a := &ms[key.i]
		if a.role != roleAnnotation {
			continue
		}
		name := a.name[:len(a.name)-len(annotationSuffix)]
		prefix := namePrefix(name)
		// The named member sorts before its annotation.
		j, found := slices.BinarySearchFunc(order[:k], name, func(k nameKey, name []byte) int {
			return compareName(ms, k, name, prefix)
		})
		switch {
		case string(name) == "Timestamp":
			if !annotates(a.value, "Edm.DateTime") {
				return invalid("annotation %q: Timestamp is an Edm.DateTime", a.name)
			}
		case found:
			switch p := &ms[order[j].i]; p.role {
			case roleProperty:
				p.annotation = key.i + 1
			case rolePartitionKey, roleRowKey:
				if !annotates(a.value, "Edm.String") {
					return invalid("annotation %q: the keys are Edm.String", a.name)
				}
			}
		default:
			return invalid("annotation %q names no property", a.name)
		}
	}
	return nil
}

// annotates reports whether an annotation's value is typ, or null (none).
func annotates(v jsonValue, typ string) bool {
	return v.kind == kindNull || v.kind == kindString && string(v.str()) == typ
}

// buildEntity reads the keys and the properties' values, taking the
// members in name order.
func buildEntity(ms []member, order []nameKey) (*engine.Entity, keysGiven, error) {
	var pk, rk string
	var given keysGiven
	n := 0
	for _, key := range order {
		if m := &ms[key.i]; m.role == roleProperty && m.value.kind != kindNull {
			n++
		}
	}
	props := make([]engine.Property, 0, n)
	for _, key := range order {
		m := &ms[key.i]
		switch m.role {
		case rolePartitionKey, roleRowKey:
			s, err := keyValue(m)
			if err != nil {
				return nil, 0, err
			}
			if m.role == rolePartitionKey {
				pk, given = s, given|givenPK
			} else {
				rk, given = s, given|givenRK
			}
		case roleProperty:
			if m.value.kind == kindNull {
				continue
			}
			v, err := propertyValue(ms, m)
			if err != nil {
				return nil, 0, err
			}
			props = append(props, engine.Property{Name: string(m.name), Value: v})
		}
	}
	// The properties are in name order already: NewEntity's sort is a scan.
	return engine.NewEntity(pk, rk, props...), given, nil
}

// keyValue reads PartitionKey or RowKey: a string ("" is a key); null is
// no value, PropertiesNeedValue.
func keyValue(m *member) (string, error) {
	switch m.value.kind {
	case kindString:
		return string(m.value.str()), nil
	case kindNull:
		return "", engine.Errorf(engine.CodePropertiesNeedValue, "%s is null: a key needs a value (the empty string is one)", m.name)
	}
	return "", engine.Errorf(engine.CodeInvalidValueType, "%s must be a string", m.name)
}

// propertyValue reads a property's value with the type its annotation
// gives, if any.
func propertyValue(ms []member, m *member) (engine.Value, error) {
	var typ []byte
	if m.annotation > 0 {
		a := &ms[m.annotation-1]
		switch a.value.kind {
		case kindString:
			typ = a.value.str()
		case kindNull:
		default:
			return engine.Value{}, invalid("annotation %q must be a string", a.name)
		}
	}
	v, err := parseValue(m.value, typ)
	if err != nil {
		return engine.Value{}, at("property "+strconv.Quote(string(m.name)), err)
	}
	return v, nil
}
