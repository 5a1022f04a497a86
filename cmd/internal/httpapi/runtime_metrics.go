package httpapi

import (
	"fmt"
	"io"
	"math"
	rtmetrics "runtime/metrics"
	"strconv"
)

// runtimeSeries are the Go runtime's figures /metrics shows, by the names
// Prometheus' Go collector gives them where it has one.
var runtimeSeries = []struct {
	name, help, kind, sample string
}{
	{"go_goroutines", "Goroutines that currently exist.", "gauge", "/sched/goroutines:goroutines"},
	{"go_gomaxprocs", "GOMAXPROCS: the threads that may run Go code at once.", "gauge", "/sched/gomaxprocs:threads"},
	{"go_memstats_heap_alloc_bytes", "Bytes of live and not yet swept heap objects.", "gauge", "/memory/classes/heap/objects:bytes"},
	{"go_memstats_sys_bytes", "Bytes of memory the Go runtime has mapped from the OS.", "gauge", "/memory/classes/total:bytes"},
	{"go_gc_heap_goal_bytes", "Heap size at which the next garbage collection starts.", "gauge", "/gc/heap/goal:bytes"},
	{"go_gc_cycles_total", "Completed garbage collection cycles.", "counter", "/gc/cycles/total:gc-cycles"},
}

// gcPauseSample is the runtime's histogram of stop-the-world pauses for
// garbage collection.
const gcPauseSample = "/sched/pauses/total/gc:seconds"

// gcPauseBounds are the upper bounds of go_gc_pause_seconds' buckets: the
// runtime's finer buckets are summed into these.
var gcPauseBounds = []float64{1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1}

// writeRuntimeMetrics writes the Go runtime's figures (runtime/metrics:
// no stop of the world; a few microseconds) in the Prometheus text format.
func writeRuntimeMetrics(w io.Writer) {
	samples := make([]rtmetrics.Sample, len(runtimeSeries)+1)
	for i, s := range runtimeSeries {
		samples[i].Name = s.sample
	}
	samples[len(runtimeSeries)].Name = gcPauseSample
	rtmetrics.Read(samples)
	for i, s := range runtimeSeries {
		var v float64
		switch samples[i].Value.Kind() {
		case rtmetrics.KindUint64:
			v = float64(samples[i].Value.Uint64())
		case rtmetrics.KindFloat64:
			v = samples[i].Value.Float64()
		default:
			continue // not known to this runtime
		}
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", s.name, s.help, s.name, s.kind, s.name, formatFloat(v))
	}
	if p := samples[len(runtimeSeries)].Value; p.Kind() == rtmetrics.KindFloat64Histogram {
		writeGCPauses(w, p.Float64Histogram())
	}
}

// writeGCPauses writes the runtime's pause histogram as the Prometheus
// histogram go_gc_pause_seconds. A runtime bucket counts in the first
// bound at or above its upper edge. The runtime keeps no sum of the
// pauses, so the series has no _sum.
func writeGCPauses(w io.Writer, h *rtmetrics.Float64Histogram) {
	cum := make([]uint64, len(gcPauseBounds))
	var total uint64
	for i, n := range h.Counts {
		total += n
		upper := h.Buckets[i+1]
		for j, b := range gcPauseBounds {
			if upper <= b {
				cum[j] += n
			}
		}
	}
	fmt.Fprintln(w, "# HELP go_gc_pause_seconds Stop-the-world pauses for garbage collection (no _sum: the runtime keeps none).")
	fmt.Fprintln(w, "# TYPE go_gc_pause_seconds histogram")
	for j, b := range gcPauseBounds {
		fmt.Fprintf(w, "go_gc_pause_seconds_bucket{le=\"%s\"} %d\n", formatFloat(b), cum[j])
	}
	fmt.Fprintf(w, "go_gc_pause_seconds_bucket{le=\"+Inf\"} %d\ngo_gc_pause_seconds_count %d\n", total, total)
}

// formatFloat writes a sample value as Prometheus reads it.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
