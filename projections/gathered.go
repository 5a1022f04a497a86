package projections

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/cairn-dev/cairn/engine"
)

// Reads gathered from the hosts. On a cluster whose hosts each hold some
// shards of a table (Config.Placement), a read of the table, or of a
// projection declared over it, is answered by the hosts holding each
// shard, each for the entities derived from its shards (KeepShards), and
// the pages are merged (docs/SCALE.md, C and H):
//
//   - a table's entities are kept by their PartitionKey's shard;
//   - an index's by its source entity's (SourcePartitionKey): an index
//     entry is derived from one source entity, so the hosts' entries are
//     disjoint and merge in key order as a table's do;
//   - an aggregate keeps, on a placed table, one entity per group and
//     source shard (RowKey ShardRowKey): the groups a host holds for
//     other shards are not counted twice, and a read folds a group's
//     entities into the one a view holding every shard has (Fold).

// ShardRowKey is the RowKey of an aggregate group's entity for one shard
// of its source, on a table whose shards are placed on hosts: the shard's
// number, four digits (a table has at most 4,096 shards), so that a
// group's entities sort by shard.
func ShardRowKey(shard uint32) string { return fmt.Sprintf("%04d", shard) }

// splitShards is the shard count an aggregate derived from t splits its
// groups by (0: not split).
func (t *Table) splitShards(def *Definition) uint32 {
	if t.split && def.Kind == KindAggregate {
		return t.shards
	}
	return 0
}

// Gathered reports whether a read of t is answered by the hosts holding
// its shards rather than by this view alone: t holds only some of its
// table's shards, or t is a declared projection whose source does, or an
// aggregate whose groups are kept per shard (Folding).
func (t *Table) Gathered() bool {
	if t.source == nil {
		return t.Partial()
	}
	if t.source.Partial() {
		return true
	}
	_, ok := t.Folding()
	return ok
}

// Answers reports whether this view alone answers a read of partition
// pk of t: a table's view holding its shard, a projection's that is not
// gathered.
func (t *Table) Answers(pk string) bool {
	if t.source == nil {
		return t.Holds(pk)
	}
	return !t.Gathered()
}

// Placed returns the view whose table's shards hold t's entities: t, or,
// for a projection's read table, its source (whose name, incarnation and
// shards place the reads).
func (t *Table) Placed() *Table {
	if t.source != nil {
		return t.source
	}
	return t
}

// Folding returns, for an aggregate's read table whose groups are kept
// per source shard, the definition its entities were derived by, which
// folds them (Fold).
func (t *Table) Folding() (*Definition, bool) {
	src := t.source
	if src == nil || !src.split {
		return nil, false
	}
	src.dmu.Lock()
	defer src.dmu.Unlock()
	a := src.projection(t.name)
	if a == nil || a.def == nil || a.def.Kind != KindAggregate {
		return nil, false
	}
	return a.def, true
}

// KeepShards returns whether an entity of t is derived from one of the
// shards given (sorted): a table's by its PartitionKey, an index entry's
// by its SourcePartitionKey, an aggregate group's entity for one shard by
// its RowKey.
func (t *Table) KeepShards(shards []uint32) func(engine.Fields) bool {
	src := t.Placed()
	n := int(src.shards)
	in := func(s uint32) bool { _, ok := slices.BinarySearch(shards, s); return ok }
	byPK := func(pk string) bool { return in(uint32(engine.Shard(pk, n))) }
	switch {
	case t.source == nil:
		return func(e engine.Fields) bool { pk, _ := e.Keys(); return byPK(pk) }
	case src.split:
		if _, ok := t.Folding(); ok {
			return func(e engine.Fields) bool {
				_, rk := e.Keys()
				s, err := strconv.ParseUint(rk, 10, 32)
				return err == nil && in(uint32(s))
			}
		}
	}
	return func(e engine.Fields) bool {
		v, _, ok := e.GetHinted("SourcePartitionKey", -1)
		return ok && v.Type() == engine.TypeString && byPK(v.Str())
	}
}

// Fold folds one group's entities, one per source shard (all of one
// PartitionKey), into the entity a view holding every shard has: counts
// and sums added, the least minimum and the greatest maximum, the latest
// version and timestamp, RowKey "". A sum is a Double if any shard's is
// (its Doubles were summed per shard, so its last bits may differ from
// one view's sum in journal order, as after a rebuild).
func (d *Definition) Fold(parts []*engine.Entity) *engine.Entity {
	if len(parts) == 0 {
		return nil
	}
	props := make([]engine.Property, 0, len(d.Aggregates))
	for _, a := range d.Aggregates {
		var acc engine.Value
		have := false
		var ints int64
		var floats float64
		doubles := false
		for _, p := range parts {
			v, ok := p.Get(a.As)
			if !ok {
				continue
			}
			switch a.Op {
			case OpCount, OpSum:
				switch v.Type() {
				case engine.TypeInt32, engine.TypeInt64:
					ints += v.Int()
				case engine.TypeDouble:
					floats += v.Float()
					doubles = true
				}
				have = true
			case OpMin, OpMax:
				if !have || a.Op == OpMin && compareExtreme(v, acc) < 0 || a.Op == OpMax && compareExtreme(v, acc) > 0 {
					acc, have = v, true
				}
			}
		}
		if !have {
			continue
		}
		switch {
		case a.Op == OpCount || a.Op == OpSum && !doubles:
			acc = engine.Int64(ints)
		case a.Op == OpSum:
			acc = engine.Double(float64(ints) + floats)
		}
		props = append(props, engine.Property{Name: a.As, Value: acc})
	}
	e := engine.NewEntity(parts[0].PartitionKey, "", props...)
	for _, p := range parts {
		e.Timestamp = max(e.Timestamp, p.Timestamp)
		if c := cmp.Or(cmp.Compare(p.Version.Seq, e.Version.Seq), cmp.Compare(p.Version.Index, e.Version.Index)); c > 0 {
			e.Version = p.Version
		}
	}
	return e
}
