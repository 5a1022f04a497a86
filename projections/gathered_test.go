package projections

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cairn-dev/cairn/engine"
)

// TestFoldMatchesWhole: an aggregate whose groups are split by shard,
// each group's entities folded, reads what the aggregate kept whole
// reads, through inserts, replacements that move entities between
// groups, and deletes, with Int32, Int64 and Double values and members
// without the property: counts, integer sums, minima and maxima equal,
// Double sums equal but for rounding, versions and timestamps the latest.
func TestFoldMatchesWhole(t *testing.T) {
	def := &Definition{Name: "Agg", Source: "T", Version: 1, Kind: KindAggregate, GroupBy: "G", Aggregates: []Aggregate{
		{Op: OpCount, As: "N"}, {Op: OpSum, Property: "I", As: "SumI"}, {Op: OpSum, Property: "D", As: "SumD"},
		{Op: OpMin, Property: "M", As: "Lo"}, {Op: OpMax, Property: "M", As: "Hi"}}}
	const shards = 16
	whole, split := newDeriver(def, 0), newDeriver(def, shards)
	r := rand.New(rand.NewPCG(3, 5))
	live := map[[2]string]*engine.Entity{}
	for i := range 4000 {
		pk, rk := fmt.Sprintf("p%d", r.IntN(60)), fmt.Sprint(r.IntN(10))
		old := live[[2]string{pk, rk}]
		c := change{old: old, ver: engine.Version{Seq: uint64(i + 1)}, ts: int64(i)}
		if r.IntN(5) > 0 {
			var props []engine.Property
			if r.IntN(8) > 0 {
				props = append(props, engine.Property{Name: "G", Value: engine.String(fmt.Sprint("g", r.IntN(5)))})
			}
			if r.IntN(3) > 0 {
				props = append(props, engine.Property{Name: "I", Value: engine.Int32(int32(r.IntN(1000) - 500))})
			}
			if r.IntN(3) > 0 {
				props = append(props, engine.Property{Name: "D", Value: engine.Double(r.Float64()*100 - 50)})
			}
			switch r.IntN(4) {
			case 0:
			case 1:
				props = append(props, engine.Property{Name: "M", Value: engine.Double(r.Float64() * 1000)})
			default:
				props = append(props, engine.Property{Name: "M", Value: engine.Int64(int64(r.IntN(1000)))})
			}
			e := engine.NewEntity(pk, rk, props...)
			e.Version, e.Timestamp = c.ver, c.ts
			c.new = e
			live[[2]string{pk, rk}] = e
		} else if old == nil {
			continue
		} else {
			delete(live, [2]string{pk, rk})
		}
		whole.apply(c)
		split.apply(c)
	}
	parts := map[string][]*engine.Entity{}
	split.rows.Scan(func(p engine.Packed) bool {
		e := p.Entity()
		parts[e.PartitionKey] = append(parts[e.PartitionKey], e)
		return true
	})
	n := 0
	whole.rows.Scan(func(p engine.Packed) bool {
		w := p.Entity()
		n++
		ps := parts[w.PartitionKey]
		if len(ps) < 2 {
			t.Errorf("group %q kept in %d shards", w.PartitionKey, len(ps))
		}
		for _, p := range ps {
			if p.RowKey == "" {
				t.Errorf("group %q: a shard's entity without its shard", w.PartitionKey)
			}
		}
		f := def.Fold(ps)
		if f.RowKey != "" || f.Version != w.Version || f.Timestamp != w.Timestamp || len(f.Properties) != len(w.Properties) {
			t.Fatalf("group %q: folded %+v, whole %+v", w.PartitionKey, f, w)
		}
		for i, wp := range w.Properties {
			fp := f.Properties[i]
			same := fp.Name == wp.Name && fp.Value.Type() == wp.Value.Type()
			if same && wp.Value.Type() == engine.TypeDouble && wp.Name == "SumD" {
				same = math.Abs(fp.Value.Float()-wp.Value.Float()) < 1e-9*max(1, math.Abs(wp.Value.Float()))
			} else if same {
				c, ok := fp.Value.Compare(wp.Value)
				same = ok && c == 0
			}
			if !same {
				t.Errorf("group %q, %s: folded %v, whole %v", w.PartitionKey, wp.Name, fp, wp)
			}
		}
		return true
	})
	if n != 5 || len(parts) != 5 {
		t.Fatalf("%d groups kept whole, %d split", n, len(parts))
	}
	if def.Fold(nil) != nil {
		t.Fatal("a fold of nothing")
	}
}
