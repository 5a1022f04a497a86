package projections

import (
	"slices"

	"github.com/cairn-dev/cairn/engine"
)

// Replace asks the placement again which shards of each live table with
// shards this host holds (after the live hosts changed), and starts again
// the views whose shards changed: a new view of the same incarnation
// replays the journal from the newest whole snapshot, holding the new
// shards, and whoever holds the old one is told to retry (ServerBusy). It
// returns the tables whose views started again.
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
		next := &Table{shards: t.shards}
		next.hold(v.cfg.Placement(t.name, t.epoch, t.shards))
		if slices.Equal(next.held, t.held) {
			continue
		}
		if e.cancel != nil {
			e.cancel()
		}
		t.Fail(engine.Errorf(engine.CodeServerBusy, "the view of table %s starts again: the hosts changed, and with them the shards this one holds; retry", engine.ShownTable(t.name)))
		e.table = NewTable(t.name, t.epoch, v.cfg.DedupWindow)
		e.table.shards, e.table.held = t.shards, next.held
		v.attachDeclaredLocked(e.table)
		e.started, e.ready, e.cancel = false, false, nil
		if v.catalogLoaded {
			v.startLocked(ctx, e)
		}
		moved = append(moved, t.name)
	}
	if len(moved) > 0 {
		v.broadcastLocked()
	}
	slices.Sort(moved)
	return moved
}
