package query

import (
	"cmp"

	"github.com/cairn-dev/cairn/engine"
)

// Merge makes one page of a query across view shards out of the pages
// its shards answered (docs/SCALE.md, Routing): every shard ran the same
// plan with the same Options (the same limit, From and direction), and
// the merged page is what one view holding every shard would answer with
// no deadline — the first limit entities in key order — as far as the
// shards' pages tell. A shard that has more (More) may still hold
// entities before its continuation, so no entity at or past the earliest
// such continuation is returned; those held back, and the shards that
// have more, make the merged page's continuation, the first key not yet
// returned, from which every shard resumes. A page may hence be short,
// or empty with a continuation, as the Table service's own may.
func Merge(pages []Page, limit int, descending bool) Page {
	if limit <= 0 || limit > MaxPage {
		limit = MaxPage
	}
	// before reports whether key a comes before key b in the walk.
	before := func(a, b *engine.Entity) bool {
		c := cmp.Or(cmp.Compare(a.PartitionKey, b.PartitionKey), cmp.Compare(a.RowKey, b.RowKey))
		if descending {
			return c > 0
		}
		return c < 0
	}
	var out Page
	// The earliest continuation of a shard that has more: nothing at or
	// past it is certain yet.
	var cut *engine.Entity
	for i := range pages {
		pg := &pages[i]
		out.Examined += pg.Examined
		if pg.More {
			next := &engine.Entity{PartitionKey: pg.NextPartitionKey, RowKey: pg.NextRowKey}
			if cut == nil || before(next, cut) {
				cut = next
			}
		}
	}
	pos := make([]int, len(pages))
	for {
		// The shard whose next entity comes first.
		best := -1
		for i := range pages {
			if pos[i] < len(pages[i].Entities) && (best < 0 || before(pages[i].Entities[pos[i]], pages[best].Entities[pos[best]])) {
				best = i
			}
		}
		if best < 0 {
			break // every page taken
		}
		e := pages[best].Entities[pos[best]]
		if cut != nil && !before(e, cut) || len(out.Entities) == limit {
			// Held back: the continuation is the earlier of it and cut.
			if cut == nil || before(e, cut) {
				cut = e
			}
			break
		}
		out.Entities = append(out.Entities, e)
		pos[best]++
	}
	if cut != nil {
		out.More, out.NextPartitionKey, out.NextRowKey = true, cut.PartitionKey, cut.RowKey
	}
	return out
}
