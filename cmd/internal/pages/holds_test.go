package pages

import (
	"testing"
	"time"

	"github.com/cairn-dev/cairn/projections"
)

// TestSnaps: a hold is found under its query's id for its table alone,
// and gone once released or expired; the one due first goes when the
// store is full.
func TestSnaps(t *testing.T) {
	h := newSnaps(time.Hour, 2)
	a := &projections.Snapshot{Table: "A", Epoch: 1, Seq: 5}
	b := &projections.Snapshot{Table: "B", Epoch: 1, Seq: 7}
	h.put(10, a)
	if got, ok := h.get(10, "A", 1); !ok || got != a {
		t.Fatalf("get: %v, %v", got, ok)
	}
	for _, k := range []struct {
		table string
		epoch uint64
	}{{"B", 1}, {"A", 2}} {
		if _, ok := h.get(10, k.table, k.epoch); ok {
			t.Fatalf("a hold of A/1 found for %s/%d", k.table, k.epoch)
		}
	}
	h.put(20, b)
	h.m[10].expires = time.Now().Add(time.Minute) // due first
	h.put(30, b)
	if _, ok := h.get(10, "A", 1); ok || len(h.m) != 2 {
		t.Fatalf("full: the hold due first was kept (%d held)", len(h.m))
	}
	h.release(20)
	if _, ok := h.get(20, "B", 1); ok {
		t.Fatal("a released hold was found")
	}
	h.m[30].expires = time.Now().Add(-time.Second)
	if _, ok := h.get(30, "B", 1); ok {
		t.Fatal("an expired hold was found")
	}
	h.sweep()
	if len(h.m) != 0 {
		t.Fatalf("%d holds after the sweep, want 0", len(h.m))
	}
	if newHold() == 0 {
		t.Fatal("a query's id is 0")
	}
}
