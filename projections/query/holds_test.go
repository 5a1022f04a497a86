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
