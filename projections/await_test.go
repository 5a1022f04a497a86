package projections

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

// modelWait is a registration of TestAwaitAgainstModel with what it
// waits for.
type modelWait struct {
	from  uint64
	parts []string
	w     *Wait
	woken int
	gone  bool // woken or cancelled
}

// TestAwaitAgainstModel registers, cancels and wakes waits at random
// among random records and publishes, and checks after every step that
// exactly the waits a plain model says are due were woken, each once: a
// wait for a position once the published view reached it, a wait for
// partitions once one of them has a record at or after its position
// (due at once when the view applied one before the registration, even
// unpublished).
func TestAwaitAgainstModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	tb := NewTable("T", 1, 0)
	pks := []string{"", "a", "b", "c", "ü"}
	last := map[string]uint64{} // the writer's last position per partition
	var published uint64
	var waits []*modelWait
	check := func(step string) {
		t.Helper()
		for i, mw := range waits {
			if mw.woken > 1 {
				t.Fatalf("%s: wait %d woken %d times", step, i, mw.woken)
			}
			if mw.gone {
				continue
			}
			due := false
			if mw.parts == nil {
				due = published >= mw.from
			} else {
				// Due once the records of its partitions are published.
				for _, pk := range mw.parts {
					l, ok := last[pk]
					due = due || (ok && l >= mw.from && l <= published)
				}
			}
			if due != (mw.woken == 1) {
				t.Fatalf("%s (seed %d): wait %d for %d of %q: due %v, woken %d (published %d, last %v)",
					step, seed, i, mw.from, mw.parts, due, mw.woken, published, last)
			}
			if due {
				mw.gone = true
			}
		}
	}
	seq := uint64(0)
	for step := range 5000 {
		switch n := r.IntN(10); {
		case n < 4:
			seq++
			pk := pks[r.IntN(len(pks))]
			tb.Apply(seq, putRec(int64(seq), pk, "r"))
			last[pk] = seq
		case n < 6:
			tb.Publish()
			published = seq
		case n < 9:
			mw := &modelWait{from: seq + uint64(r.IntN(8)) - 2}
			if mw.from > seq+10 {
				mw.from = 0 // wrapped below 0
			}
			if r.IntN(2) == 0 {
				for range 1 + r.IntN(3) {
					mw.parts = append(mw.parts, pks[r.IntN(len(pks))])
				}
			}
			mw.w = tb.Await(mw.from, mw.parts, func() { mw.woken++ })
			now := false
			if mw.parts == nil {
				now = published >= mw.from
			} else {
				for _, pk := range mw.parts {
					if _, ok := last[pk]; ok && last[pk] >= mw.from {
						now = true
					}
				}
			}
			if now != (mw.w == nil) {
				t.Fatalf("step %d (seed %d): Await(%d, %q) due now %v, model %v", step, seed, mw.from, mw.parts, mw.w == nil, now)
			}
			mw.gone = now
			waits = append(waits, mw)
		default:
			if len(waits) == 0 {
				continue
			}
			mw := waits[r.IntN(len(waits))]
			if mw.w == nil {
				continue
			}
			removed := mw.w.Cancel()
			if removed == mw.gone {
				t.Fatalf("step %d: Cancel of a wait gone %v removed it: %v", step, mw.gone, removed)
			}
			mw.gone = true
		}
		check(fmt.Sprintf("step %d", step))
	}
	// A stopped view wakes every wait, and answers new ones at once.
	tb.Fail(errors.New("stopped"))
	for i, mw := range waits {
		if !mw.gone && mw.woken != 1 {
			t.Fatalf("wait %d not woken by the stop", i)
		}
	}
	if tb.Waiting() != 0 {
		t.Fatalf("%d waits left after the stop", tb.Waiting())
	}
	if tb.Await(seq+100, nil, func() { t.Fatal("woken") }) != nil || tb.Await(seq+100, []string{"z"}, func() { t.Fatal("woken") }) != nil {
		t.Fatal("a wait on a stopped view was registered")
	}
}

// TestAwaitRestore: a view replaced by a snapshot file wakes the waits
// its partitions satisfy, which no applied record named.
func TestAwaitRestore(t *testing.T) {
	src := NewTable("T", 1, 0)
	src.Apply(1, putRec(1, "a", "r"))
	src.Apply(2, putRec(2, "b", "r"))
	tb := NewTable("T", 1, 0)
	var woken []string
	for _, pk := range []string{"a", "b", "c"} {
		if tb.Await(2, []string{pk}, func() { woken = append(woken, pk) }) == nil {
			t.Fatalf("%s due at once", pk)
		}
	}
	tb.restore(2, &snapshotContent{rows: src.rows.Copy(), parts: src.parts.Copy(), ids: src.ids.Copy()})
	tb.Publish()
	if !slices.Equal(woken, []string{"b"}) || tb.Waiting() != 2 {
		t.Fatalf("woken %v, %d waiting", woken, tb.Waiting())
	}
}

// BenchmarkAwait registers b.N waits far ahead of the view (for one
// partition with -partitions): the memory each holds (B/op) and the
// time of a registration.
func BenchmarkAwait(b *testing.B) {
	for _, parts := range [][]string{nil, {"p"}} {
		b.Run(fmt.Sprintf("partitions=%d", len(parts)), func(b *testing.B) {
			tb := NewTable("T", 1, 0)
			wake := func() {}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			b.ReportAllocs()
			for i := range b.N {
				tb.Await(uint64(1_000_000+i), parts, wake)
			}
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "heap-B/wait")
			runtime.KeepAlive(tb)
		})
	}
}

// BenchmarkPublishWithWaits applies and publishes one record per
// operation while 10,000 waits far ahead of the view are registered (for
// a position, or for other partitions than the records'): what the waits
// cost the applier, against none (waits=0).
func BenchmarkPublishWithWaits(b *testing.B) {
	for _, c := range []struct {
		name  string
		n     int
		parts []string
	}{{"waits=0", 0, nil}, {"waits=10000", 10000, nil}, {"waits=10000/partitions", 10000, []string{"q"}}} {
		b.Run(c.name, func(b *testing.B) {
			tb := NewTable("T", 1, 0)
			for i := range c.n {
				tb.Await(uint64(1<<40+i), c.parts, func() {})
			}
			rec := putRec(1, "p", "r")
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				tb.Apply(uint64(i+1), rec)
				tb.Publish()
			}
		})
	}
}
