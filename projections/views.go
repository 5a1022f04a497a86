package projections

import (
	"context"
	"errors"
	"log/slog"
	"sync"
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

// NewViews returns views over journal j. It starts nothing.
func NewViews(j *journal.Journal, log *slog.Logger, cfg Config) *Views {
	cfg.defaults()
	return &Views{j: j, log: log, cfg: cfg, entries: map[string]*entry{}, notify: make(chan struct{})}
}

// Run follows the catalog and the journals of all live tables until ctx ends.
// On start it replays everything, logging progress; WaitReady returns once
// every view has caught up.
func (v *Views) Run(ctx context.Context) error {
	err := v.followCatalog(ctx)
	v.wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
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
