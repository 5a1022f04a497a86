package engine

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Property is one named, typed value of an entity.
type Property struct {
	Name  string
	Value Value
}

// Version is an entity's position in its table's journal: the sequence of the
// journal record that last wrote it and the index of the write inside that
// record (a record can hold several writes: a batch, or a group commit).
// It is what the ETag encodes.
type Version struct {
	Seq   uint64
	Index uint32
}

// Entity is a row of a table. Properties are kept sorted by name, which makes
// encodings deterministic and lookups a binary search. Entities held by views
// are shared between snapshots and must never be modified: copy first.
type Entity struct {
	PartitionKey string
	RowKey       string
	// Timestamp is set by the server on every write, in ticks (100 ns since
	// the Unix epoch). Clients cannot set it.
	Timestamp int64
	// Version is set when the write is committed to the journal.
	Version    Version
	Properties []Property
}

// NewEntity builds an entity with the given keys and properties (sorted
// here; duplicates are left for validation to report).
func NewEntity(pk, rk string, props ...Property) *Entity {
	e := &Entity{PartitionKey: pk, RowKey: rk, Properties: props}
	e.sortProperties()
	return e
}

func (e *Entity) sortProperties() {
	slices.SortStableFunc(e.Properties, func(a, b Property) int { return strings.Compare(a.Name, b.Name) })
}

// Get returns the named property's value.
func (e *Entity) Get(name string) (Value, bool) {
	v, _, ok := e.GetHinted(name, -1)
	return v, ok
}

// GetHinted is Get for a caller that looks up the same name in many
// entities: hint is where the name was in the last entity, and it is
// checked first (entities of one kind have their properties at the same
// places, so a scan touches one property instead of a binary search's
// several). It returns the index to hint next time (-1 if absent).
func (e *Entity) GetHinted(name string, hint int) (Value, int, bool) {
	if uint(hint) < uint(len(e.Properties)) && e.Properties[hint].Name == name {
		return e.Properties[hint].Value, hint, true
	}
	props := e.Properties
	lo, hi := 0, len(props)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if props[m].Name < name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(props) && props[lo].Name == name {
		return props[lo].Value, lo, true
	}
	return Value{}, -1, false
}

// Clone returns a copy of e that shares no slice with it.
func (e *Entity) Clone() *Entity {
	c := *e
	c.Properties = append([]Property(nil), e.Properties...)
	return &c
}

// Merged returns a new entity holding base's properties overwritten and
// extended by patch's (Merge semantics). Neither input is modified.
func Merged(base, patch []Property) []Property {
	out := make([]Property, 0, len(base)+len(patch))
	i, j := 0, 0
	for i < len(base) && j < len(patch) {
		switch {
		case base[i].Name < patch[j].Name:
			out = append(out, base[i])
			i++
		case base[i].Name > patch[j].Name:
			out = append(out, patch[j])
			j++
		default:
			out = append(out, patch[j])
			i++
			j++
		}
	}
	out = append(out, base[i:]...)
	return append(out, patch[j:]...)
}

// ETag formats the ETag of an entity written at v in the table incarnation
// epoch. Epoch separates a table from an earlier table of the same name, so
// an ETag never matches across a DeleteTable/CreateTable.
func ETag(epoch uint64, v Version) string {
	var b strings.Builder
	b.Grow(32)
	b.WriteString(`W/"`)
	b.WriteString(strconv.FormatUint(epoch, 10))
	b.WriteByte('.')
	b.WriteString(strconv.FormatUint(v.Seq, 10))
	b.WriteByte('.')
	b.WriteString(strconv.FormatUint(uint64(v.Index), 10))
	b.WriteByte('"')
	return b.String()
}

// ParseETag is the inverse of ETag. Anything else is not an ETag Cairn made.
func ParseETag(s string) (epoch uint64, v Version, err error) {
	in := s
	if !strings.HasPrefix(s, `W/"`) || !strings.HasSuffix(s, `"`) || len(s) < 5 {
		return 0, v, fmt.Errorf("etag %q is not of the form W/\"epoch.seq.index\"", in)
	}
	parts := strings.Split(s[3:len(s)-1], ".")
	if len(parts) != 3 {
		return 0, v, fmt.Errorf("etag %q is not of the form W/\"epoch.seq.index\"", in)
	}
	if epoch, err = strconv.ParseUint(parts[0], 10, 64); err == nil {
		if v.Seq, err = strconv.ParseUint(parts[1], 10, 64); err == nil {
			var ix uint64
			ix, err = strconv.ParseUint(parts[2], 10, 32)
			v.Index = uint32(ix)
		}
	}
	if err != nil {
		return 0, Version{}, fmt.Errorf("etag %q is not of the form W/\"epoch.seq.index\"", in)
	}
	return epoch, v, nil
}
