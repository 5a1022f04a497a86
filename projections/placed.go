package projections

import (
	"slices"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// Replace asks the placement again which shards of each live table with
// shards this host holds (after the live hosts changed). For each table
// whose shards changed, a new view of the same incarnation, holding the
// new shards, replays the journal from the newest whole snapshot beside
// the current one, which serves meanwhile; once the new view has caught
// up it takes the current one's place (swapLocked). It returns the
// tables whose views are being replaced.
func (v *Views) Replace() []string {
	if v.cfg.Placement == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	p := v.runCtx.Load()
	if p == nil || (*p).Err() != nil {
		return nil // not running: each view is placed as it starts
	}
	ctx := *p
	var moved []string
	for _, e := range v.entries {
		t := e.table
		if !e.live || t == nil || t.shards == 0 || t.Err() != nil {
			continue
		}
		held := (&Table{shards: t.shards}).placed(v.cfg.Placement(t.name, t.epoch, t.shards))
		want := t
		if e.next != nil {
			want = e.next
		}
		if slices.Equal(held, want.held) {
			continue
		}
		if e.nextCancel != nil {
			e.nextCancel() // prepared for a placement already past
			v.moves.superseded.Add(1)
		}
		e.next, e.nextCancel = nil, nil
		if slices.Equal(held, t.held) {
			continue // back to what the current view holds
		}
		next := NewTable(t.name, t.epoch, v.cfg.DedupWindow)
		next.layoutOf(t)
		next.held = held
		next.move = &moveInfo{started: time.Now(), from: t.heldCount(), to: next.heldCount()}
		v.attachDeclaredLocked(next)
		e.next = next
		if e.started {
			e.nextCancel = v.runLocked(ctx, e, next)
		}
		moved = append(moved, t.name)
	}
	slices.Sort(moved)
	return moved
}

// swapLocked puts the entry's prepared view in the current one's place,
// once it has caught up: the current one's applier stops, and whoever
// waits on it for a position waits on its successor (WaitSeq), while
// other uses of it are told to retry.
func (v *Views) swapLocked(e *entry) {
	old, next := e.table, e.next
	if e.cancel != nil {
		e.cancel()
	}
	old.successor.Store(next)
	old.Fail(engine.Errorf(engine.CodeServerBusy, "the view of table %s was replaced by one holding other shards (the hosts changed); retry", engine.ShownTable(old.name)))
	e.table, e.cancel, e.next, e.nextCancel = next, e.nextCancel, nil, nil
	e.started, e.ready = true, true
	took := time.Duration(0)
	if next.move != nil {
		took = time.Since(next.move.started)
		v.moves.done.Add(1)
		v.moves.nanos.Add(int64(took))
	}
	v.log.Info("view replaced: it now holds the shards the placement gives this host", "table", next.name, "seq", next.Seq(), "entities", next.Snapshot().Len(),
		"shards_held", next.heldCount(), "shards_before", old.heldCount(), "of", next.shards, "took", took.Round(time.Millisecond))
	v.broadcastLocked()
}
