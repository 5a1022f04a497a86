package projections

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// As-of reads: a table's view as it was at an earlier journal position,
// rebuilt on demand into a view of its own: from the newest snapshot at or
// before the position (a chain of the node's own files, else of the
// shared store: snapchain.go), then the table's stream after it; from the
// stream's first record when there is no such snapshot. The live view
// keeps no history (its B-trees are overwritten in place once no snapshot
// holds the old nodes), so the snapshots and the journal are where the
// past is kept; loading and replay are what an as-of read costs, and the
// limits below bound it.
//
//   - A position must be one the view has passed: 1 to the view's
//     position (InvalidAsOfPosition otherwise). The view's own position is
//     answered from the live snapshot, with no replay.
//   - At most Config.AsOfMaxRecords records are replayed for one as-of
//     read after the snapshot it starts from (a position further is
//     AsOfTooFar).
//   - A journal whose first records were purged rebuilds the past only
//     from a base at or after its cut: a position before the oldest base
//     kept is HistoryTruncated.
//   - At most Config.AsOfReplays replays run at once on a node; a read
//     that would start another is refused at once with ServerBusy (503 over
//     HTTP, which the Azure SDKs retry with back-off). A read of a position
//     already being replayed waits for that replay instead.
//   - A finished as-of view is kept for Config.AsOfCacheTTL after its last
//     use, at most Config.AsOfCache of them (the least recently used goes
//     first), so that the pages of one as-of query, or the same position
//     asked again, replay once.
//   - A replay runs to its end even when the read that started it gives
//     up (its result is then kept for the retry), bounded by
//     Config.AsOfTimeout and by Run's context.

// asOfKey names one as-of view: a table incarnation at a position.
type asOfKey struct {
	table string
	epoch uint64
	seq   uint64
	def   *Definition // for a projection: the version replayed
}

// asOfView is a replay, running or finished.
type asOfView struct {
	done chan struct{} // closed when the replay ended
	snap *Snapshot     // set before done is closed, on success
	err  error         // set before done is closed, on failure
	used time.Time     // the last use, once done (under asOfCache.mu)
}

// asOfCache holds the replays of a node: those running and the finished
// views kept for reuse.
type asOfCache struct {
	mu      sync.Mutex
	m       map[asOfKey]*asOfView
	running int
	sweep   *time.Timer // pending release of expired views; nil when none
}

// errAsOfReached ends a replay's consumer once the position is applied.
var errAsOfReached = errors.New("as-of position reached")

// AsOf returns the view of t, a live table's current incarnation, as it
// was at journal position seq: a snapshot whose Seq is seq, holding
// exactly what the records 1 to seq made of the table. Its errors are
// coded (*engine.Error): InvalidAsOfPosition for 0 or a position beyond
// the view's, AsOfTooFar for more records than Config.AsOfMaxRecords
// after the snapshot it would start from, HistoryTruncated when the
// journal lost the records and no snapshot covers them, ServerBusy when
// Config.AsOfReplays replays run already or when ctx ends before the
// replay does (it goes on: retry), TableNotFound when the table's stream
// is gone.
//
// Cost: the view's own position is the live snapshot (an atomic load); a
// cached position is a map lookup; anything else is the load of the
// newest snapshot chain at or before seq (a shared base downloaded
// first) and a replay of the records after it at the applier's replay
// rate (every record decoded and validated), and a view of its own in
// memory for as long as it is kept (see doc.go, Costs).
func (v *Views) AsOf(ctx context.Context, t *Table, seq uint64) (*Snapshot, error) {
	var def *Definition
	if src := t.source; src != nil {
		// A projection as of a position: its source replayed with the
		// version readers see now derived from the first record.
		src.dmu.Lock()
		if a := src.projection(t.name); a != nil {
			def = a.def
		}
		src.dmu.Unlock()
		if def == nil {
			return nil, engine.Errorf(engine.CodeProjectionNotReady, "projection %s has no version built yet", engine.ShownTable(t.Name()))
		}
	}
	cur := t.Snapshot()
	if seq == 0 || seq > cur.Seq {
		if cur.Seq == 0 {
			return nil, engine.Errorf(engine.CodeInvalidAsOfPosition,
				"table %s has no journal record yet: there is no position %d to read as of", engine.ShownTable(t.Name()), seq)
		}
		return nil, engine.Errorf(engine.CodeInvalidAsOfPosition,
			"position %d is not one of table %s's journal as this node has it: as-of positions are 1 to %d, the view's current position",
			seq, engine.ShownTable(t.Name()), cur.Seq)
	}
	if seq == cur.Seq {
		return cur, nil
	}
	if v.cfg.SnapshotDir == "" && seq > v.cfg.AsOfMaxRecords {
		return nil, asOfTooFar(t, seq, 0, v.cfg.AsOfMaxRecords)
	}
	key := asOfKey{table: t.Name(), epoch: t.Epoch(), seq: seq, def: def}
	c := &v.asOf
	c.mu.Lock()
	av := c.m[key]
	if av != nil && av.snap != nil && time.Since(av.used) > v.cfg.AsOfCacheTTL {
		delete(c.m, key)
		av = nil
	}
	if av == nil {
		if c.running >= v.cfg.AsOfReplays {
			c.mu.Unlock()
			return nil, engine.Errorf(engine.CodeServerBusy,
				"this node is replaying %d as-of views already (its limit): retry later", c.running)
		}
		if c.m == nil {
			c.m = map[asOfKey]*asOfView{}
		}
		av = &asOfView{done: make(chan struct{})}
		c.m[key] = av
		c.running++
		go v.runAsOf(key, av, t)
	}
	c.mu.Unlock()
	select {
	case <-av.done:
	case <-ctx.Done():
		return nil, engine.Errorf(engine.CodeServerBusy,
			"the view of table %s as of position %d is still being replayed: retry (the replay goes on, and its view is kept for %v)",
			engine.ShownTable(t.Name()), seq, v.cfg.AsOfCacheTTL)
	}
	if av.err != nil {
		return nil, av.err
	}
	c.mu.Lock()
	av.used = time.Now()
	c.mu.Unlock()
	return av.snap, nil
}

// runAsOf replays one as-of view and keeps it in the cache (a failure is
// handed to the waiters and forgotten).
func (v *Views) runAsOf(key asOfKey, av *asOfView, t *Table) {
	ctx, cancel := context.WithTimeout(v.baseContext(), v.cfg.AsOfTimeout)
	defer cancel()
	snap, err := v.replayAsOf(ctx, t, key.seq, key.def)
	c := &v.asOf
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running--
	av.snap, av.err = snap, err
	now := time.Now()
	av.used = now
	close(av.done)
	if err != nil {
		if c.m[key] == av {
			delete(c.m, key)
		}
		return
	}
	// Keep at most AsOfCache finished views: the least recently used go.
	for {
		var oldest asOfKey
		var when time.Time
		n := 0
		for k, x := range c.m {
			if x.snap == nil {
				continue // running, or failed
			}
			n++
			if when.IsZero() || x.used.Before(when) {
				oldest, when = k, x.used
			}
		}
		if n <= v.cfg.AsOfCache {
			break
		}
		delete(c.m, oldest)
	}
	c.scheduleLocked(now, v.cfg.AsOfCacheTTL)
}

// scheduleLocked arms the timer that drops expired views, for the
// earliest expiry, unless it is armed already or nothing is kept.
func (c *asOfCache) scheduleLocked(now time.Time, ttl time.Duration) {
	if c.sweep != nil {
		return
	}
	var earliest time.Time
	for _, x := range c.m {
		if x.snap != nil && (earliest.IsZero() || x.used.Before(earliest)) {
			earliest = x.used
		}
	}
	if earliest.IsZero() {
		return
	}
	c.sweep = time.AfterFunc(earliest.Add(ttl).Sub(now)+time.Millisecond, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.sweep = nil
		now := time.Now()
		for k, x := range c.m {
			if x.snap != nil && now.Sub(x.used) > ttl {
				delete(c.m, k)
			}
		}
		c.scheduleLocked(now, ttl)
	})
}

// asOfCached returns the number of finished as-of views kept (for tests).
func (v *Views) asOfCached() int {
	v.asOf.mu.Lock()
	defer v.asOf.mu.Unlock()
	n := 0
	for _, x := range v.asOf.m {
		if x.snap != nil {
			n++
		}
	}
	return n
}

// asOfTooFar is the refusal of an as-of read of seq that would replay
// more than limit records after the snapshot at from (0: none).
func asOfTooFar(t *Table, seq, from, limit uint64) error {
	after := "the table's first record"
	if from > 0 {
		after = fmt.Sprintf("the snapshot at %d, the newest at or before it", from)
	}
	return engine.Errorf(engine.CodeAsOfTooFar,
		"a read of table %s as of position %d replays %d journal records after %s; this node replays at most %d for one as-of read",
		engine.ShownTable(t.Name()), seq, seq-from, after, limit)
}

// replayAsOf builds t's view as of seq: the newest snapshot chain at or
// before seq (the node's files, else the shared store's objects) loaded
// into a view of its own, then the journal after it replayed up to and
// including seq with the applier's checks (from the first record without
// a snapshot), and returns its snapshot.
func (v *Views) replayAsOf(ctx context.Context, t *Table, seq uint64, def *Definition) (*Snapshot, error) {
	if def != nil {
		t = t.source
	}
	shown := engine.ShownTable(t.Name())
	// The history from the recorded horizon on: records a prune was
	// about to remove (a crash between its two steps) are as good as
	// gone, so that a read refused once is refused again.
	h, err := v.j.History(ctx, t.Name(), t.Epoch())
	first, last := max(h.First, h.Horizon), h.Last
	if errors.Is(err, engine.ErrTableGone) {
		return nil, engine.Errorf(engine.CodeTableNotFound, "table %s does not exist", shown)
	}
	if err != nil {
		return nil, err
	}
	nt := NewTable(t.Name(), t.Epoch(), v.cfg.DedupWindow)
	nt.layoutOf(t)
	if def != nil {
		nt.attach(def)
	}
	start := time.Now()
	var from uint64 // the position the view starts at: the snapshot's
	if v.cfg.SnapshotDir != "" {
		if lc := v.loadStart(ctx, nt, chainScope{first: first, last: last, upTo: seq, scratch: true}); lc != nil {
			nt.restoreLoaded(lc)
			from = lc.seq
		}
	}
	if first > from+1 {
		return nil, engine.Errorf(engine.CodeHistoryTruncated,
			"the journal of table %s no longer holds its records before %d, and no snapshot at or before position %d covers them: its view as of %d cannot be rebuilt", shown, first, seq, seq)
	}
	if seq-from > v.cfg.AsOfMaxRecords {
		return nil, asOfTooFar(t, seq, from, v.cfg.AsOfMaxRecords)
	}
	lastLog := time.Now()
	apply := func(s uint64, rec *engine.Record, _ uint64) error {
		if err := nt.checkRecord(s, rec); err != nil {
			return err
		}
		nt.Apply(s, rec)
		if s >= seq {
			return errAsOfReached
		}
		if time.Since(lastLog) >= v.cfg.Progress {
			lastLog = time.Now()
			v.log.Info("replaying as-of view", "table", t.Name(), "record", s, "of", seq,
				"percent", fmt.Sprintf("%.1f", 100*float64(s-from)/float64(seq-from)),
				"records_per_s", int(float64(s-from)/time.Since(start).Seconds()))
		}
		return nil
	}
	if from < seq {
		// No shortcut for the records this host is appending
		// (ConsumeKnown's known): a view as of a past position reads
		// the journal alone.
		err = v.j.ConsumeKnown(ctx, t.Name(), t.Epoch(), t.Shards(), from+1, nil, apply)
		var fe *faultError
		switch {
		case errors.Is(err, errAsOfReached):
		case errors.As(err, &fe):
			return nil, engine.Errorf(engine.CodeHistoryTruncated,
				"the journal of table %s lacks records its view as of position %d needs: %v", shown, seq, fe)
		case errors.Is(err, engine.ErrTableGone):
			return nil, engine.Errorf(engine.CodeTableNotFound, "table %s does not exist", shown)
		case err != nil:
			return nil, fmt.Errorf("projections: replay of %s as of %d: %w", t.Name(), seq, err)
		default:
			return nil, fmt.Errorf("projections: replay of %s as of %d stopped at %d: %w", t.Name(), seq, nt.Seq(), context.Cause(ctx))
		}
	}
	nt.Publish()
	el := time.Since(start)
	v.log.Info("as-of view replayed", "table", t.Name(), "seq", seq, "from_snapshot", from, "records", seq-from, "entities", nt.Snapshot().Len(),
		"elapsed", el.Round(time.Millisecond), "records_per_s", int(float64(seq-from)/el.Seconds()))
	if def != nil {
		nt.dmu.Lock()
		defer nt.dmu.Unlock()
		return nt.projection(def.Full()).reader.Snapshot(), nil
	}
	return nt.Snapshot(), nil
}
