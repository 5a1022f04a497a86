package projections_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections"
)

// TestSparseView: a view of some shards, once caught up, is sent only
// their records (its consumer filters on their subjects, and delivers
// nothing else), yet
// stands where a whole view does: at the stream's last record when it
// has replayed, at a read's position that is another shard's record, and
// a wait for any record wakes on another shard's. A made-up position
// moves it no further than the stream's end.
func TestSparseView(t *testing.T) {
	r := newRig(t)
	epoch := r.create("Sparse")
	held := []int{0, 2, 5}
	holds := func(pk string) bool { return slices.Contains(held, engine.Shard(pk, rigShards)) }
	last := map[string]uint64{}
	mine := 0 // records of the held shards
	// Each record puts the row named by the sequence of its partition's
	// previous record.
	write := func(pk string) uint64 {
		t.Helper()
		rec := &engine.Record{Time: 1, PartitionKey: pk, Nonce: fmt.Sprint(pk, last[pk]),
			Events: []engine.Event{{Kind: engine.EventPut, RowKey: fmt.Sprint(last[pk])}}}
		seq, err := r.j.Append(r.ctx, "Sparse", epoch, rigShards, rec, last[pk])
		if err != nil {
			t.Fatal(err)
		}
		last[pk] = seq
		if holds(pk) {
			mine++
		}
		return seq
	}
	var heldKey, otherKey string
	var end uint64
	for i := range 100 {
		pk := fmt.Sprintf("p%02d", i%40)
		end = write(pk)
		if holds(pk) {
			heldKey = pk
		} else {
			otherKey = pk
		}
	}
	end = write(otherKey) // the stream ends on another shard's record

	cfg := snapConfig(t)
	cfg.Placement = heldShards(held...)
	views := r.startViews(cfg, nil)
	tb, _ := views.v.Table("Sparse")
	if _, err := tb.WaitSeq(r.ctx, end); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(r.nc)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range held {
		want = append(want, r.j.ShardSubjects("Sparse", epoch, uint32(s)))
	}
	// Replayed on the whole journal, it tails on its filtered consumer,
	// the only one left on the stream (the other is deleted on the side).
	consumer := func() *jetstream.ConsumerInfo { return filteredConsumer(t, r, js, "Sparse", epoch, want) }
	mine = 0 // from here on
	base := consumer().Delivered.Consumer

	// A read at another shard's record.
	seq := write(otherKey)
	if snap, err := tb.WaitPosition(r.ctx, seq, 5*time.Second); err != nil || snap.Seq < seq {
		t.Fatalf("a read at another shard's record %d: %v", seq, err)
	}
	// A wait for any record, woken by another shard's.
	woken := make(chan struct{})
	if w := tb.Await(seq+2, nil, func() { close(woken) }); w == nil {
		t.Fatal("a wait past the view's end was answered at once")
	}
	write(otherKey)
	write(otherKey)
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatalf("a wait for any record was not woken by another shard's (the view is at %d)", tb.Snapshot().Seq)
	}
	// A made-up position: not reached, and the view goes on.
	at := tb.Snapshot().Seq
	_, err = tb.WaitPosition(r.ctx, at+1000, 300*time.Millisecond)
	if code := engine.ErrorCode(err); code != engine.CodePositionNotReached {
		t.Fatalf("a read at a position past the journal's end: %v", err)
	}
	if got := tb.Snapshot().Seq; got != at {
		t.Fatalf("asked past the journal's end at %d, the view moved to %d", at, got)
	}
	rk := fmt.Sprint(last[heldKey])
	seq = write(heldKey)
	snap, err := tb.WaitSeq(r.ctx, seq)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := snap.Get(heldKey, rk); !ok {
		t.Fatal("the record after a made-up position is not in the view")
	}
	if ci := consumer(); ci.Delivered.Consumer-base != uint64(mine) || ci.NumPending != 0 || mine == 0 {
		t.Fatalf("the view's consumer delivered %d records (%d pending) since it caught up, want the %d of its shards", ci.Delivered.Consumer-base, ci.NumPending, mine)
	}
	views.stop()
}

// filteredConsumer waits until the table's stream has one consumer left,
// filtering on want, and returns it.
func filteredConsumer(t *testing.T, r *rig, js jetstream.JetStream, table string, epoch uint64, want []string) *jetstream.ConsumerInfo {
	t.Helper()
	s, err := js.Stream(r.ctx, r.j.TableStream(table, epoch))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var found []*jetstream.ConsumerInfo
		for ci := range s.ListConsumers(r.ctx).Info() {
			found = append(found, ci)
		}
		if len(found) == 1 && slices.Equal(found[0].Config.FilterSubjects, want) {
			return found[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d consumers of the table's stream; want the view's alone, filtering on %q", len(found), want)
		}
	}
}

// TestSparseViewBehind: a sparse view whose filtered consumer falls far
// behind reads the whole journal until it has caught up, then tails on
// its filtered consumer again, and holds exactly its shards' entities.
func TestSparseViewBehind(t *testing.T) {
	r := newRig(t)
	epoch := r.create("Behind")
	held := []int{1, 3, 4, 6}
	holds := func(pk string) bool { return slices.Contains(held, engine.Shard(pk, rigShards)) }
	last := map[string]uint64{}
	rows := map[string][]string{} // each partition's row keys written
	var pks []string
	for i := range 40 {
		pks = append(pks, fmt.Sprintf("q%02d", i))
	}
	write := func(n int) uint64 {
		t.Helper()
		var seq uint64
		for i := range n {
			pk := pks[i%len(pks)]
			rec := &engine.Record{Time: 1, PartitionKey: pk, Nonce: fmt.Sprint(pk, last[pk]),
				Events: []engine.Event{{Kind: engine.EventPut, RowKey: fmt.Sprint(last[pk])}}}
			var err error
			if seq, err = r.j.Append(r.ctx, "Behind", epoch, rigShards, rec, last[pk]); err != nil {
				t.Fatal(err)
			}
			rows[pk] = append(rows[pk], fmt.Sprint(last[pk]))
			last[pk] = seq
		}
		return seq
	}
	write(40)
	cfg := snapConfig(t)
	cfg.Placement = heldShards(held...)
	log := &logSink{}
	views := r.startViews(cfg, log)
	defer views.stop()
	tb, _ := views.v.Table("Behind")
	js, err := jetstream.New(r.nc)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range held {
		want = append(want, r.j.ShardSubjects("Behind", epoch, uint32(s)))
	}
	filteredConsumer(t, r, js, "Behind", epoch, want)

	// Held back, the view's consumer fills the reader's buffer (1,024
	// deliveries), and the server holds the rest for it.
	projections.SetSparseBehind(t, 16)
	release := tb.HoldApply()
	end := write(3000)
	release()
	if _, err := tb.WaitAt(r.ctx, end); err != nil {
		t.Fatal(err)
	}
	filteredConsumer(t, r, js, "Behind", epoch, want)
	if len(log.find("switches its reader", "table=Behind", "filtered=false")) == 0 || len(log.find("switches its reader", "table=Behind", "filtered=true")) < 2 {
		t.Fatalf("the view did not go back to the whole journal and return:\n%s", log)
	}
	snap := tb.Snapshot()
	wantLen := 0
	for pk, rks := range rows {
		for _, rk := range rks {
			if _, ok := snap.Get(pk, rk); ok != holds(pk) {
				t.Fatalf("entity %s/%s: present %v, its shard held %v", pk, rk, ok, holds(pk))
			}
			if holds(pk) {
				wantLen++
			}
		}
	}
	if snap.Len() != wantLen || wantLen == 0 {
		t.Fatalf("the view holds %d entities, want %d", snap.Len(), wantLen)
	}
}
