package projections

import (
	"github.com/tidwall/btree"

	"github.com/cairn-dev/cairn/engine"
)

// Snapshot is an immutable, consistent view of a table at journal position
// Seq. It is safe for any number of goroutines.
type Snapshot struct {
	Table string
	Epoch uint64
	Seq   uint64
	rows  *rowTree
	parts *btree.BTreeG[*Partition]
	ids   *btree.BTreeG[*CommandRecord]
	// expiry is the command ids in the order they were applied (the
	// order the view evicts them in), for a snapshot file.
	expiry []*CommandRecord
}

// Get returns the entity (pk, rk), decoded for the caller.
func (s *Snapshot) Get(pk, rk string) (*engine.Entity, bool) {
	p, ok := s.rows.Get(engine.PackedKey(pk, rk))
	return unpack(p, ok), ok
}

// Len returns the number of entities.
func (s *Snapshot) Len() int { return s.rows.Len() }

// Partition returns the summary of partition pk (zero if it never had a
// record).
func (s *Snapshot) Partition(pk string) Partition {
	if p, ok := s.parts.Get(&Partition{Key: pk}); ok {
		return *p
	}
	return Partition{Key: pk}
}

// Partitions calls fn for every partition in key order until fn returns false.
func (s *Snapshot) Partitions(fn func(Partition) bool) {
	s.parts.Scan(func(p *Partition) bool { return fn(*p) })
}

// Command returns the record of the committed command id in partition pk,
// if it is still inside the dedup window.
func (s *Snapshot) Command(pk, id string) (CommandRecord, bool) {
	c, ok := s.ids.Get(&CommandRecord{PartitionKey: pk, ID: id})
	if !ok {
		return CommandRecord{}, false
	}
	return *c, true
}

// Ascend calls fn for the entities from (pk, rk) on, in key order, until fn
// returns false. Each entity is decoded for fn, which may keep it.
func (s *Snapshot) Ascend(pk, rk string, fn func(*engine.Entity) bool) {
	s.rows.Ascend(engine.PackedKey(pk, rk), decoded(fn))
}

// Scan calls fn for every entity in key order until fn returns false.
func (s *Snapshot) Scan(fn func(*engine.Entity) bool) { s.rows.Scan(decoded(fn)) }

// Reverse calls fn for every entity in reverse key order until fn returns
// false.
func (s *Snapshot) Reverse(fn func(*engine.Entity) bool) { s.rows.Reverse(decoded(fn)) }

// AscendPacked, DescendPacked (from (pk, rk) down) and ReversePacked walk
// the entities packed, for a reader that looks at many and keeps few (a
// query): fn reads each in place (engine.PackedFields) before it
// decides, and decodes (Entity) those it keeps.
func (s *Snapshot) AscendPacked(pk, rk string, fn func(engine.Packed) bool) {
	s.rows.Ascend(engine.PackedKey(pk, rk), fn)
}

// DescendPacked: see AscendPacked.
func (s *Snapshot) DescendPacked(pk, rk string, fn func(engine.Packed) bool) {
	s.rows.Descend(engine.PackedKey(pk, rk), fn)
}

// ReversePacked: see AscendPacked.
func (s *Snapshot) ReversePacked(fn func(engine.Packed) bool) { s.rows.Reverse(fn) }

// decoded adapts a reader of entities to a walk of the packed tree.
func decoded(fn func(*engine.Entity) bool) func(engine.Packed) bool {
	return func(p engine.Packed) bool { return fn(p.Entity()) }
}

// PartitionState returns the partition pk of the snapshot as the decider's
// state.
func (s *Snapshot) PartitionState(pk string) engine.PartitionState {
	return partitionState{s: s, pk: pk}
}

type partitionState struct {
	s  *Snapshot
	pk string
}

func (p partitionState) Entity(rk string) (*engine.Entity, bool) { return p.s.Get(p.pk, rk) }
