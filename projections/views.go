package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// Views keeps the catalog of tables and one materialised Table per live
// table, fed by the journal. Run does the work; the other methods are safe
// from any goroutine.
type Views struct {
	j   *journal.Journal
	log *slog.Logger
	cfg Config

	mu         sync.RWMutex
	entries    map[string]*entry // by lowercase name, live and deleted
	catalogSeq uint64
	ready      bool
	notify     chan struct{} // closed and replaced when the catalog advances or tables become ready
	wg         sync.WaitGroup
}

// Config tunes the views.
type Config struct {
	// DedupWindow is how long command ids are remembered (journal time).
	DedupWindow time.Duration
	// PublishEvery bounds how many records the applier applies before it
	// publishes a snapshot while more records are pending.
	PublishEvery int
	// Progress is the interval of replay progress lines.
	Progress time.Duration
}

func (c *Config) defaults() {
	if c.DedupWindow <= 0 {
		c.DedupWindow = DefaultDedupWindow
	}
	if c.PublishEvery <= 0 {
		c.PublishEvery = 256
	}
	if c.Progress <= 0 {
		c.Progress = 2 * time.Second
	}
}

// entry is the catalog's knowledge of one table name.
type entry struct {
	info    engine.TableInfo
	seq     uint64 // catalog sequence of the name's last record
	live    bool
	table   *Table
	cancel  context.CancelFunc
	started bool
	ready   bool // caught up with the journal as it was when the view started
}

// NewViews returns views over journal j. It starts nothing.
func NewViews(j *journal.Journal, log *slog.Logger, cfg Config) *Views {
	cfg.defaults()
	return &Views{j: j, log: log, cfg: cfg, entries: map[string]*entry{}, notify: make(chan struct{})}
}

// Run follows the catalog and the journals of all live tables until ctx ends.
// On start it replays everything, logging progress; WaitReady returns once
// every view has caught up.
func (v *Views) Run(ctx context.Context) error {
	start := time.Now()
	var last uint64
	err := v.retry(ctx, "read the catalog's length", "", func() error {
		var err error
		last, err = v.j.LastCatalogSeq(ctx)
		return err
	})
	if err == nil {
		if last == 0 {
			v.catalogCaughtUp(ctx, start)
		}
		err = v.retry(ctx, "follow the catalog", "", func() error {
			v.mu.RLock()
			from := v.catalogSeq + 1
			v.mu.RUnlock()
			err := v.j.WatchCatalog(ctx, from, func(seq uint64, rec *engine.CatalogRecord, pending uint64) error {
				v.applyCatalog(ctx, seq, rec)
				if pending == 0 || seq >= last {
					v.catalogCaughtUp(ctx, start)
				}
				return nil
			})
			if err == nil && ctx.Err() == nil {
				err = errors.New("consumer ended")
			}
			return err
		})
	}
	v.wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (v *Views) applyCatalog(ctx context.Context, seq uint64, rec *engine.CatalogRecord) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if seq <= v.catalogSeq {
		return // delivered again after a resumed consumer
	}
	lower := Lower(rec.Name)
	e := v.entries[lower]
	if e == nil {
		e = &entry{}
		v.entries[lower] = e
	}
	e.seq = seq
	switch rec.Kind {
	case engine.CatalogTableCreated:
		e.info = engine.TableInfo{Name: rec.Name, Epoch: seq, Created: rec.Time}
		e.live = true
		e.table = NewTable(rec.Name, seq, v.cfg.DedupWindow)
		e.started, e.ready = false, false
		if v.ready {
			v.startLocked(ctx, e)
		}
	case engine.CatalogTableDeleted:
		if e.cancel != nil {
			e.cancel()
		}
		if e.table != nil {
			e.table.Fail(engine.Errorf(engine.CodeTableNotFound, "table %s was deleted", rec.Name))
		}
		old := e.info
		e.live, e.table, e.cancel, e.started, e.ready = false, nil, nil, false, false
		if v.ready && old.Epoch != 0 {
			// The host that deleted the table removes its stream; every
			// host does it too, in case that one crashed in between.
			go func() {
				if err := v.j.DeleteTableStream(ctx, old.Name, old.Epoch); err != nil && ctx.Err() == nil {
					v.log.Warn("delete table stream", "table", old.Name, "err", err)
				}
			}()
		}
	}
	v.catalogSeq = seq
	v.broadcastLocked()
}

func (v *Views) catalogCaughtUp(ctx context.Context, start time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ready {
		return
	}
	v.ready = true
	n := 0
	for _, e := range v.entries {
		if e.live {
			v.startLocked(ctx, e)
			n++
		}
	}
	v.broadcastLocked()
	v.log.Info("catalog loaded", "tables", n, "catalog_seq", v.catalogSeq, "elapsed", time.Since(start).Round(time.Millisecond))
}

// startLocked starts the applier of a live table's view.
func (v *Views) startLocked(ctx context.Context, e *entry) {
	if e.started {
		return
	}
	e.started = true
	tctx, cancel := context.WithCancel(ctx)
	e.cancel = cancel
	t := e.table
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		err := v.follow(tctx, e, t)
		if err != nil && tctx.Err() == nil {
			v.log.Error("view stopped", "table", t.Name(), "err", err)
			t.Fail(err)
		}
	}()
}

// retry runs fn until it succeeds, ctx ends (false) or fn fails
// permanently: JetStream errors such as a timeout during a leader election
// pass, and a view must not stop for good because of one.
func (v *Views) retry(ctx context.Context, what, table string, fn func() error) error {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		err := fn()
		if err == nil || ctx.Err() != nil || errors.Is(err, journal.ErrCorrupt) {
			return err
		}
		v.log.Warn("retrying", "what", what, "table", table, "in", wait, "err", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// follow replays and then tails one table's journal into its view. It
// returns only when ctx ends or a record cannot be decoded.
func (v *Views) follow(ctx context.Context, e *entry, t *Table) error {
	// The host that created the table creates its stream right after the
	// catalog record; only if it does not appear (that host crashed in
	// between) does this host create it.
	err := v.retry(ctx, "find the table's stream", t.Name(), func() error {
		exists, err := v.j.WaitTableStream(ctx, t.Name(), t.Epoch(), 5*time.Second)
		if err == nil && !exists {
			err = v.j.EnsureTableStream(ctx, t.Name(), t.Epoch())
		}
		return err
	})
	if err != nil {
		return err
	}
	var target uint64
	err = v.retry(ctx, "read the stream's length", t.Name(), func() error {
		var err error
		target, err = v.j.LastStreamSeq(ctx, t.Name(), t.Epoch())
		return err
	})
	if err != nil {
		return err
	}
	start, lastLog := time.Now(), time.Now()
	caughtUp := false
	markReady := func() {
		caughtUp = true
		v.mu.Lock()
		e.ready = true
		v.broadcastLocked()
		v.mu.Unlock()
		if target > 0 {
			el := time.Since(start)
			v.log.Info("view replayed", "table", t.Name(), "records", target, "entities", t.Snapshot().Len(),
				"elapsed", el.Round(time.Millisecond), "records_per_s", int(float64(target)/el.Seconds()))
		}
	}
	if target == 0 {
		markReady()
	}
	sinceSnap := 0
	apply := func(seq uint64, rec *engine.Record, pending uint64) error {
		t.Apply(seq, rec)
		sinceSnap++
		if pending == 0 || sinceSnap >= v.cfg.PublishEvery {
			t.Publish()
			sinceSnap = 0
		}
		if !caughtUp {
			if seq >= target {
				t.Publish()
				markReady()
			} else if time.Since(lastLog) >= v.cfg.Progress {
				lastLog = time.Now()
				el := time.Since(start).Seconds()
				v.log.Info("replaying view", "table", t.Name(), "record", seq, "of", target,
					"percent", fmt.Sprintf("%.1f", 100*float64(seq)/float64(target)),
					"records_per_s", int(float64(seq)/el))
			}
		}
		return nil
	}
	return v.retry(ctx, "follow the journal", t.Name(), func() error {
		// After an interruption, resume right after the last record applied.
		err := v.j.ConsumeKnown(ctx, t.Name(), t.Epoch(), t.Seq()+1, t.appendedRecord, apply)
		if err == nil && ctx.Err() == nil {
			err = errors.New("consumer ended")
		}
		return err
	})
}

func (v *Views) broadcastLocked() {
	close(v.notify)
	v.notify = make(chan struct{})
}

// wait blocks until cond (called with v.mu read-locked) holds or ctx ends.
func (v *Views) wait(ctx context.Context, cond func() bool) error {
	for {
		v.mu.RLock()
		ok, ch := cond(), v.notify
		v.mu.RUnlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitReady blocks until the catalog and every table's view have caught up
// with the journal as it was when they started.
func (v *Views) WaitReady(ctx context.Context) error {
	return v.wait(ctx, func() bool {
		if !v.ready {
			return false
		}
		for _, e := range v.entries {
			if e.live && !e.ready {
				return false
			}
		}
		return true
	})
}

// WaitCatalog blocks until the catalog has reached seq.
func (v *Views) WaitCatalog(ctx context.Context, seq uint64) error {
	return v.wait(ctx, func() bool { return v.catalogSeq >= seq })
}

// WaitTableReady blocks until the view of the named table (epoch) has
// caught up; it fails with TableNotFound if the table is gone.
func (v *Views) WaitTableReady(ctx context.Context, name string, epoch uint64) error {
	var gone bool
	err := v.wait(ctx, func() bool {
		e := v.entries[Lower(name)]
		if e == nil || !e.live || e.info.Epoch != epoch {
			gone = true
			return true
		}
		return e.ready
	})
	if err == nil && gone {
		return engine.Errorf(engine.CodeTableNotFound, "table %s does not exist", name)
	}
	return err
}

// Table returns the view of a live table, looked up case-insensitively.
func (v *Views) Table(name string) (*Table, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	e := v.entries[Lower(name)]
	if e == nil || !e.live {
		return nil, false
	}
	return e.table, true
}

// Lookup returns the view of a live table like Table, but when this host
// does not know the name it first catches up with the catalog: a table
// just created through another host is then found (and its view made
// ready) instead of being reported missing.
func (v *Views) Lookup(ctx context.Context, name string) (*Table, bool, error) {
	if t, ok := v.Table(name); ok {
		return t, true, nil
	}
	last, err := v.j.LastCatalogSeq(ctx)
	if err != nil {
		return nil, false, err
	}
	if err := v.WaitCatalog(ctx, last); err != nil {
		return nil, false, err
	}
	_, info, live := v.CatalogEntry(name)
	if !live {
		return nil, false, nil
	}
	if err := v.WaitTableReady(ctx, name, info.Epoch); err != nil {
		if engine.ErrorCode(err) == engine.CodeTableNotFound {
			return nil, false, nil
		}
		return nil, false, err
	}
	t, ok := v.Table(name)
	return t, ok, nil
}

// CatalogEntry returns what the catalog knows of a table name: the sequence
// of its last catalog record (0 if none), its info, and whether it is live.
func (v *Views) CatalogEntry(name string) (seq uint64, info engine.TableInfo, live bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	e := v.entries[Lower(name)]
	if e == nil {
		return 0, engine.TableInfo{}, false
	}
	return e.seq, e.info, e.live
}

// Tables lists the live tables sorted by name (ordinal, as Azure does).
func (v *Views) Tables() []engine.TableInfo {
	v.mu.RLock()
	out := make([]engine.TableInfo, 0, len(v.entries))
	for _, e := range v.entries {
		if e.live {
			out = append(out, e.info)
		}
	}
	v.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
