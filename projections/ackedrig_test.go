package projections_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/projections"
)

// TestAckedRecordsDrained appends records as the committer does (noted
// as appending, appended, told to the view at their acknowledgement,
// forgotten), from several goroutines, and checks that once every record
// is delivered the view keeps none of those it applied at their
// acknowledgement: whichever of the acknowledgement and the delivery
// comes first, and wherever the delivery finds the record, it takes it.
func TestAckedRecordsDrained(t *testing.T) {
	r := newRig(t)
	epoch := r.create("Acked")
	ctx, stop := context.WithCancel(r.ctx)
	defer stop()
	v, done := r.start(ctx)
	if err := v.WaitReady(r.ctx); err != nil {
		t.Fatal(err)
	}
	tb, _ := v.Table("Acked")
	const writers, each = 8, 60
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last uint64
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				rec := record(1 + w*each + i) // a partition of its own
				tb.NoteAppending(rec)
				seq, err := r.j.Append(r.ctx, "Acked", epoch, rigShards, rec, 0)
				if err != nil {
					tb.ForgetAppending(rec)
					t.Error(err)
					return
				}
				tb.Appended(seq, rec)
				tb.ForgetAppending(rec)
				mu.Lock()
				last = max(last, seq)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if _, err := tb.WaitSeq(r.ctx, last); err != nil {
		t.Fatal(err)
	}
	// The view may reach the last record at its acknowledgement before
	// the deliveries end: poll until they have (every 10 ms, at most 10 s,
	// a bound on a broken test rather than a timed assertion).
	kept := projections.KeptAtAck(tb)
	for deadline := time.Now().Add(10 * time.Second); kept > 0 && time.Now().Before(deadline); kept = projections.KeptAtAck(tb) {
		time.Sleep(10 * time.Millisecond)
	}
	if kept > 0 {
		t.Fatalf("%d records applied at their acknowledgement still kept after every delivery (%d of %d applied so)", kept, tb.AppliedAtAck(), writers*each)
	}
	t.Logf("%d of %d records applied at their acknowledgement", tb.AppliedAtAck(), writers*each)
	if s := tb.Snapshot(); s.Len() != writers*each {
		t.Fatalf("the view holds %d entities, want %d", s.Len(), writers*each)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
