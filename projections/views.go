package projections

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/journal"
)

// Views keeps the catalog of tables and one materialised Table per live
// table, fed by the journal. Run does the work; the other methods are safe
// from any goroutine.
type Views struct {
	j   *journal.Journal
	log *slog.Logger
	cfg Config

	mu            sync.RWMutex
	entries       map[string]*entry // by lowercase name, live and deleted
	catalogSeq    uint64
	catalogLoaded bool          // the catalog caught up once: appliers start as tables appear
	notify        chan struct{} // closed and replaced when the catalog advances or tables become ready
	ready         chan struct{} // closed once, when every view first caught up (see Ready)
	readyClosed   bool

	catalogSkipped atomic.Uint64 // catalog records that could not be used
	catalogGone    atomic.Bool   // the catalog follower last found no catalog stream

	decls map[string]*Definition // declared projections by lowercase full name

	running atomic.Bool    // Run was called
	wg      sync.WaitGroup // the goroutines Run started: appliers, stream deletions

	runCtx atomic.Pointer[context.Context] // Run's context, which bounds the as-of replays and the builds
	asOf   asOfCache                       // as-of views: replays running and views kept (asof.go)
	stats  snapStats                       // snapshot figures (snapmetrics.go)
	moves  moveStats                       // moves of views between hosts (moves.go)
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
	// StreamGrace is how long after its catalog record a table's missing
	// stream is created (its creator crashed before it did); later, a
	// missing stream faults the table (1 minute).
	StreamGrace time.Duration
	// HistoryCheck is how often the applier of a table checks that no
	// record was removed from its journal while it follows it (a purge
	// behind Cairn's back), which faults the table then rather than at the
	// next start (30 seconds; one stream-info request per table).
	HistoryCheck time.Duration

	// SnapshotDir is where the node writes its views' snapshot files and
	// loads them from on start (snapstore.go); empty: no snapshots, every
	// view is rebuilt from its whole journal.
	SnapshotDir string
	// SnapshotEvery and SnapshotBytes bound a view's tail, the records
	// it applied after its last snapshot (what a start after a crash
	// replays): a snapshot is written once the tail holds SnapshotEvery
	// records (DefaultSnapshotEvery) or SnapshotBytes bytes of them
	// (DefaultSnapshotBytes), whichever comes first, whatever the time
	// (snapshotter.go).
	SnapshotEvery int
	SnapshotBytes int64
	// SnapshotInterval is the longest a view's records go without a
	// snapshot: a view with a smaller tail writes one once its last is
	// this old (5 minutes; negative: never by time). It is checked as
	// records are applied. (It was the least time between two snapshots
	// before the tail was bounded; the flag keeps its name.)
	SnapshotInterval time.Duration
	// SnapshotCompact and SnapshotBaseAge decide when a chain of deltas
	// is compacted into a new base: once what a start would load beyond
	// the view (entities written again since the base, and deletions)
	// exceeds SnapshotCompact times the view's entities
	// (DefaultSnapshotCompact), or its base is SnapshotBaseAge old (1
	// hour; the journal's pruning cuts it at a base, so bases come at
	// least that often on a written table); and at maxChainDeltas.
	SnapshotCompact float64
	SnapshotBaseAge time.Duration
	// SnapshotStore, with SnapshotDir, is the JetStream object store the
	// views share their snapshots through (snapshare.go;
	// OpenSnapshotStore): each file written is also put there unless the
	// store holds a newer one of the table incarnation, and a view starts
	// from the store's when it is newer than its newest usable file. nil:
	// the files are the node's own.
	SnapshotStore *SnapshotStore
	// NoSnapshotOnStop skips the snapshot each view otherwise writes when
	// the views stop cleanly and it applied records since its last one.
	NoSnapshotOnStop bool
	// Failpoint, for crash tests, kills the process with SIGKILL at a
	// named step: "snapshot.base-write" or "snapshot.delta-write", once
	// a snapshot's content is in its temporary file, before it is
	// fsynced and renamed.
	Failpoint string

	// AsOfMaxRecords bounds the journal records one as-of read replays
	// (1,000,000): a read as of a later position is refused (AsOfTooFar).
	AsOfMaxRecords uint64
	// AsOfReplays is how many as-of replays may run at once on the node
	// (2); a read that would start one more is refused with ServerBusy.
	AsOfReplays int
	// AsOfCache is how many finished as-of views the node keeps for reuse
	// (4), each for AsOfCacheTTL after its last use (30 seconds).
	AsOfCache    int
	AsOfCacheTTL time.Duration
	// AsOfTimeout bounds one as-of replay (2 minutes).
	AsOfTimeout time.Duration

	// Placement says which view shards of a table incarnation with shards
	// this host holds (docs/SCALE.md): held[s] for shard s, nil (or a
	// slice holding every shard) for all of them. A view that holds only
	// some materialises only their partitions' entities, read alone on a
	// filtered consumer (sparse.go); it learns where it stands between
	// their records, so its position means what a whole view's does.
	// Such a view writes shard bases of its shards alone, and
	// starts from those and the table's whole snapshots (snapshards.go).
	// nil: every host holds every table whole. It is asked when a table's
	// view starts, and again by Replace when the live hosts change.
	Placement func(table string, epoch uint64, shards uint32) (held []bool)
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
	if c.StreamGrace <= 0 {
		c.StreamGrace = time.Minute
	}
	if c.HistoryCheck <= 0 {
		c.HistoryCheck = 30 * time.Second
	}
	if c.SnapshotEvery <= 0 {
		c.SnapshotEvery = DefaultSnapshotEvery
	}
	if c.SnapshotBytes <= 0 {
		c.SnapshotBytes = DefaultSnapshotBytes
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
	if c.SnapshotCompact <= 0 {
		c.SnapshotCompact = DefaultSnapshotCompact
	}
	if c.SnapshotBaseAge <= 0 {
		c.SnapshotBaseAge = DefaultSnapshotBaseAge
	}
	if c.AsOfMaxRecords == 0 {
		c.AsOfMaxRecords = 1_000_000
	}
	if c.AsOfReplays <= 0 {
		c.AsOfReplays = 2
	}
	if c.AsOfCache <= 0 {
		c.AsOfCache = 4
	}
	if c.AsOfCacheTTL <= 0 {
		c.AsOfCacheTTL = 30 * time.Second
	}
	if c.AsOfTimeout <= 0 {
		c.AsOfTimeout = 2 * time.Minute
	}
}

// NewViews returns views over journal j. It starts nothing: Run does.
func NewViews(j *journal.Journal, log *slog.Logger, cfg Config) *Views {
	cfg.defaults()
	return &Views{j: j, log: log, cfg: cfg, entries: map[string]*entry{},
		notify: make(chan struct{}), ready: make(chan struct{})}
}

// Run replays the catalog and the journals of all live tables into their
// views, logging progress, then follows them until ctx ends; Ready is
// closed once every view has caught up. It returns only after every
// goroutine it started has exited: the catalog follower (Run's own), the
// appliers (each stops its ordered consumer before it returns) and the
// deletions of dropped tables' streams.
//
// Run returns nil after ctx ended. Otherwise it returns the error that
// stopped the catalog follower: a catalog record it cannot decode (wrapping
// journal.ErrCorrupt); JetStream errors that pass (timeouts, a leader
// election, a lost connection) are retried with back-off and logged, not
// returned. A table's record that cannot be decoded stops that table's view
// alone (Table.Err, and its waiters fail), not Run. Run may be called once.
func (v *Views) Run(ctx context.Context) error {
	if !v.running.CompareAndSwap(false, true) {
		return errors.New("projections: Views.Run called twice")
	}
	fctx, stop := context.WithCancel(ctx)
	v.mu.Lock() // builds start under mu once it is set (declared_views.go)
	v.runCtx.Store(&fctx)
	v.mu.Unlock()
	err := v.followCatalog(fctx)
	// The appliers, deletions and builds end with the catalog follower;
	// none starts after this (each is started under mu, while fctx lives).
	v.mu.Lock()
	stop()
	v.mu.Unlock()
	v.wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// baseContext is the context as-of replays run under: Run's, which ends
// them when the views stop.
func (v *Views) baseContext() context.Context {
	if p := v.runCtx.Load(); p != nil {
		return *p
	}
	return context.Background()
}

// retry runs fn until it succeeds, ctx ends (false) or fn fails
// permanently: JetStream errors such as a timeout during a leader election
// pass, and a view must not stop for good because of one.
func (v *Views) retry(ctx context.Context, what, table string, fn func() error) error {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		err := fn()
		if err == nil || ctx.Err() != nil || permanent(err) {
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
