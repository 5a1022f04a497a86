package httpapi

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrape parses the Prometheus text of write into its samples ("name" or
// "name{labels}" → value), failing on a sample without its TYPE line or
// a family typed twice.
func scrape(t *testing.T, write func(*bytes.Buffer)) map[string]float64 {
	t.Helper()
	var b bytes.Buffer
	write(&b)
	out := map[string]float64{}
	typed := map[string]bool{}
	sc := bufio.NewScanner(&b)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name := strings.Fields(rest)[0]
			if typed[name] {
				t.Fatalf("%s typed twice", name)
			}
			typed[name] = true
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("not a sample: %q", line)
		}
		name := line[:i]
		family, _, _ := strings.Cut(name, "{")
		base := strings.TrimSuffix(strings.TrimSuffix(family, "_bucket"), "_count")
		if !typed[family] && !typed[base] {
			t.Fatalf("%q has no TYPE line", line)
		}
		out[name] = v
	}
	return out
}

// TestRuntimeMetrics: the runtime's figures are there and follow what the
// process does.
func TestRuntimeMetrics(t *testing.T) {
	runtime.GC()
	before := scrape(t, func(b *bytes.Buffer) { writeRuntimeMetrics(b) })
	for _, name := range []string{"go_goroutines", "go_gomaxprocs", "go_memstats_heap_alloc_bytes", "go_memstats_sys_bytes", "go_gc_heap_goal_bytes", "go_gc_cycles_total", `go_gc_pause_seconds_bucket{le="+Inf"}`, "go_gc_pause_seconds_count"} {
		if _, ok := before[name]; !ok {
			t.Fatalf("no %s in %v", name, before)
		}
	}
	if before["go_goroutines"] < 1 || before["go_memstats_heap_alloc_bytes"] <= 0 || before["go_gc_cycles_total"] < 1 {
		t.Fatalf("implausible figures: %v", before)
	}
	// Other tests' goroutines may end meanwhile, so the figure is held
	// against the goroutines known to live at the scrape: these and the
	// test's own.
	const parked = 1000
	stop := make(chan struct{})
	for range parked {
		go func() { <-stop }()
	}
	runtime.GC()
	after := scrape(t, func(b *bytes.Buffer) { writeRuntimeMetrics(b) })
	close(stop)
	if after["go_goroutines"] < parked+1 || after["go_gc_cycles_total"] <= before["go_gc_cycles_total"] {
		t.Fatalf("goroutines %v → %v, GC cycles %v → %v", before["go_goroutines"], after["go_goroutines"], before["go_gc_cycles_total"], after["go_gc_cycles_total"])
	}
	if after[`go_gc_pause_seconds_bucket{le="+Inf"}`] != after["go_gc_pause_seconds_count"] || after["go_gc_pause_seconds_count"] < 1 ||
		after[`go_gc_pause_seconds_bucket{le="1e-05"}`] > after[`go_gc_pause_seconds_bucket{le="1"}`] {
		t.Fatalf("pause histogram: %v", after)
	}
}

// TestProcessMetrics: the process's figures read from /proc follow the
// files it opens and the CPU it spends.
func TestProcessMetrics(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process figures are read from /proc")
	}
	before := scrape(t, func(b *bytes.Buffer) { writeProcessMetrics(b) })
	for _, name := range []string{"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "process_max_fds", "process_start_time_seconds"} {
		if _, ok := before[name]; !ok {
			t.Fatalf("no %s in %v", name, before)
		}
	}
	now := float64(time.Now().Unix())
	if st := before["process_start_time_seconds"]; st > now+1 || st < now-3600 {
		t.Fatalf("process started at %v, now is %v", st, now)
	}
	if before["process_resident_memory_bytes"] < 1<<20 {
		t.Fatalf("resident memory %v", before["process_resident_memory_bytes"])
	}
	for range 5 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	for begin := time.Now(); time.Since(begin) < 50*time.Millisecond; {
		_ = strconv.Itoa(int(time.Since(begin))) // spend CPU
	}
	after := scrape(t, func(b *bytes.Buffer) { writeProcessMetrics(b) })
	if after["process_open_fds"] < before["process_open_fds"]+5 {
		t.Fatalf("open fds %v → %v after opening 5", before["process_open_fds"], after["process_open_fds"])
	}
	if after["process_cpu_seconds_total"] <= before["process_cpu_seconds_total"] {
		t.Fatalf("cpu %v → %v", before["process_cpu_seconds_total"], after["process_cpu_seconds_total"])
	}
}

// BenchmarkRuntimeAndProcessMetrics is what the runtime's and the
// process's figures add to a scrape of /metrics.
func BenchmarkRuntimeAndProcessMetrics(b *testing.B) {
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		writeRuntimeMetrics(&buf)
		writeProcessMetrics(&buf)
	}
}
