package functions

import "sync/atomic"

// fnCounters count one function's runs on this node since it started,
// across its versions (Stats has the runner's totals).
type fnCounters struct {
	invocations, failures, poisoned atomic.Uint64
}

// counters returns the counters of the function named name, made on its
// first use. Cost: one sync.Map lookup; the map holds one entry per
// function name this node ever ran.
func (rn *Runner) counters(name string) *fnCounters {
	if c, ok := rn.counts.Load(name); ok {
		return c.(*fnCounters)
	}
	c, _ := rn.counts.LoadOrStore(name, &fnCounters{})
	return c.(*fnCounters)
}
