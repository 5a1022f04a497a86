package projections_test

import (
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections"
)

// shardRange is the shards lo to hi-1.
func shardRange(lo, hi int) []int {
	var out []int
	for s := lo; s < hi; s++ {
		out = append(out, s)
	}
	return out
}

// sameShards fails unless got, a view holding the shards held, has
// exactly want's entities and partitions of those shards, at the same
// position, and answers every command id of them want answers.
func sameShards(t *testing.T, what string, got, want *projections.Snapshot, held []int) {
	t.Helper()
	holds := func(pk string) bool { return slices.Contains(held, engine.Shard(pk, rigShards)) }
	if got.Seq != want.Seq {
		t.Fatalf("%s: at %d, want %d", what, got.Seq, want.Seq)
	}
	var ga, wa []engine.Entity
	got.Scan(func(e *engine.Entity) bool { ga = append(ga, *e); return true })
	want.Scan(func(e *engine.Entity) bool {
		if holds(e.PartitionKey) {
			wa = append(wa, *e)
		}
		return true
	})
	if len(wa) == 0 || !reflect.DeepEqual(ga, wa) {
		t.Fatalf("%s: %d entities, want %d", what, len(ga), len(wa))
	}
	var gp, wp []projections.Partition
	got.Partitions(func(p projections.Partition) bool { gp = append(gp, p); return true })
	want.Partitions(func(p projections.Partition) bool {
		if holds(p.Key) {
			wp = append(wp, p)
		}
		return true
	})
	if !reflect.DeepEqual(gp, wp) {
		t.Fatalf("%s: partitions %+v, want %+v", what, gp, wp)
	}
	ids := map[[2]string]projections.CommandRecord{}
	for _, c := range projections.CommandIDs(got) {
		ids[[2]string{c.PartitionKey, c.ID}] = c
	}
	for _, c := range projections.CommandIDs(want) {
		if holds(c.PartitionKey) {
			if g, ok := ids[[2]string{c.PartitionKey, c.ID}]; !ok || g != c {
				t.Fatalf("%s: command id %+v answered as %+v", what, c, g)
			}
		}
	}
}

// TestShardBases: views holding some shards write shard bases, as files
// and in the store, and never a base or a delta another host would take
// for the whole table. A view holding another mix of shards, on a host
// without files, starts from them and replays only the tail, exactly as
// a full replay gives its shards; a view started from bases of different
// positions skips, per shard, what its base holds. The store then lists
// where every shard has a base as a position the journal may be cut
// after, and a view started once it is cut there is exact too.
func TestShardBases(t *testing.T) {
	r := newRig(t)
	obj := r.snapshotStore()
	r.cfg = snapConfig(t)
	r.cfg.HistoryCheck = time.Hour
	epoch := r.create("Sharded")
	h := newHistory(r, "Sharded", epoch, 5)
	h.parts = 40
	h.write(200)
	config := func(held []int) projections.Config {
		cfg := r.cfg
		cfg.SnapshotDir, cfg.SnapshotStore, cfg.Placement = t.TempDir(), obj, heldShards(held...)
		return cfg
	}
	last := func(v *projections.Views) uint64 {
		t.Helper()
		tb, ok := v.Table("Sharded")
		if !ok {
			t.Fatal("no view")
		}
		s, err := tb.WaitSeq(r.ctx, uint64(h.n))
		if err != nil {
			t.Fatal(err)
		}
		return s.Seq
	}
	view := func(v *projections.Views) *projections.Snapshot {
		t.Helper()
		last(v)
		tb, _ := v.Table("Sharded")
		return tb.Snapshot()
	}
	low, high := shardRange(0, rigShards/2), shardRange(rigShards/2, rigShards)
	ca, cb := config(low), config(high)
	a, b := r.startViews(ca, nil), r.startViews(cb, nil)
	h.write(300) // each view writes shard bases of its shards on the way
	last(a.v)
	last(b.v)
	b.stop() // its last shard base at the head
	h.write(30)
	last(a.v)
	a.stop() // its last one 30 records further
	for _, dir := range []string{ca.SnapshotDir, cb.SnapshotDir} {
		files := snapFiles(t, dir)
		shards, _ := filepath.Glob(filepath.Join(dir, "*", "*.shards"))
		if len(shards) == 0 || len(shards) > 2 || len(files) != len(shards) {
			t.Fatalf("%s holds %v: want one or two shard bases and nothing else", dir, files)
		}
	}
	kinds := map[string]int{}
	for _, o := range r.sharedOf(obj, "Sharded", epoch) {
		kinds[o.kind]++
	}
	if kinds["shards"] == 0 || len(kinds) != 1 {
		t.Fatalf("the store holds %v, want shard bases only", kinds)
	}
	bases, err := a.v.SharedBases(r.ctx, "Sharded", epoch)
	if err != nil {
		t.Fatal(err)
	}
	cover := bases[len(bases)-1]
	if cover != 500 {
		t.Fatalf("the store lists %v: want 500 the newest, where the high shards' last base is", bases)
	}

	// A host without files, holding some shards of each: the low ones
	// from a base at 530, the high ones from one at 500, the rest replayed.
	h.write(40)
	mixed := shardRange(rigShards/4, 3*rigShards/4)
	log := &logSink{}
	c := r.startViews(config(mixed), log)
	full := r.fullReplay("Sharded")
	sameShards(t, "a view started from shard bases", view(c.v), view(full.v), mixed)
	if len(log.find("view started from shard bases", "seq=500 ", "highest=530 ")) != 1 || len(log.find("shared snapshot loaded", "kind=shards")) != 2 ||
		len(log.find("view replayed", "records=70 ")) != 1 {
		t.Fatalf("the view did not start from both hosts' shard bases:\n%s", log)
	}
	h.write(20) // followed live, past the floors
	sameShards(t, "the same, live", view(c.v), view(full.v), mixed)
	c.stop()

	// A read as of a position past the cover, taken now from the whole
	// journal, for the views after the cut.
	asOf := cover + 35 // past the low shards' base at 530
	ft, _ := full.v.Table("Sharded")
	then, err := full.v.AsOf(r.ctx, ft, asOf)
	if err != nil {
		t.Fatal(err)
	}

	// The journal cut after the cover: every shard still starts.
	if err := r.j.RecordHorizon(r.ctx, "Sharded", epoch, cover+1); err != nil {
		t.Fatal(err)
	}
	if _, err := r.j.PurgeBelow(r.ctx, "Sharded", epoch, cover+1); err != nil {
		t.Fatal(err)
	}
	h.purged(cover + 1)
	h.write(10)
	// The full replay follows on past the cut: the views after it are
	// compared with it.
	d := r.startViews(config(mixed), nil)
	other := shardRange(1, rigShards/2+1)
	elog := &logSink{}
	e := r.startViews(config(other), elog)
	sameShards(t, "after the cut, from the shard base the last view wrote as it stopped", view(d.v), view(full.v), mixed)
	sameShards(t, "after the cut, from several hosts' shard bases", view(e.v), view(full.v), other)
	// As of a position after the cut: from the shard bases at or before
	// it, the records after them up to it.
	et, _ := e.v.Table("Sharded")
	got, err := e.v.AsOf(r.ctx, et, asOf)
	if err != nil {
		t.Fatalf("%v; the store holds %+v\n%s", err, r.sharedOf(obj, "Sharded", epoch), elog)
	}
	sameShards(t, "as of a position after the cut", got, then, other)
}
