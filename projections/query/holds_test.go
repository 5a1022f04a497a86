package query

import (
	"testing"
	"time"

	"github.com/cairn-dev/cairn/projections"
)

// TestHeldSnapshotsReleased: holds are released once they expire, whether
// or not further queries come.
func TestHeldSnapshotsReleased(t *testing.T) {
	h := NewHolds(20*time.Millisecond, 100)
	for range 5 {
		h.Put(0, &projections.Snapshot{})
	}
	if n := h.Count(); n != 5 {
		t.Fatalf("%d held, want 5", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.Count() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d snapshots still held 10s after they expired", h.Count())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A hold put later arms the release again.
	h.Put(0, &projections.Snapshot{})
	for h.Count() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("a later hold was not released")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHoldsPutAt: a hold under an id the caller chose is found under it
// for its table alone, replaced by the next PutAt, released, and the
// one due first makes room when max are held.
func TestHoldsPutAt(t *testing.T) {
	h := NewHolds(time.Hour, 2)
	a := &projections.Snapshot{Table: "A", Epoch: 1, Seq: 5}
	b := &projections.Snapshot{Table: "A", Epoch: 1, Seq: 9}
	h.PutAt(1<<60, a)
	if got, ok := h.Get(1<<60, "A", 1); !ok || got != a {
		t.Fatalf("Get: %v, %v", got, ok)
	}
	if _, ok := h.Get(1<<60, "B", 1); ok {
		t.Fatal("a hold of A found for B")
	}
	h.PutAt(1<<60, b)
	if got, _ := h.Get(1<<60, "A", 1); got != b || h.Count() != 1 {
		t.Fatalf("after a second PutAt: %v, %d held", got, h.Count())
	}
	h.mu.Lock()
	h.m[1<<60].expires = time.Now().Add(time.Minute) // due first
	h.mu.Unlock()
	h.PutAt(2, a)
	h.PutAt(3, a)
	if _, ok := h.Get(1<<60, "A", 1); ok || h.Count() != 2 {
		t.Fatalf("full: the hold due first was kept (%d held)", h.Count())
	}
	h.Release(2)
	if _, ok := h.Get(2, "A", 1); ok {
		t.Fatal("a released hold was found")
	}
}
