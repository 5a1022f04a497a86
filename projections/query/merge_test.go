package query

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections"
)

// shardedTable writes n random entities over many partitions into one
// view and into shards views, each partition in the shard
// engine.Shard names.
func shardedTable(r *rand.Rand, n, shards int) (*projections.Snapshot, []*projections.Snapshot) {
	whole := projections.NewTable("T", 1, 0)
	parts := make([]*projections.Table, shards)
	for i := range parts {
		parts[i] = projections.NewTable("T", 1, 0)
	}
	seqs := make([]uint64, shards)
	for i := range n {
		pk := fmt.Sprintf("%s%d", pks[r.IntN(len(pks))], r.IntN(12))
		props := []engine.Property{{Name: "A", Value: engine.Int32(int32(r.IntN(10)))}}
		if r.IntN(3) > 0 {
			props = append(props, engine.Property{Name: "B", Value: engine.String(fmt.Sprintf("s%d", r.IntN(10)))})
		}
		rec := &engine.Record{Time: int64(i + 1), PartitionKey: pk, Events: []engine.Event{
			{Kind: engine.EventPut, RowKey: fmt.Sprintf("%03d", r.IntN(40)), Properties: engine.NewEntity("", "", props...).Properties}}}
		whole.Apply(uint64(i+1), rec)
		s := engine.Shard(pk, shards)
		seqs[s]++
		parts[s].Apply(seqs[s], rec)
	}
	whole.Publish()
	out := make([]*projections.Snapshot, shards)
	for i, p := range parts {
		p.Publish()
		out[i] = p.Snapshot()
	}
	return whole.Snapshot(), out
}

// TestMergeAgainstOneView: a query across shards, each page merged from
// the shards' pages, returns page by page the entities one view holding
// every shard returns, in the same order, ascending and descending, for
// random filters and page sizes, and ends when it does (a last page may
// be empty on either side). Run it with -count=20; the seed is logged.
func TestMergeAgainstOneView(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 5))
	for _, shards := range []int{1, 2, 3, 7} {
		whole, parts := shardedTable(r, 600, shards)
		for range 400 {
			src := randomFilter(r, 0)
			f, err := Parse(src)
			if err != nil {
				t.Fatalf("%s: %v", src, err)
			}
			plan := NewPlan(f)
			desc := r.IntN(3) == 0
			limit := 1 + r.IntN(9)
			one := Options{Limit: limit, Descending: desc}
			merged := one
			oneDone, mergedDone := false, false
			for pages := 0; !oneDone || !mergedDone; pages++ {
				if pages > 2000 {
					t.Fatalf("%s: paging does not end", src)
				}
				var want, got []*engine.Entity
				if !oneDone {
					pg := plan.Run(whole, one)
					want = pg.Entities
					oneDone = !pg.More
					one.From = &Continuation{pg.NextPartitionKey, pg.NextRowKey}
				}
				if !mergedDone {
					answers := make([]Page, shards)
					for i, p := range parts {
						answers[i] = plan.Run(p, merged)
					}
					pg := Merge(answers, limit, desc)
					if len(pg.Entities) > limit {
						t.Fatalf("%s: a merged page of %d, limit %d", src, len(pg.Entities), limit)
					}
					got = pg.Entities
					mergedDone = !pg.More
					merged.From = &Continuation{pg.NextPartitionKey, pg.NextRowKey}
				}
				if len(got) != len(want) {
					t.Fatalf("%s (%d shards, descending %v, limit %d), page %d: %d entities merged, %d from one view", src, shards, desc, limit, pages, len(got), len(want))
				}
				for k := range got {
					if got[k].PartitionKey != want[k].PartitionKey || got[k].RowKey != want[k].RowKey || !reflect.DeepEqual(got[k].Properties, want[k].Properties) {
						t.Fatalf("%s (%d shards, descending %v), page %d: entity %d is (%q, %q), one view's (%q, %q)", src, shards, desc, pages, k,
							got[k].PartitionKey, got[k].RowKey, want[k].PartitionKey, want[k].RowKey)
					}
				}
			}
		}
	}
}

// TestMergeHoldsBack: a shard's page that stopped early (its deadline)
// holds back every entity of the others at or past its continuation, and
// a page with nothing certain is empty with a continuation.
func TestMergeHoldsBack(t *testing.T) {
	e := func(pk, rk string) *engine.Entity { return &engine.Entity{PartitionKey: pk, RowKey: rk} }
	a := Page{Entities: []*engine.Entity{e("a", "1"), e("c", "1"), e("e", "1")}}
	b := Page{Entities: []*engine.Entity{e("b", "1")}, More: true, NextPartitionKey: "d", NextRowKey: ""}
	pg := Merge([]Page{a, b}, 10, false)
	if len(pg.Entities) != 3 || pg.Entities[2].PartitionKey != "c" || !pg.More || pg.NextPartitionKey != "d" {
		t.Fatalf("%+v", pg)
	}
	empty := Page{More: true, NextPartitionKey: "0"}
	pg = Merge([]Page{a, empty}, 10, false)
	if len(pg.Entities) != 0 || !pg.More || pg.NextPartitionKey != "0" {
		t.Fatalf("%+v", pg)
	}
	pg = Merge([]Page{a, {Entities: []*engine.Entity{e("b", "1")}}}, 2, false)
	if len(pg.Entities) != 2 || !pg.More || pg.NextPartitionKey != "c" {
		t.Fatalf("limit: %+v", pg)
	}
	pg = Merge([]Page{a, {Entities: []*engine.Entity{e("b", "1")}}}, 10, false)
	if len(pg.Entities) != 4 || pg.More {
		t.Fatalf("all: %+v", pg)
	}
}

// TestMergeKept: hosts whose views hold overlapping sets of shards (here
// the whole table each) answer a gathered query for the shards assigned
// to them only (Options.Keep), and the merged pages are one view's.
func TestMergeKept(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 9))
	const shards, hosts = 8, 3
	whole, _ := shardedTable(r, 600, shards)
	for range 200 {
		src := randomFilter(r, 0)
		f, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		plan := NewPlan(f)
		desc, limit := r.IntN(3) == 0, 1+r.IntN(9)
		one := Options{Limit: limit, Descending: desc}
		kept := make([]Options, hosts)
		for h := range kept {
			kept[h] = Options{Limit: limit, Descending: desc, Keep: func(e engine.Fields) bool { pk, _ := e.Keys(); return engine.Shard(pk, shards)%hosts == h }}
		}
		oneDone, keptDone := false, false
		for pages := 0; !oneDone || !keptDone; pages++ {
			if pages > 2000 {
				t.Fatalf("%s: paging does not end", src)
			}
			var want, got []*engine.Entity
			if !oneDone {
				pg := plan.Run(whole, one)
				want, oneDone = pg.Entities, !pg.More
				one.From = &Continuation{pg.NextPartitionKey, pg.NextRowKey}
			}
			if !keptDone {
				answers := make([]Page, hosts)
				for h := range answers {
					answers[h] = plan.Run(whole, kept[h])
				}
				pg := Merge(answers, limit, desc)
				got, keptDone = pg.Entities, !pg.More
				for h := range kept {
					kept[h].From = &Continuation{pg.NextPartitionKey, pg.NextRowKey}
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%s, page %d: %d entities gathered, %d from one view", src, pages, len(got), len(want))
			}
			for k := range got {
				if !reflect.DeepEqual(got[k], want[k]) {
					t.Fatalf("%s, page %d: entity %d differs", src, pages, k)
				}
			}
		}
	}
}
