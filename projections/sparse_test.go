package projections_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// TestSparseView: a view of some shards is sent only their records (its
// consumer filters on their subjects, and delivers nothing else), yet
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
	consumer := func() *jetstream.ConsumerInfo {
		t.Helper()
		s, err := js.Stream(r.ctx, r.j.TableStream("Sparse", epoch))
		if err != nil {
			t.Fatal(err)
		}
		var found []*jetstream.ConsumerInfo
		for ci := range s.ListConsumers(r.ctx).Info() {
			found = append(found, ci)
		}
		if len(found) != 1 {
			t.Fatalf("%d consumers of the table's stream, want the view's", len(found))
		}
		return found[0]
	}
	ci := consumer()
	var want []string
	for _, s := range held {
		want = append(want, r.j.ShardSubjects("Sparse", epoch, uint32(s)))
	}
	if !slices.Equal(ci.Config.FilterSubjects, want) {
		t.Fatalf("the view's consumer filters on %q, want %q", ci.Config.FilterSubjects, want)
	}
	if ci.Delivered.Consumer != uint64(mine) || mine == 0 || mine == len(last) {
		t.Fatalf("the view's consumer delivered %d records, want the %d of its shards", ci.Delivered.Consumer, mine)
	}

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
	if ci := consumer(); ci.Delivered.Consumer != uint64(mine) || ci.NumPending != 0 {
		t.Fatalf("the view's consumer delivered %d records (%d pending), want the %d of its shards", ci.Delivered.Consumer, ci.NumPending, mine)
	}
	views.stop()
}
