package engine

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Packed is an entity in the form a view keeps it in memory: one immutable
// string holding its keys, its timestamp, its version and its properties.
//
// A view holds every entity of its table, so the form is chosen for the
// heap, not for speed of access. A decoded Entity is a struct, a slice and
// two strings per property, about two dozen objects the garbage collector
// must trace on every cycle; a Packed is one object with no pointers inside
// it, and it costs little more than its bytes. An entity is decoded when it
// is read (Entity, DecodeInto), and the strings of the decoded entity are
// substrings of the packed one, so a decode allocates only the Entity and
// its property slice.
//
// The form is never written anywhere (journals, snapshot files and the wire
// have their own versioned encodings), so it may change with the code:
//
//	uvarint len(PartitionKey), PartitionKey
//	uvarint len(RowKey), RowKey
//	8 bytes Timestamp (big-endian)
//	8 bytes Version.Seq, 4 bytes Version.Index (big-endian)
//	uvarint number of properties, then for each, in name order:
//	  uvarint len(name), name, 1 byte Type,
//	  String, Guid, Binary: uvarint len, bytes
//	  Double: 8 bytes (big-endian IEEE 754 bits)
//	  other types: uvarint of the value's 64 bits
//
// The keys come first and are length-prefixed, so packed entities order by
// (PartitionKey, RowKey) without being decoded (ComparePacked).
type Packed string

// Pack returns e in the packed form. The properties are expected sorted by
// name, as every entity the engine makes them. It allocates the packed
// string only, of its exact size.
func Pack(e *Entity) Packed {
	n := packedKeysLen(e.PartitionKey, e.RowKey) + 8 + 12 + uvarintLen(uint64(len(e.Properties)))
	for i := range e.Properties {
		p := &e.Properties[i]
		n += uvarintLen(uint64(len(p.Name))) + len(p.Name) + 1
		switch p.Value.t {
		case TypeString, TypeGuid, TypeBinary:
			n += uvarintLen(uint64(len(p.Value.s))) + len(p.Value.s)
		case TypeDouble:
			n += 8
		default:
			n += uvarintLen(p.Value.n)
		}
	}
	var w packedWriter
	w.Grow(n)
	w.keys(e.PartitionKey, e.RowKey)
	w.fixed(uint64(e.Timestamp))
	w.fixed(e.Version.Seq)
	w.fixed32(e.Version.Index)
	w.uvarint(uint64(len(e.Properties)))
	for i := range e.Properties {
		p := &e.Properties[i]
		w.str(p.Name)
		w.WriteByte(byte(p.Value.t))
		switch p.Value.t {
		case TypeString, TypeGuid, TypeBinary:
			w.str(p.Value.s)
		case TypeDouble:
			w.fixed(p.Value.n)
		default:
			w.uvarint(p.Value.n)
		}
	}
	return Packed(w.String())
}

// PackedKey returns a packed entity with the keys (pk, rk) and nothing
// else: a probe to look entities up by key, not an entity to decode.
func PackedKey(pk, rk string) Packed {
	var w packedWriter
	w.Grow(packedKeysLen(pk, rk))
	w.keys(pk, rk)
	return Packed(w.String())
}

// AppendPackedKey appends to b the keys (pk, rk) packed as PackedKey
// packs them: a self-delimiting string of bytes, so that keys appended one
// after another stay apart, and one that equals the bytes at the start
// of another's is that key.
func AppendPackedKey(b []byte, pk, rk string) []byte {
	b = binary.AppendUvarint(b, uint64(len(pk)))
	b = append(b, pk...)
	b = binary.AppendUvarint(b, uint64(len(rk)))
	return append(b, rk...)
}

func packedKeysLen(pk, rk string) int {
	return uvarintLen(uint64(len(pk))) + len(pk) + uvarintLen(uint64(len(rk))) + len(rk)
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// packedWriter writes a packed entity into a builder grown to its size
// beforehand, so the string is allocated once.
type packedWriter struct{ strings.Builder }

func (w *packedWriter) uvarint(x uint64) {
	if x < 0x80 {
		w.WriteByte(byte(x))
		return
	}
	var b [binary.MaxVarintLen64]byte
	w.Write(binary.AppendUvarint(b[:0], x))
}

func (w *packedWriter) fixed(x uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], x)
	w.Write(b[:])
}

func (w *packedWriter) fixed32(x uint32) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], x)
	w.Write(b[:])
}

func (w *packedWriter) str(s string) {
	w.uvarint(uint64(len(s)))
	w.WriteString(s)
}

func (w *packedWriter) keys(pk, rk string) {
	w.str(pk)
	w.str(rk)
}

// Keys returns the entity's PartitionKey and RowKey, substrings of p.
func (p Packed) Keys() (pk, rk string) {
	r := packedReader{s: string(p)}
	return r.str(), r.str()
}

// PartitionKey returns the entity's PartitionKey, a substring of p.
func (p Packed) PartitionKey() string {
	r := packedReader{s: string(p)}
	return r.str()
}

// Version returns the entity's version.
func (p Packed) Version() Version {
	r := packedReader{s: string(p)}
	r.str()
	r.str()
	r.i += 8 // the timestamp
	return r.version()
}

// ComparePacked orders packed entities (and keys, PackedKey) by
// PartitionKey, then RowKey, as strings.Compare does.
func ComparePacked(a, b Packed) int {
	// Keys shorter than 128 bytes, the common case, read in place.
	if na, nb := int(a[0]), int(b[0]); na < 0x80 && nb < 0x80 {
		if c := strings.Compare(string(a[1:1+na]), string(b[1:1+nb])); c != 0 {
			return c
		}
		if ma, mb := int(a[1+na]), int(b[1+nb]); ma < 0x80 && mb < 0x80 {
			return strings.Compare(string(a[2+na:2+na+ma]), string(b[2+nb:2+nb+mb]))
		}
	}
	pa, ia := packedKey(a, 0)
	pb, ib := packedKey(b, 0)
	if c := strings.Compare(pa, pb); c != 0 {
		return c
	}
	ra, _ := packedKey(a, ia)
	rb, _ := packedKey(b, ib)
	return strings.Compare(ra, rb)
}

// packedKey reads the key at p[i:] and returns it and where it ends: for
// a comparison whose keys are not all shorter than 128 bytes.
func packedKey(p Packed, i int) (string, int) {
	if n := int(p[i]); n < 0x80 {
		return string(p[i+1 : i+1+n]), i + 1 + n
	}
	r := packedReader{s: string(p), i: i}
	k := r.str()
	return k, r.i
}

// LessPacked reports whether a orders before b (ComparePacked).
func LessPacked(a, b Packed) bool { return ComparePacked(a, b) < 0 }

// Entity decodes p into a new entity. Its strings are substrings of p, so
// it holds p in memory; it shares nothing else.
func (p Packed) Entity() *Entity {
	e := &Entity{}
	p.DecodeInto(e)
	return e
}

// DecodeInto decodes p into e, reusing e's property slice: for a reader
// that looks at many entities one at a time and keeps none of them.
func (p Packed) DecodeInto(e *Entity) {
	r := packedReader{s: string(p)}
	e.PartitionKey, e.RowKey = r.str(), r.str()
	e.Timestamp = int64(r.fixed())
	e.Version = r.version()
	n := int(r.uvarint())
	props := e.Properties[:0]
	if cap(props) < n {
		props = make([]Property, 0, n)
	}
	for range n {
		name := r.str()
		props = append(props, Property{Name: name, Value: r.value(Type(r.byte()))})
	}
	if r.i != len(r.s) {
		panic(fmt.Sprintf("engine: packed entity has %d bytes past its end", len(r.s)-r.i))
	}
	e.Properties = props
}

// packedReader reads a packed entity front to back, from s[i]. A packed
// entity is made only by Pack, in this process, so a malformed one is a
// bug: the reader panics (an index out of range, or malformed) rather
// than return an error no caller could handle. Its methods are small
// enough to be inlined on the paths that read many entities.
type packedReader struct {
	s string
	i int
}

func (r *packedReader) uvarint() uint64 {
	if c := r.s[r.i]; c < 0x80 { // lengths of names and keys, mostly
		r.i++
		return uint64(c)
	}
	return r.uvarintLong()
}

//go:noinline
func (r *packedReader) uvarintLong() uint64 {
	x, n := binary.Uvarint([]byte(r.s[r.i:min(r.i+binary.MaxVarintLen64, len(r.s))]))
	if n <= 0 {
		panic("engine: malformed packed entity")
	}
	r.i += n
	return x
}

func (r *packedReader) str() string {
	n := int(r.uvarint())
	s := r.s[r.i : r.i+n]
	r.i += n
	return s
}

func (r *packedReader) fixed() uint64 {
	s := r.s[r.i : r.i+8]
	r.i += 8
	return uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 | uint64(s[3])<<32 |
		uint64(s[4])<<24 | uint64(s[5])<<16 | uint64(s[6])<<8 | uint64(s[7])
}

func (r *packedReader) version() Version {
	seq := r.fixed()
	s := r.s[r.i : r.i+4]
	r.i += 4
	return Version{Seq: seq, Index: uint32(s[0])<<24 | uint32(s[1])<<16 | uint32(s[2])<<8 | uint32(s[3])}
}

func (r *packedReader) byte() byte {
	c := r.s[r.i]
	r.i++
	return c
}

// value reads a value of type t.
func (r *packedReader) value(t Type) Value {
	v := Value{t: t}
	switch t {
	case TypeString, TypeGuid, TypeBinary:
		v.s = r.str()
	case TypeDouble:
		v.n = r.fixed()
	default:
		v.n = r.uvarint()
	}
	return v
}

// Detached returns v holding its own copy of its text or bytes. A value
// decoded from a packed entity is a substring of it: one kept apart from
// its entity (a minimum of a group, say) is detached first, so that it
// does not keep the whole packed entity in memory.
func (v Value) Detached() Value {
	v.s = strings.Clone(v.s)
	return v
}

// Fields is what a filter reads of an entity: its keys, its timestamp and
// its properties by name. An *Entity has them, and so has a PackedFields,
// which reads them from a packed entity without decoding it.
type Fields interface {
	Keys() (pk, rk string)
	// Ticks is the entity's Timestamp.
	Ticks() int64
	// GetHinted is Entity.GetHinted: hint, from the last call for the
	// same name, is where to look first.
	GetHinted(name string, hint int) (Value, int, bool)
}

// Keys returns the entity's PartitionKey and RowKey (Fields).
func (e *Entity) Keys() (pk, rk string) { return e.PartitionKey, e.RowKey }

// Ticks returns the entity's Timestamp (Fields).
func (e *Entity) Ticks() int64 { return e.Timestamp }

// PackedFields reads the fields of a packed entity in place: a reader
// that looks at many entities and keeps few (a filtered scan) resets one
// to each entity and decodes only the properties it asks for.
type PackedFields struct {
	p      Packed
	pk, rk string
	ts     int64
	props  int // where the properties start in p
	n      int // how many
}

// Reset makes f read p.
func (f *PackedFields) Reset(p Packed) {
	r := packedReader{s: string(p)}
	f.p = p
	f.pk, f.rk = r.str(), r.str()
	f.ts = int64(r.fixed())
	r.i += 12 // the version
	f.n = int(r.uvarint())
	f.props = r.i
}

// Keys returns the entity's keys (Fields).
func (f *PackedFields) Keys() (pk, rk string) { return f.pk, f.rk }

// Ticks returns the entity's Timestamp (Fields).
func (f *PackedFields) Ticks() int64 { return f.ts }

// GetHinted returns the named property's value (Fields). It reads the
// properties in order, skipping each value it passes, and stops at the
// first name past name's place; the hint is not used, as a position in
// one packed entity says nothing safe about another's bytes.
func (f *PackedFields) GetHinted(name string, _ int) (Value, int, bool) {
	r := packedReader{s: string(f.p), i: f.props}
	for i := range f.n {
		pn := r.str()
		t := Type(r.byte())
		if pn == name {
			return r.value(t), i, true
		}
		if pn > name {
			break
		}
		r.value(t) // passed over: its string is a substring, free
	}
	return Value{}, -1, false
}
