package functions

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// durationBounds are the upper bounds, in seconds, of the buckets of
// cairn_function_duration_seconds.
var durationBounds = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30}

// fnCounts is one function's counters on this node.
type fnCounts struct {
	started  uint64            // runs begun, in-flight ones included (operators' API)
	runs     map[string]uint64 // runs ended, by trigger kind (queue, change, timer, invoke)
	failures uint64
	poisoned uint64   // its messages and changes moved to a poison queue
	buckets  []uint64 // runs per duration bucket (last: above every bound)
	seconds  float64  // total duration of the runs
}

// perFunction counts each function's runs, failures, durations and
// poisoned deliveries on this node, by name. It serves both /metrics
// (write) and the operators' API (totals, through Runner.FunctionTotals). A function's counters last
// until the node stops, also after it was removed (a few counters per
// function ever run).
type perFunction struct {
	mu  sync.Mutex
	fns map[string]*fnCounts
}

// get returns fn's counters, made on first use; p.mu must be held.
func (p *perFunction) get(fn string) *fnCounts {
	if p.fns == nil {
		p.fns = map[string]*fnCounts{}
	}
	c := p.fns[fn]
	if c == nil {
		c = &fnCounts{runs: map[string]uint64{}, buckets: make([]uint64, len(durationBounds)+1)}
		p.fns[fn] = c
	}
	return c
}

// start counts one run of fn begun. It costs a map lookup under a lock.
func (p *perFunction) start(fn string) {
	p.mu.Lock()
	p.get(fn).started++
	p.mu.Unlock()
}

// poison counts one delivery of fn moved to its poison queue.
func (p *perFunction) poison(fn string) {
	p.mu.Lock()
	p.get(fn).poisoned++
	p.mu.Unlock()
}

// totals returns fn's runs begun, failed runs and poisoned deliveries on
// this node (all zero for a function it never ran), without making an
// entry for it.
func (p *perFunction) totals(fn string) (invocations, failures, poisoned uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.fns[fn]; c != nil {
		return c.started, c.failures, c.poisoned
	}
	return 0, 0, 0
}

// record counts one run of function fn for a trigger of kind, which took
// d and failed unless failed is false. It costs a map lookup under a lock.
func (p *perFunction) record(fn, kind string, d time.Duration, failed bool) {
	secs := d.Seconds()
	b, _ := slices.BinarySearch(durationBounds, secs)
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.get(fn)
	c.runs[kind]++
	if failed {
		c.failures++
	}
	c.buckets[b]++
	c.seconds += secs
}

// labelEscaper escapes a Prometheus label value.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func label(s string) string { return `"` + labelEscaper.Replace(s) + `"` }

// write writes the per-function series in the Prometheus text format,
// functions and triggers in name order: only functions with a run ended
// have series.
func (p *perFunction) write(w io.Writer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var names []string
	for n, c := range p.fns {
		if len(c.runs) > 0 {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	fmt.Fprintln(w, "# HELP cairn_function_invocations_total Runs of a function on this node by trigger (queue, change, timer, invoke), retries included.")
	fmt.Fprintln(w, "# TYPE cairn_function_invocations_total counter")
	for _, n := range names {
		c := p.fns[n]
		for _, k := range slices.Sorted(maps.Keys(c.runs)) {
			fmt.Fprintf(w, "cairn_function_invocations_total{function=%s,trigger=%s} %d\n", label(n), label(k), c.runs[k])
		}
	}
	fmt.Fprintln(w, "# HELP cairn_function_failures_total Runs of a function on this node that failed (error, crash, timeout, commit).")
	fmt.Fprintln(w, "# TYPE cairn_function_failures_total counter")
	for _, n := range names {
		fmt.Fprintf(w, "cairn_function_failures_total{function=%s} %d\n", label(n), p.fns[n].failures)
	}
	fmt.Fprintln(w, "# HELP cairn_function_duration_seconds How long a function's runs on this node took, its commit included.")
	fmt.Fprintln(w, "# TYPE cairn_function_duration_seconds histogram")
	for _, n := range names {
		c := p.fns[n]
		var cum uint64
		for i, b := range durationBounds {
			cum += c.buckets[i]
			fmt.Fprintf(w, "cairn_function_duration_seconds_bucket{function=%s,le=\"%s\"} %d\n", label(n), strconv.FormatFloat(b, 'g', -1, 64), cum)
		}
		cum += c.buckets[len(durationBounds)]
		fmt.Fprintf(w, "cairn_function_duration_seconds_bucket{function=%s,le=\"+Inf\"} %d\n", label(n), cum)
		fmt.Fprintf(w, "cairn_function_duration_seconds_sum{function=%s} %s\n", label(n), strconv.FormatFloat(c.seconds, 'g', -1, 64))
		fmt.Fprintf(w, "cairn_function_duration_seconds_count{function=%s} %d\n", label(n), cum)
	}
}

// FunctionTotals returns a function's runs begun (in-flight ones
// included), failed runs and deliveries moved to a poison queue on this
// node since it started: all zero for a function it never ran.
func (rn *Runner) FunctionTotals(name string) (invocations, failures, poisoned uint64) {
	return rn.perFn.totals(name)
}
