package projections

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// Pruning. Every node looks at every live table with a retention every
// PrunerConfig.Every and removes the records its retention lets go, up to
// a cut where nothing still needs them:
//
//  1. the retention's cut: the first record of the last Age (by the
//     server's clock when it stored it), or the first of the last
//     Records records;
//  2. the first record of the command-id window and of the grace before
//     it (PrunerConfig.Grace): a retried command is answered from its
//     first result, and a node briefly cut off finds the records it
//     missed;
//  3. the first record the outbox has not relayed (nothing is pruned
//     while its position is unknown);
//  4. the newest full snapshot in the shared store at or below all
//     three: the journal is cut right after it, so a new node starts
//     from it (or a newer one) and what is left.
//
// Pruning is idempotent (Journal.Prune records the horizon, then purges
// below it): nodes that decide the same cut purge once between them,
// nodes that decide different ones each keep to what they saw, and a
// crash between the two steps is finished by the next look. The plan is a
// pure function (planPrune), tested as a table.

// PrunerConfig configures a Pruner.
type PrunerConfig struct {
	// Default is the retention of a table that has none of its own (the
	// zero value: keep everything).
	Default Retention
	// Every is how often each table is looked at (1 minute).
	Every time.Duration
	// Grace is how much of the newest history is kept whatever the
	// retention (10 minutes): the command-id window is within it, and a
	// node cut off for less than it finds the records it missed.
	Grace time.Duration
	// Relayed returns the position up to which the outbox has relayed a
	// table incarnation's messages (ok false: not known yet). It is called
	// after the journal's history is read: a record appended since may be
	// the table's first with messages (outbox.Relayed).
	Relayed func(ctx context.Context, table string, epoch uint64) (pos uint64, ok bool, err error)
	// Bases returns the positions of a table incarnation's full snapshots
	// in the shared store, ascending (Views.SharedBases).
	Bases func(ctx context.Context, table string, epoch uint64) ([]uint64, error)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Log receives the pruner's lines (slog.Default() when nil).
	Log *slog.Logger
	// DedupWindow is the views' command-id window: the grace is never
	// shorter.
	DedupWindow time.Duration
	// Failpoint, when "history.between-horizon-and-purge", kills the
	// process with SIGKILL after a prune recorded its horizon and before
	// it purged (crash tests).
	Failpoint string
}

// DefaultPruneGrace is PrunerConfig.Grace's default.
const DefaultPruneGrace = 10 * time.Minute

func (c *PrunerConfig) defaults() {
	if c.Every <= 0 {
		c.Every = time.Minute
	}
	if c.Grace <= 0 {
		c.Grace = DefaultPruneGrace
	}
	if c.DedupWindow <= 0 {
		c.DedupWindow = DefaultDedupWindow
	}
	c.Grace = max(c.Grace, c.DedupWindow)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// Pruner removes the records of the tables' journals that their retention
// lets go (see above). New starts nothing; Run prunes until ctx ends.
type Pruner struct {
	v   *Views
	j   *journal.Journal
	cfg PrunerConfig

	ready chan struct{}
	// pruned counts what every prune of this node removed, and runs the
	// prunes; failed the looks that failed.
	pruned  struct{ records, bytes, runs, failed atomic.Uint64 }
	logOnce sync.Map // table full name → struct{}: a failure logged once per table until it succeeds
}

// NewPruner returns a pruner of the views' tables.
func NewPruner(v *Views, j *journal.Journal, cfg PrunerConfig) *Pruner {
	cfg.defaults()
	return &Pruner{v: v, j: j, cfg: cfg, ready: make(chan struct{})}
}

// Ready is closed once Run runs.
func (p *Pruner) Ready() <-chan struct{} { return p.ready }

// Run looks at every table every Every until ctx ends; it returns nil.
func (p *Pruner) Run(ctx context.Context) error {
	close(p.ready)
	tick := time.NewTicker(p.cfg.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for _, info := range p.v.Tables() {
			if ctx.Err() != nil {
				return nil
			}
			t, ok := p.v.Table(info.Name)
			if !ok || t.Err() != nil {
				continue
			}
			_, _ = p.PruneTable(ctx, t) // logged
		}
	}
}

// pruneInputs are what a prune is decided from.
type pruneInputs struct {
	history   journal.History
	retention Retention
	// sinceAge and sinceGrace are the first records stored at or after
	// the retention's age and the grace (0: every record is older).
	sinceAge, sinceGrace uint64
	relayed              uint64
	relayedKnown         bool
	bases                []uint64 // ascending
}

// planPrune returns where to cut the journal (prune below before; 0:
// nothing to prune) and, when nothing is, why; cut is the first record
// the retention, the grace and the outbox keep (0: none is known yet, or
// the retention keeps everything), which the shared snapshots' collection
// keeps a base at or before (Table.PruneCut).
func planPrune(in pruneInputs) (before, cut uint64, why string) {
	h := in.history
	if in.retention.All() {
		return 0, 0, "the retention keeps everything"
	}
	if h.Last == 0 {
		return 0, 0, "no record"
	}
	end := h.Last + 1 // every record may go
	limit := end
	if r := in.retention; r.Records > 0 {
		if h.Last <= r.Records {
			return 0, 0, "within the retention"
		}
		limit = h.Last - r.Records + 1
	} else if in.sinceAge != 0 {
		limit = in.sinceAge
	}
	if in.sinceGrace != 0 {
		limit = min(limit, in.sinceGrace)
	}
	if !in.relayedKnown {
		return 0, 0, "the outbox's position is not known yet"
	}
	limit = min(limit, in.relayed+1)
	var base uint64
	for _, b := range in.bases {
		if b+1 <= limit {
			base = b
		}
	}
	// A purge a crash left undone (the horizon recorded, records below it
	// still there) is finished once the store lists a base at or after
	// the horizon's: a new node starts from it without those records. The
	// other bounds held when the horizon was recorded, and only move on.
	var finish uint64
	if h.Horizon > h.First {
		for _, b := range in.bases {
			if b+1 >= h.Horizon {
				finish = h.Horizon
				break
			}
		}
	}
	switch {
	case base+1 <= h.First && finish > 0:
		return finish, limit, ""
	case base == 0:
		return 0, limit, "no shared snapshot at or below the cut"
	case base+1 <= h.First:
		return 0, limit, "pruned up to the newest shared snapshot below the cut"
	}
	return max(base+1, finish), limit, ""
}

// PruneTable looks at one table and prunes what its retention lets go,
// returning the new horizon (0: nothing pruned). It logs what it removed,
// and a failure once per table until a look succeeds.
func (p *Pruner) PruneTable(ctx context.Context, t *Table) (uint64, error) {
	before, err := p.prune(ctx, t)
	if err != nil {
		if _, logged := p.logOnce.LoadOrStore(t.Name(), struct{}{}); !logged {
			p.cfg.Log.Warn("history not pruned", "table", t.Name(), "err", err)
		}
		p.pruned.failed.Add(1)
		return 0, err
	}
	p.logOnce.Delete(t.Name())
	return before, nil
}

// prune decides and carries out one prune of t; it returns the new
// horizon (0: nothing pruned).
func (p *Pruner) prune(ctx context.Context, t *Table) (uint64, error) {
	h, err := p.j.History(ctx, t.Name(), t.Epoch())
	if err != nil {
		return 0, err
	}
	t.noteHistory(h)
	ret := p.cfg.Default
	if h.Retention != "" {
		if ret, err = ParseRetention(h.Retention); err != nil {
			return 0, fmt.Errorf("the table's retention: %w", err)
		}
	}
	in := pruneInputs{history: h, retention: ret}
	if ret.All() || h.Last == 0 {
		t.pruneCut.Store(0)
		return 0, nil
	}
	now := p.cfg.Now()
	if ret.Age > 0 {
		if in.sinceAge, err = p.j.FirstSince(ctx, t.Name(), t.Epoch(), now.Add(-ret.Age)); err != nil {
			return 0, err
		}
	}
	if in.sinceGrace, err = p.j.FirstSince(ctx, t.Name(), t.Epoch(), now.Add(-p.cfg.Grace)); err != nil {
		return 0, err
	}
	if in.relayed, in.relayedKnown, err = p.cfg.Relayed(ctx, t.Name(), t.Epoch()); err != nil {
		return 0, err
	}
	if in.bases, err = p.cfg.Bases(ctx, t.Name(), t.Epoch()); err != nil {
		return 0, err
	}
	before, cut, why := planPrune(in)
	t.pruneCut.Store(cut)
	if before == 0 {
		p.cfg.Log.Debug("history not pruned", "table", t.Name(), "why", why, "cut", cut, "bases", in.bases, "last", h.Last, "grace", in.sinceGrace, "relayed", in.relayed)
		return 0, nil
	}
	start := time.Now()
	if err := p.j.RecordHorizon(ctx, t.Name(), t.Epoch(), before); err != nil {
		return 0, err
	}
	p.failpoint("history.between-horizon-and-purge")
	got, err := p.j.PurgeBelow(ctx, t.Name(), t.Epoch(), before)
	if err != nil {
		return 0, err
	}
	p.pruned.runs.Add(1)
	p.pruned.records.Add(got.Records)
	p.pruned.bytes.Add(got.Bytes)
	h.Horizon, h.First = before, before
	t.noteHistory(h)
	p.cfg.Log.Info("history pruned", "table", t.Name(), "horizon", before, "records", got.Records, "bytes", got.Bytes,
		"retention", ret.String(), "elapsed", time.Since(start).Round(time.Millisecond))
	return before, nil
}

// WriteMetrics writes the pruner's counters in the Prometheus text format.
func (p *Pruner) WriteMetrics(w io.Writer) {
	for _, m := range []struct {
		name, help string
		v          uint64
	}{
		{"cairn_history_pruned_records_total", "Journal records this node pruned (tables' retention).", p.pruned.records.Load()},
		{"cairn_history_pruned_bytes_total", "Bytes of journal records this node pruned.", p.pruned.bytes.Load()},
		{"cairn_history_prunes_total", "Prunes this node carried out.", p.pruned.runs.Load()},
		{"cairn_history_prune_failures_total", "Looks at a table's history that failed (logged once per table).", p.pruned.failed.Load()},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", m.name, m.help, m.name, m.name, m.v)
	}
}

// ErrTruncated is the coded error of a request for history before a
// table's horizon.
func ErrTruncated(table string, asked, horizon uint64) error {
	return engine.Errorf(engine.CodeHistoryTruncated,
		"table %s keeps its journal from position %d on (its retention pruned what was before): position %d is no longer there",
		engine.ShownTable(table), horizon, asked)
}

// failpoint kills the process with SIGKILL at the named step when the
// configuration names it (crash tests).
func (p *Pruner) failpoint(name string) {
	if p.cfg.Failpoint != name {
		return
	}
	p.cfg.Log.Warn("failpoint reached: killing the process", "failpoint", name)
	proc, _ := os.FindProcess(os.Getpid())
	_ = proc.Kill()
	select {} // SIGKILL is not handled; wait for it
}
