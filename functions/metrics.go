package functions

import (
	"fmt"
	"io"
	"sync/atomic"
)

// Stats counts a runner's invocations.
type Stats struct {
	Invocations atomic.Uint64 // runs of a function, retries included
	Failures    atomic.Uint64 // runs that failed
	Poisoned    atomic.Uint64 // messages moved to a poison queue
	// Throttled counts invocations that waited for a rate (enqueueRate,
	// writeRate) of their function's manifest.
	Throttled atomic.Uint64
	// BacklogRefused counts Enqueues refused because the queue was at the
	// function's queueBacklog.
	BacklogRefused atomic.Uint64
	// QueueFull counts messages the queue stream refused because their
	// queue held the node's cap (-queue-max-messages), or the stream its
	// bound of bytes (-queue-max-bytes): a function's messages, the
	// operators' enqueues and requeues, timer ticks.
	QueueFull atomic.Uint64
	// PoisonRefused counts moves to a poison queue refused because it
	// was full: the message stays on its queue and is tried again.
	PoisonRefused atomic.Uint64
}

// WriteMetrics writes the runner's counters in the Prometheus text
// format (appended to /metrics): the node's totals, and per function its
// runs by trigger, failures and durations (perFunction). The queues'
// depths are functions/queueadmin's (Admin.WriteMetrics).
func (rn *Runner) WriteMetrics(w io.Writer) {
	loaded := rn.Loaded()
	for _, m := range []struct {
		name, help, kind string
		v                uint64
	}{
		{"cairn_functions_loaded", "Functions this node runs (built-ins included).", "gauge", uint64(loaded)},
		{"cairn_function_poisoned_total", "Messages this node moved to a poison queue.", "counter", rn.stats.Poisoned.Load()},
		{"cairn_function_throttled_total", "Invocations that waited for their function's enqueueRate or writeRate.", "counter", rn.stats.Throttled.Load()},
		{"cairn_function_backlog_refused_total", "Enqueues refused because the queue held its function's queueBacklog.", "counter", rn.stats.BacklogRefused.Load()},
		{"cairn_queue_full_total", "Messages refused because their queue held the node's -queue-max-messages, or the queue stream its -queue-max-bytes.", "counter", rn.stats.QueueFull.Load()},
		{"cairn_function_poison_refused_total", "Moves to a full poison queue refused; the message stays on its queue.", "counter", rn.stats.PoisonRefused.Load()},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", m.name, m.help, m.name, m.kind, m.name, m.v)
	}
	rn.perFn.write(w)
}

// Stats returns the runner's counters.
func (rn *Runner) Stats() *Stats { return &rn.stats }
