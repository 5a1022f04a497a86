package outbox

import (
	"context"
	"fmt"
	"testing"
)

// TestMarkerRemembersBounded: a mark is stored once and then remembered,
// so marking again asks nothing; past maxRemembered tables the marker
// forgets them and starts over, and a forgotten mark is found where it
// is, not stored twice.
func TestMarkerRemembersBounded(t *testing.T) {
	ctx := context.Background()
	js, kv := testBucket(t)
	m := NewMarker(kv, func(table string, epoch uint64) string { return fmt.Sprintf("J_%s_%d", table, epoch) })
	for i := range maxRemembered {
		if err := m.Mark(ctx, fmt.Sprintf("T%d", i), 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := remembered(m); got != maxRemembered {
		t.Fatalf("remembers %d marks, want %d", got, maxRemembered)
	}
	first, err := kv.Get(ctx, markKey("J_T0_1"))
	if err != nil {
		t.Fatalf("the first mark: %v", err)
	}
	// Remembered: nothing is asked of the bucket, even when it is gone.
	if err := m.Mark(ctx, "T0", 1); err != nil {
		t.Fatal(err)
	}
	if err := m.Mark(ctx, "T-past", 1); err != nil {
		t.Fatal(err)
	}
	if got := remembered(m); got != 1 {
		t.Fatalf("after the bound, remembers %d marks, want 1", got)
	}
	if err := m.Mark(ctx, "T0", 1); err != nil {
		t.Fatalf("a forgotten mark: %v", err)
	}
	again, err := kv.Get(ctx, markKey("J_T0_1"))
	if err != nil || again.Revision() != first.Revision() {
		t.Fatalf("the forgotten mark was stored again: revision %d, first %d (%v)", again.Revision(), first.Revision(), err)
	}
	if err := js.DeleteKeyValue(ctx, BucketName("cairn")); err != nil {
		t.Fatal(err)
	}
	if err := m.Mark(ctx, "T0", 1); err != nil {
		t.Fatalf("a remembered mark asked the bucket: %v", err)
	}
	if err := m.Mark(ctx, "T-new", 1); err == nil {
		t.Fatal("a new mark stored without its bucket")
	}
}

// remembered is how many marks m remembers.
func remembered(m *Marker) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.marked)
}
