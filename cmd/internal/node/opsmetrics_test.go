package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/admin"
)

// scrapeMetrics reads a node's /metrics as the operator and returns its
// samples ("name" or "name{labels}" → value), failing the test on a line
// that is not a sample, a sample of a family without a TYPE line, or a
// family typed twice.
func scrapeMetrics(t *testing.T, th *testHost) map[string]float64 {
	t.Helper()
	resp := operatorDo(t, th.h.OperatorToken(), "GET", th.h.HTTPURL()+"/metrics", nil)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	out := map[string]float64{}
	typed := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			f := strings.Fields(rest)
			if _, dup := typed[f[0]]; dup {
				t.Fatalf("/metrics types %s twice", f[0])
			}
			typed[f[0]] = f[1]
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("/metrics: not a sample: %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics: not a sample: %q", line)
		}
		family, _, _ := strings.Cut(line[:i], "{")
		base := family
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(family, suffix); ok && typed[b] == "histogram" {
				base = b
			}
		}
		if _, ok := typed[base]; !ok {
			t.Fatalf("/metrics: %q has no TYPE line", line)
		}
		out[line[:i]] = v
	}
	return out
}

// TestQueueDepthMetrics: messages waiting on a queue nobody consumes show
// in cairn_queue_messages and cairn_queue_oldest_age_seconds, and in
// GET /$cairn/queues behind the operator token; once consumed the queue
// shows 0.
func TestQueueDepthMetrics(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	fr := th.h.Functions()
	begin := time.Now()
	for i := range 3 {
		if err := fr.Queues().Enqueue(ctx, "idle", []byte("m"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	var m map[string]float64
	eventually(t, 30*time.Second, "3 messages on idle in /metrics", func() bool {
		m = scrapeMetrics(t, th)
		return m[`cairn_queue_messages{queue="idle"}`] == 3
	})
	age := m[`cairn_queue_oldest_age_seconds{queue="idle"}`]
	if age <= 0 || age > time.Since(begin).Seconds()+0.01 {
		t.Fatalf("oldest age %v, enqueued %v ago", age, time.Since(begin))
	}
	if m["cairn_queue_depth_read_failed"] != 0 {
		t.Fatal("the depth read failed")
	}
	eventually(t, 30*time.Second, "the oldest message ages", func() bool {
		return scrapeMetrics(t, th)[`cairn_queue_oldest_age_seconds{queue="idle"}`] > age
	})

	// The operators' list: behind the token, deepest first.
	for i := range 4 {
		if err := fr.Queues().Enqueue(ctx, "deeper", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if code := httpDo(t, "", "GET", th.h.HTTPURL()+"/$cairn/queues"); code != http.StatusUnauthorized {
		t.Fatalf("queues without the token: %d", code)
	}
	if code := httpDo(t, th.h.OperatorToken()+"x", "GET", th.h.HTTPURL()+"/$cairn/queues"); code != http.StatusUnauthorized {
		t.Fatalf("queues with a wrong token: %d", code)
	}
	resp := operatorDo(t, th.h.OperatorToken(), "GET", th.h.HTTPURL()+"/$cairn/queues", nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var list []admin.QueueInfo
	if err := json.Unmarshal(body, &list); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("queues: %d %s (%v)", resp.StatusCode, body, err)
	}
	// The queues holding messages, deepest first, then the functions'
	// empty ones (here the built-ins archive's and values-sweep's).
	if len(list) != 4 || list[2].Name != "archive" || list[2].Function != "archive" || list[2].Depth != 0 ||
		list[3].Name != functions.ValueSweepQueue || list[3].Function != functions.ValueSweepName || list[3].Depth != 0 || list[0].Name != "deeper" || list[0].Depth != 4 || list[1].Name != "idle" || list[1].Depth != 3 ||
		list[1].Oldest.Before(begin.Add(-time.Second)) || list[1].OldestAgeSeconds <= 0 {
		t.Fatalf("queues: %s", body)
	}

	// A function drains idle: its series stays, at 0.
	if err := fr.Register(fast(functions.Manifest{Name: "drain", Trigger: functions.Trigger{Queue: "idle"}}),
		functions.NativeFunc(func(context.Context, *functions.Invocation) error { return nil })); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "idle drained in /metrics", func() bool {
		m = scrapeMetrics(t, th)
		v, ok := m[`cairn_queue_messages{queue="idle"}`]
		return ok && v == 0
	})
	if age := m[`cairn_queue_oldest_age_seconds{queue="idle"}`]; age != 0 {
		t.Fatalf("drained queue's age %v", age)
	}
}

// TestFunctionSeries: each function's runs by trigger, failures and
// durations show with its name.
func TestFunctionSeries(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	fr := th.h.Functions()
	if err := fr.Register(fast(functions.Manifest{Name: "counter", Trigger: functions.Trigger{Queue: "count"}}),
		functions.NativeFunc(func(context.Context, *functions.Invocation) error { return nil })); err != nil {
		t.Fatal(err)
	}
	if err := fr.Register(fast(functions.Manifest{Name: "refuser", Trigger: functions.Trigger{Queue: "refuse"}, MaxDequeueCount: 2}),
		functions.NativeFunc(func(context.Context, *functions.Invocation) error { return errors.New("no") })); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := fr.Queues().Enqueue(ctx, "count", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := th.nc.Request(functions.DirectSubject("cairn", "counter"), nil, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := fr.Queues().Enqueue(ctx, "refuse", []byte("x")); err != nil {
		t.Fatal(err)
	}
	var m map[string]float64
	eventually(t, 30*time.Second, "the functions' series", func() bool {
		m = scrapeMetrics(t, th)
		return m[`cairn_function_invocations_total{function="counter",trigger="queue"}`] == 2 &&
			m[`cairn_function_failures_total{function="refuser"}`] == 2
	})
	want := map[string]float64{
		`cairn_function_invocations_total{function="counter",trigger="invoke"}`: 1,
		`cairn_function_failures_total{function="counter"}`:                     0,
		`cairn_function_invocations_total{function="refuser",trigger="queue"}`:  2,
		`cairn_function_duration_seconds_count{function="counter"}`:             3,
		`cairn_function_duration_seconds_bucket{function="counter",le="+Inf"}`:  3,
		`cairn_function_duration_seconds_count{function="refuser"}`:             2,
	}
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %v (%v), want %v", k, got, ok, v)
		}
	}
	if s := m[`cairn_function_duration_seconds_sum{function="counter"}`]; s <= 0 || s > 30 {
		t.Errorf("counter's duration sum %v", s)
	}
	if m[`cairn_function_duration_seconds_bucket{function="counter",le="0.001"}`] > m[`cairn_function_duration_seconds_bucket{function="counter",le="30"}`] {
		t.Error("buckets not cumulative")
	}
	// The runtime's and the process's figures are there too.
	for _, k := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds", "process_cpu_seconds_total"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %s on /metrics", k)
		}
	}
}
