package projections_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/projections"
)

// TestBehindHorizon: a view that misses records Cairn pruned (below the
// horizon it recorded) fell behind and starts again from a snapshot; one
// that misses records removed behind Cairn's back does not (its table is
// faulted, as before), nor one that misses none.
func TestBehindHorizon(t *testing.T) {
	r := newRig(t)
	epoch := r.create("Pruned")
	for i := 1; i <= 10; i++ {
		if err := r.append(r.ctx, "Pruned", epoch, i); err != nil {
			t.Fatal(err)
		}
	}
	v := projections.NewViews(r.j, slog.New(slog.NewTextHandler(io.Discard, nil)), projections.Config{})
	view := projections.NewTable("Pruned", epoch, 0)
	for i := 1; i <= 3; i++ {
		view.Apply(uint64(i), record(i))
	}
	if v.BehindHorizon(r.ctx, view) {
		t.Fatal("behind the horizon with nothing pruned")
	}
	if err := r.j.RecordHorizon(r.ctx, "Pruned", epoch, 6); err != nil {
		t.Fatal(err)
	}
	if _, err := r.j.PurgeBelow(r.ctx, "Pruned", epoch, 6); err != nil {
		t.Fatal(err)
	}
	if !v.BehindHorizon(r.ctx, view) {
		t.Fatal("a view at 3 of a journal pruned below 6 is not behind its horizon")
	}
	if view.Horizon() != 6 {
		t.Fatalf("the view's horizon %d, want 6", view.Horizon())
	}
	// Records removed beyond the recorded horizon: behind Cairn's back.
	if err := r.stream("Pruned", epoch).Purge(r.ctx, jetstream.WithPurgeSequence(8)); err != nil {
		t.Fatal(err)
	}
	if v.BehindHorizon(r.ctx, view) {
		t.Fatal("records purged behind Cairn's back taken for its own pruning")
	}
}
