package projections_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections"
)

// heldShards holds, of every table with shards, those in the list.
func heldShards(held ...int) func(string, uint64, uint32) []bool {
	return func(_ string, _ uint64, shards uint32) []bool {
		out := make([]bool, shards)
		for _, s := range held {
			out[s] = true
		}
		return out
	}
}

// TestPlacedView: a view that holds some shards of a table materialises
// exactly their partitions, at the same journal positions as a whole view
// (a position of another shard's record is reached too); a table without
// shards is held whole. Started on a whole view's snapshot, it keeps its
// shards' entities and writes shard bases only.
func TestPlacedView(t *testing.T) {
	r := newRig(t)
	epoch := r.create("Placed")
	old, err := r.j.AppendCatalog(r.ctx, &engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: "Old", Time: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.j.EnsureTableStream(r.ctx, "Old", old); err != nil {
		t.Fatal(err)
	}
	held := []int{0, 2, 5}
	holds := func(pk string) bool { return slices.Contains(held, engine.Shard(pk, rigShards)) }
	last := map[string]uint64{}
	write := func(table string, epoch uint64, shards uint32, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			pk := fmt.Sprintf("p%02d", i%40)
			rec := &engine.Record{Time: int64(i), PartitionKey: pk, Nonce: fmt.Sprint(table, i),
				Events: []engine.Event{{Kind: engine.EventPut, RowKey: fmt.Sprint(i)}}}
			seq, err := r.j.Append(r.ctx, table, epoch, shards, rec, last[table+pk])
			if err != nil {
				t.Fatal(err)
			}
			last[table+pk] = seq
		}
	}
	write("Placed", epoch, rigShards, 0, 200)
	write("Old", old, 0, 0, 10)

	// A whole view writes its snapshots on stop.
	cfg := snapConfig(t)
	whole := r.startViews(cfg, nil)
	wt, _ := whole.v.Table("Placed")
	if wt.Partial() || wt.Snapshot().Len() != 200 || !wt.Holds("p01") {
		t.Fatalf("a whole view: partial %v, %d entities", wt.Partial(), wt.Snapshot().Len())
	}
	whole.stop()
	files := snapFiles(t, cfg.SnapshotDir)
	if len(files) == 0 {
		t.Fatal("the whole view wrote no snapshot")
	}

	write("Placed", epoch, rigShards, 200, 300) // after the snapshot
	check := func(v *projections.Views, total int) {
		t.Helper()
		tb, _ := v.Table("Placed")
		if !tb.Partial() {
			t.Fatal("the view holds every shard")
		}
		snap := tb.Snapshot()
		if snap.Seq != uint64(total) {
			t.Fatalf("the view is at %d, want %d (every record's position)", snap.Seq, total)
		}
		want := 0
		for i := range total {
			pk := fmt.Sprintf("p%02d", i%40)
			_, ok := snap.Get(pk, fmt.Sprint(i))
			if ok != holds(pk) || tb.Holds(pk) != holds(pk) {
				t.Fatalf("entity %s/%d: present %v, held %v", pk, i, ok, holds(pk))
			}
			if ok {
				want++
			}
		}
		if snap.Len() != want || want == 0 || want == total {
			t.Fatalf("the view holds %d entities, want %d of %d", snap.Len(), want, total)
		}
		if ot, _ := v.Table("Old"); ot.Partial() || ot.Snapshot().Len() != 10 {
			t.Fatalf("a table without shards: partial %v, %d entities", ot.Partial(), ot.Snapshot().Len())
		}
	}
	cfg.Placement = heldShards(held...)
	log := &logSink{}
	placed := r.startViews(cfg, log)
	check(placed.v, 300)
	if len(log.find("view replayed", "table=Placed", "records=100 ", "from_snapshot=200 ")) != 1 {
		t.Fatalf("the view of some shards did not start from the whole view's snapshot:\n%s", log)
	}
	write("Placed", epoch, rigShards, 300, 340) // followed live
	tb, _ := placed.v.Table("Placed")
	if _, err := tb.WaitSeq(r.ctx, 340); err != nil {
		t.Fatal(err)
	}
	check(placed.v, 340)
	placed.stop()
	// It wrote shard bases of its own beside the whole view's files,
	// which it left as they were (TestShardBases has the rest).
	var others, shards []string
	for _, f := range snapFiles(t, cfg.SnapshotDir) {
		if strings.HasSuffix(f, ".shards") {
			shards = append(shards, f)
		} else {
			others = append(others, f)
		}
	}
	if !slices.Equal(others, files) || len(shards) == 0 {
		t.Fatalf("a view of some shards wrote %v beside %v, was %v", shards, others, files)
	}
}
