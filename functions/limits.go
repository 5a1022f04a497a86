package functions

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/cairn-dev/cairn/engine"
)

// Defaults and bounds of a manifest's budgets (docs/FUNCTIONS.md).
const (
	// DefaultEnqueueRate is the messages per second a function enqueues
	// on one node when its manifest sets no enqueueRate.
	DefaultEnqueueRate = 100
	// DefaultWriteRate is the entities per second a function writes on
	// one node when its manifest sets no writeRate.
	DefaultWriteRate = 1000
	// DefaultQueueBacklog is the messages a queue may hold before a
	// function's Enqueue to it is refused, when its manifest sets no
	// queueBacklog.
	DefaultQueueBacklog = 10_000
	// MaxRate bounds enqueueRate and writeRate.
	MaxRate = 100_000
	// MaxQueueBacklog bounds queueBacklog.
	MaxQueueBacklog = 10_000_000
)

// CodeQueueBacklogExceeded is Cairn's own code of an Enqueue refused
// because the queue holds as many messages as the function's queueBacklog
// allows.
const CodeQueueBacklogExceeded engine.Code = "QueueBacklogExceeded"

// throttleLogEvery is the least time between two log lines saying that
// one function is throttled.
const throttleLogEvery = 10 * time.Second

// limits are the budgets of one loaded version of a function on this
// node: token buckets of its enqueues and writes per second, shared by
// its invocations, and the backlog past which its Enqueue is refused.
type limits struct {
	name    string
	enqueue *rate.Limiter
	write   *rate.Limiter
	backlog int
	log     *slog.Logger
	stats   *Stats
	// logged is when the last "throttled" line was written (UnixNano).
	logged atomic.Int64
}

// newLimits returns the budgets of a manifest (defaults filled). A
// bucket holds one second of its rate, so a function that has been idle
// may do that much at once.
func newLimits(manifest *Manifest, log *slog.Logger, stats *Stats) *limits {
	m := *manifest
	m.Defaults()
	return &limits{
		name:    m.Name,
		enqueue: rate.NewLimiter(rate.Limit(m.EnqueueRate), m.EnqueueRate),
		write:   rate.NewLimiter(rate.Limit(m.WriteRate), m.WriteRate),
		backlog: m.QueueBacklog,
		log:     log,
		stats:   stats,
	}
}

// wait takes a token of bucket (what names it: "enqueue", "write"),
// waiting for one if it is empty, at most until ctx ends: then it fails
// with ServerBusy at once, without waiting for a token that would come
// too late. The first wait of an invocation (*throttled false) counts it
// as throttled and, at most every throttleLogEvery per function, says so
// in the log.
func (l *limits) wait(ctx context.Context, bucket *rate.Limiter, what string, throttled *bool) error {
	if bucket.Allow() {
		return nil
	}
	if !*throttled {
		*throttled = true
		l.stats.Throttled.Add(1)
		now := time.Now().UnixNano()
		if last := l.logged.Load(); now-last >= int64(throttleLogEvery) && l.logged.CompareAndSwap(last, now) {
			l.log.Warn("function throttled: it uses its rate as fast as it refills; invocations wait for it",
				"function", l.name, "limit", what, "perSecond", int(bucket.Limit()))
		}
	}
	if err := bucket.Wait(ctx); err != nil {
		return engine.Errorf(engine.CodeServerBusy, "the function's %s rate of %d per second is used up and the invocation's deadline comes first (raise %sRate in its manifest, or enqueue less)",
			what, int(bucket.Limit()), what)
	}
	return nil
}
