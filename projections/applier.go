package projections

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// startLocked starts the applier of a live table's view: one goroutine,
// counted in v.wg, that ends when ctx ends (Run stops or the table is
// deleted) or the view fails.
func (v *Views) startLocked(ctx context.Context, e *entry) {
	if e.started {
		return
	}
	e.started = true
	e.cancel = v.runLocked(ctx, e, e.table)
	if e.next != nil {
		e.nextCancel = v.runLocked(ctx, e, e.next)
	}
}

// runLocked starts the applier of t, the entry's view or the one being
// prepared to replace it (Replace), and returns what stops it.
func (v *Views) runLocked(ctx context.Context, e *entry, t *Table) context.CancelFunc {
	tctx, cancel := context.WithCancel(ctx)
	v.wg.Add(1)
	snaps := newSnapshotter(v, t)
	go func() {
		defer v.wg.Done()
		defer cancel()
		defer snaps.shares.stop()
		err := v.followTable(tctx, e, t, snaps)
		if ctx.Err() != nil {
			// The views stop (not this table alone, dropped).
			snaps.final()
		}
		if err != nil && tctx.Err() == nil && v.behindHorizon(tctx, t, err) {
			v.restartView(ctx, e, t)
			return
		}
		if err != nil && tctx.Err() == nil {
			t.Publish() // what was applied before the fault, for the operator's eyes
			f := faultOf(t, err, t.Seq()+1)
			v.log.Error("table faulted: its view stopped", "table", f.Table, "epoch", f.Epoch, "seq", f.Seq, "err", err)
			t.fault(f)
			v.mu.Lock()
			v.broadcastLocked() // readiness no longer waits for this table
			v.mu.Unlock()
		}
	}()
	return cancel
}

// placeLocked asks the placement which shards of t this host holds.
func (v *Views) placeLocked(t *Table) {
	if v.cfg.Placement != nil && t.shards > 0 {
		t.hold(v.cfg.Placement(t.name, t.epoch, t.shards))
		t.split = true
	}
}

// followTable replays and then tails one table's journal into its view. It
// returns only when ctx ends or the journal holds what the view cannot
// apply (see permanent): a record that cannot be decoded, is invalid or is
// on another partition's subject, or missing records.
func (v *Views) followTable(ctx context.Context, e *entry, t *Table, snaps *snapshotter) error {
	// The host that created the table creates its stream right after the
	// catalog record; only if it does not appear (that host crashed in
	// between) does this host create it.
	v.mu.RLock()
	created := engine.TicksToTime(e.info.Created)
	v.mu.RUnlock()
	err := v.retry(ctx, "find the table's stream", t.Name(), func() error {
		exists, err := v.j.WaitTableStream(ctx, t.Name(), t.Epoch(), 5*time.Second)
		if err != nil || exists {
			return err
		}
		if time.Since(created) > v.cfg.StreamGrace {
			// Long past its creation: the stream was deleted behind
			// Cairn's back, and an empty one would hide that.
			return &faultError{seq: 1, missing: true, err: fmt.Errorf("the table's stream %s does not exist (deleted?); the catalog created the table at %s",
				v.j.TableStream(t.Name(), t.Epoch()), created.Format(time.RFC3339))}
		}
		return v.j.EnsureTableStream(ctx, t.Name(), t.Epoch())
	})
	if err != nil {
		return err
	}
	var first, target uint64
	err = v.retry(ctx, "read the stream's length", t.Name(), func() error {
		var err error
		first, target, err = v.j.StreamBounds(ctx, t.Name(), t.Epoch())
		if errors.Is(err, engine.ErrTableGone) {
			return v.streamGone(ctx, t)
		}
		return err
	})
	if err != nil {
		return err
	}
	// The newest usable snapshot, if any: the replay goes on from there.
	// Not when records were removed from the journal: the full replay
	// then faults the table at once, as it would without snapshots,
	// rather than a snapshot hiding the loss until the next history check.
	var loaded uint64
	if v.cfg.SnapshotDir != "" && t.Seq() == 0 && target > 0 {
		var removed bool
		err = v.retry(ctx, "check the stream's history", t.Name(), func() error {
			var err error
			var h journal.History
			removed, h, err = v.j.RemovedRecords(ctx, t.Name(), t.Epoch())
			t.noteHistory(h)
			if errors.Is(err, engine.ErrTableGone) {
				return v.streamGone(ctx, t)
			}
			return err
		})
		if err != nil {
			return err
		}
		if removed {
			v.log.Warn("snapshots not used: records were removed from the journal", "table", t.Name())
		} else if lc := v.loadSnapshot(ctx, t, first, target); lc != nil {
			loaded = lc.seq
			snaps.loaded(lc)
			t.Publish()
		}
	}
	if target > t.Seq() && first > t.Seq()+1 {
		// A purged stream keeps its last sequence but not its records:
		// the consumer would never deliver what the view waits for.
		return &faultError{seq: t.Seq() + 1, err: fmt.Errorf("records %d to %d are missing from the journal (purged or deleted)", t.Seq()+1, first-1)}
	}
	// A view of some shards tails them alone, and learns where it stands
	// between their records (sparse.go).
	held := t.heldShards()
	var stand *journal.Stand
	if held != nil {
		stand = journal.NewStand()
		t.sparse = true
		t.stand.Store(stand)
		defer t.stand.Store(nil)
	}
	start, lastLog := time.Now(), time.Now()
	caughtUp := false
	markReady := func() {
		caughtUp = true
		// Logged before the view counts as ready: whoever waits for it
		// finds the line there.
		t.snapInfo.replayed.Store(target - min(loaded, target))
		if target > 0 {
			el := time.Since(start)
			v.log.Info("view replayed", "table", t.Name(), "records", target-loaded, "from_snapshot", loaded, "entities", t.Snapshot().Len(),
				"elapsed", el.Round(time.Millisecond), "records_per_s", int(float64(target-loaded)/el.Seconds()))
		}
		v.mu.Lock()
		// The entry outlives this incarnation: after a drop and a new
		// create of the name it describes the next one, which this
		// applier (cancelled, but perhaps still applying its last batch)
		// must not mark ready.
		switch {
		case e.table == t:
			e.ready = true
			v.broadcastLocked()
		case e.next == t:
			v.swapLocked(e)
		}
		v.mu.Unlock()
	}
	if target <= t.Seq() {
		markReady()
	}
	sinceSnap := 0
	apply := func(seq uint64, rec *engine.Record, pending uint64) error {
		t.applyMu.Lock()
		defer t.applyMu.Unlock()
		if seq <= t.Seq() {
			// Delivered again after a resumed consumer, or applied at its
			// acknowledgement: then kept for this delivery, unless the
			// delivery found the record before it was kept.
			if rec != nil {
				t.acked.take(rec.Nonce)
			}
			return nil
		}
		if err := t.checkRecord(seq, rec); err != nil {
			return err
		}
		t.Apply(seq, rec)
		t.behind.Store(pending)
		sinceSnap++
		if pending == 0 || sinceSnap >= v.cfg.PublishEvery {
			t.Publish()
			sinceSnap = 0
		}
		snaps.applied(rec)
		if !caughtUp {
			if seq >= target {
				t.Publish()
				markReady()
			} else if time.Since(lastLog) >= v.cfg.Progress {
				lastLog = time.Now()
				el := time.Since(start).Seconds()
				attrs := []any{"table", t.Name(), "record", seq, "of", target,
					"percent", fmt.Sprintf("%.1f", 100*float64(seq)/float64(target)),
					"records_per_s", int(float64(seq-loaded) / el)}
				if m := t.move; m != nil {
					// A move: the current view serves meanwhile.
					attrs = append(attrs, "move_shards_from", m.from, "move_shards_to", m.to)
				}
				v.log.Info("replaying view", attrs...)
			}
		}
		return nil
	}
	// A view that tails its whole journal applies this host's records at
	// their acknowledgement (Table.Appended) when it stands right before
	// them with nothing queued: the next record in the stream, so no
	// other host's record can come between. A view of some shards does
	// not (its journal has gaps it learns of between records).
	// Once the follow ends, a committer that took the early apply before
	// it was withdrawn finds it off (ackOn, under applyMu), so nothing
	// writes the view behind the applier's back.
	if stand == nil && !t.Partial() {
		ackOn := true
		atAck := func(seq uint64, rec *engine.Record) {
			t.applyMu.Lock()
			defer t.applyMu.Unlock()
			if !ackOn || !caughtUp || seq != t.Seq()+1 || t.behind.Load() != 0 {
				return
			}
			t.Apply(seq, rec)
			t.Publish()
			sinceSnap = 0
			snaps.applied(rec)
			t.ackApplied.Add(1)
			t.acked.keep(rec)
		}
		t.atAck.Store(&atAck)
		defer func() {
			t.atAck.Store(nil)
			t.applyMu.Lock()
			ackOn = false
			t.applyMu.Unlock()
		}()
	}
	// The watch ends the follow with a fault as its cause when records
	// disappear from the journal.
	fctx, stopFollow := context.WithCancelCause(ctx)
	var watches sync.WaitGroup
	watches.Go(func() { v.watchHistory(fctx, t, stopFollow) })
	if stand != nil {
		watches.Go(func() { t.watchStand(fctx, stand) })
	}
	defer func() {
		stopFollow(nil)
		watches.Wait()
	}()
	// A view of some shards replays on the whole journal and tails on
	// its filtered consumer, switching back when it falls behind
	// (sparse.go: the server reads a long backlog for many filters
	// slowly).
	filtered := stand != nil && t.Seq() >= target
	tail := func(seq uint64, rec *engine.Record, pending uint64) error {
		if err := apply(seq, rec, pending); err != nil {
			return err
		}
		if pending > behindBound() {
			return errSwitch
		}
		return nil
	}
	replay := func(seq uint64, rec *engine.Record, pending uint64) error {
		if err := apply(seq, rec, pending); err != nil {
			return err
		}
		if stand != nil && caughtUp && pending == 0 {
			return errSwitch
		}
		return nil
	}
	err = v.retry(fctx, "follow the journal", t.Name(), func() error {
		for {
			// After an interruption, resume right after the last record
			// applied (read under applyMu: records are applied at their
			// acknowledgement meanwhile).
			from := t.appliedSeq() + 1
			var err error
			switch {
			case filtered:
				err = v.j.ConsumeShards(fctx, t.Name(), t.Epoch(), t.Shards(), held, stand, from, t.appendedRecord, tail)
			case t.Partial():
				err = v.j.ConsumeHeld(fctx, t.Name(), t.Epoch(), t.Shards(), t.HoldsShard, from, t.appendedRecord, replay)
			default:
				err = v.j.ConsumeKnown(fctx, t.Name(), t.Epoch(), t.Shards(), from, t.appendedRecord, apply)
			}
			if errors.Is(err, errSwitch) {
				filtered = !filtered
				v.log.Debug("view of some shards switches its reader", "table", t.Name(), "at", t.appliedSeq(), "filtered", filtered)
				continue
			}
			if errors.Is(err, engine.ErrTableGone) {
				return v.streamGone(fctx, t)
			}
			if err == nil && fctx.Err() == nil {
				err = errors.New("consumer ended")
			}
			return err
		}
	})
	if cause := context.Cause(fctx); ctx.Err() == nil && permanent(cause) {
		return cause
	}
	return err
}

// watchHistory checks every HistoryCheck, while the applier follows the
// table, that no record was removed from its journal behind Cairn's back
// (below the horizon Cairn prunes to is Cairn's own removal); if one was,
// it stops the follow with the fault as the cause. The view holds records
// the journal no longer has: a new host could not rebuild it, and appends
// that expect a partition's removed last record would be refused for
// ever. Each check also tells the view its stream's history (its horizon
// and retention, noteHistory).
func (v *Views) watchHistory(ctx context.Context, t *Table, stop context.CancelCauseFunc) {
	tick := time.NewTicker(v.cfg.HistoryCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		removed, h, err := v.j.RemovedRecords(ctx, t.Name(), t.Epoch())
		if err != nil {
			continue // a missing stream is the consumer's to find; errors pass
		}
		t.noteHistory(h)
		if !removed {
			continue
		}
		stop(&faultError{seq: 1, err: fmt.Errorf("records were removed from the journal behind Cairn's back (it now starts at %d and ends at %d; Cairn pruned it below %d): the view holds history the journal lost", h.First, h.Last, h.Horizon)})
		return
	}
}

// streamGone decides what a table's missing stream means: when the table
// was dropped, the catalog, caught up, has already cancelled ctx; if the
// catalog still holds the table, its stream was deleted behind Cairn's back.
func (v *Views) streamGone(ctx context.Context, t *Table) error {
	last, err := v.j.LastCatalogSeq(ctx)
	if err != nil {
		return err
	}
	if err := v.WaitCatalog(ctx, last); err != nil || ctx.Err() != nil {
		return ctx.Err()
	}
	return &faultError{seq: t.Seq() + 1, missing: true, err: fmt.Errorf("the table's stream %s was deleted, though the catalog holds the table",
		v.j.TableStream(t.Name(), t.Epoch()))}
}
