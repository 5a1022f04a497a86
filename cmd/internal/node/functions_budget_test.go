package node_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/admin"
	"github.com/cairn-dev/cairn/functions/queueadmin"
)

// TestBudgetRefusesAFunctionThatDoesNotFit: with a sandbox budget of
// 64 MiB, a function whose worst case is 128 MiB (32 MiB × 4 instances) is
// not loaded and the node says why; the same module at 32 MiB × 2 loads.
func TestBudgetRefusesAFunctionThatDoesNotFit(t *testing.T) {
	th := startNode(t, node.Config{Functions: node.FunctionsConfig{MemoryMB: 64}})
	ctx := ctxT(t)
	module := buildGuest(t, "testdata/guest", "")
	fr := th.h.Functions()
	m := functions.Manifest{Name: "roomy", Trigger: functions.Trigger{Queue: "roomy"}, MemoryMB: 32, Concurrency: 4}
	d, err := fr.Registry().Deploy(ctx, m, module)
	if err != nil {
		t.Fatal(err)
	}
	var failure functions.LoadFailure
	eventually(t, 60*time.Second, "the node reports roomy as not loaded", func() bool {
		var ok bool
		failure, ok = fr.LoadFailure("roomy")
		return ok
	})
	if failure.Version != d.Version || !strings.Contains(failure.Error, "does not fit in the node's function memory budget (64 MiB") {
		t.Fatalf("load failure %+v", failure)
	}
	t.Log(failure.Error)
	if _, ok := fr.Version("roomy"); ok {
		t.Error("the node runs roomy")
	}
	// The operators see it in the list of functions.
	req, err := http.NewRequestWithContext(ctx, "GET", th.h.HTTPURL()+admin.Prefix+"functions", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+th.h.OperatorToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var listed []struct {
		Name      string
		Version   int
		LoadError string
		Builtin   string
	}
	err = json.NewDecoder(resp.Body).Decode(&listed)
	resp.Body.Close()
	// The deployed function, then the node's built-ins (archive and the
	// large values' sweep).
	if err != nil || len(listed) != 4 || listed[0].Name != "roomy" || listed[0].LoadError != failure.Error || listed[1].Builtin != "archive" ||
		listed[2].Builtin != functions.ValueScanName || listed[3].Builtin != functions.ValueSweepName {
		t.Errorf("GET /$cairn/functions: %+v (%v), want roomy with its load error", listed, err)
	}
	m.Concurrency = 2
	deploy(t, th, m, module)
	if f, ok := fr.LoadFailure("roomy"); ok {
		t.Errorf("still reported as not loaded: %+v", f)
	}
}

// TestBacklogStopsAmplification: a function that enqueues two messages
// to its own queue for each message it gets would fill the stream; with a
// queueBacklog of 20 its Enqueue fails with QueueBacklogExceeded, the
// messages that hit it go to the poison queue with that error, and the
// queue stays bounded.
func TestBacklogStopsAmplification(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	fr := th.h.Functions()
	const backlog, concurrency = 20, 2
	m := fast(functions.Manifest{Name: "amplify", Trigger: functions.Trigger{Queue: "amp"}, QueueBacklog: backlog, Concurrency: concurrency, MaxDequeueCount: 2})
	if err := fr.Register(m, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		for range 2 {
			if err := inv.Enqueue(ctx, "amp", []byte("again")); err != nil {
				return err
			}
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := fr.Queues().Enqueue(ctx, "amp", []byte("start")); err != nil {
		t.Fatal(err)
	}
	var poisoned []queueadmin.PoisonMessage
	eventually(t, 30*time.Second, "a message poisoned by the backlog", func() bool {
		var err error
		poisoned, err = th.h.QueueAdmin().Poison(ctx, "amp", 0, 1)
		return err == nil && len(poisoned) == 1
	})
	if !strings.Contains(poisoned[0].Error, string(functions.CodeQueueBacklogExceeded)) {
		t.Errorf("poisoned with %q, want %s", poisoned[0].Error, functions.CodeQueueBacklogExceeded)
	}
	t.Log(poisoned[0].Error)
	// Invocations running at once each read the length before the others
	// publish: each may pass the backlog by its two messages.
	depth, err := fr.Queues().Depth(ctx, "amp")
	if err != nil {
		t.Fatal(err)
	}
	if depth > backlog+2*concurrency {
		t.Errorf("the queue holds %d messages, over its backlog of %d", depth, backlog)
	}
	if n := fr.Stats().BacklogRefused.Load(); n == 0 {
		t.Error("no refusal counted")
	}
	var metrics strings.Builder
	fr.WriteMetrics(&metrics)
	if !strings.Contains(metrics.String(), "cairn_function_backlog_refused_total ") {
		t.Errorf("metrics lack the refusals:\n%s", metrics.String())
	}
}

// TestRateLimitThrottlesEnqueues: a function allowed one message per
// second that enqueues two waits for the second token instead of failing;
// both messages arrive and the invocation is counted as throttled.
func TestRateLimitThrottlesEnqueues(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	fr := th.h.Functions()
	m := fast(functions.Manifest{Name: "chatty", Trigger: functions.Trigger{Queue: "chat"}, EnqueueRate: 1, MaxDequeueCount: 1})
	if err := fr.Register(m, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		for range 2 {
			if err := inv.Enqueue(ctx, "chat-out", []byte("hello")); err != nil {
				return err
			}
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := fr.Queues().Enqueue(ctx, "chat", []byte("go")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "two messages on chat-out", func() bool {
		n, err := fr.Queues().Depth(ctx, "chat-out")
		return err == nil && n == 2
	})
	if n := fr.Stats().Throttled.Load(); n != 1 {
		t.Errorf("%d invocations counted as throttled, want 1", n)
	}
	if n := fr.Stats().Failures.Load(); n != 0 {
		t.Errorf("%d failures", n)
	}
	var metrics strings.Builder
	fr.WriteMetrics(&metrics)
	if !strings.Contains(metrics.String(), "cairn_function_throttled_total 1\n") {
		t.Errorf("metrics lack the throttled invocation:\n%s", metrics.String())
	}
}
