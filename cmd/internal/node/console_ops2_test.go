package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/admin"
	"github.com/cairn-dev/cairn/functions/queueadmin"
)

// TestOperatorQueueAndFunctionActions: the operators' endpoints behind
// the console's purge, bulk poison requeue and delete, test invoke and
// function logs answer with the token only, do what they say, and refuse
// bad input with a coded error that changes nothing.
func TestOperatorQueueAndFunctionActions(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	tok := th.h.OperatorToken()
	api := th.h.HTTPURL() + admin.Prefix
	fr := th.h.Functions()
	q := fr.Queues()

	for _, c := range []struct{ method, path string }{
		{"POST", "queues/parked/purge"}, {"POST", "queues/flaky-poison/requeue?all=true"}, {"POST", "queues/flaky-poison/delete?all=true"},
		{"POST", "functions/echo/invoke"}, {"GET", "functions/echo/logs"},
	} {
		if st := httpDo(t, "", c.method, api+c.path); st != http.StatusUnauthorized {
			t.Errorf("%s %s without the token: %d, want 401", c.method, c.path, st)
		}
	}
	call := func(method, path string, body []byte, want int, v any) {
		t.Helper()
		resp := operatorDo(t, tok, method, api+path, bytes.NewReader(body))
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
		}
		if want >= 400 {
			var e struct{ Code, Error string }
			if json.Unmarshal(b, &e) != nil || e.Code == "" || e.Error == "" {
				t.Fatalf("%s %s: %s, want a coded error", method, path, b)
			}
			return
		}
		if v != nil {
			if err := json.Unmarshal(b, v); err != nil {
				t.Fatalf("%s %s: %s: %v", method, path, b, err)
			}
		}
	}
	depth := func(queue string) uint64 {
		t.Helper()
		n, err := q.Depth(ctx, queue)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Purge: a bad name purges nothing; a good one removes the queue's
	// messages, no other queue's, and says how many.
	for _, b := range []string{"a", "b", "c"} {
		if err := q.Enqueue(ctx, "parked", []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Enqueue(ctx, "kept", []byte("k")); err != nil {
		t.Fatal(err)
	}
	call("POST", "queues/Bad.Name/purge", nil, http.StatusBadRequest, nil)
	if depth("parked") != 3 {
		t.Fatal("a refused purge removed messages")
	}
	var purged struct{ Purged uint64 }
	call("POST", "queues/parked/purge", nil, http.StatusOK, &purged)
	if purged.Purged != 3 || depth("parked") != 0 || depth("kept") != 1 {
		t.Fatalf("purge: %+v, parked %d, kept %d", purged, depth("parked"), depth("kept"))
	}
	call("POST", "queues/parked/purge", nil, http.StatusOK, &purged)
	if purged.Purged != 0 {
		t.Fatalf("purging an empty queue: %+v", purged)
	}

	// A function's queue purged while it holds a message: the consumer
	// goes on with the messages sent after.
	release := make(chan struct{})
	var started atomic.Int32
	var slowDone sync.Map
	if err := fr.Register(functions.Manifest{Name: "slow", Trigger: functions.Trigger{Queue: "slow"}}, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		started.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		slowDone.Store(string(inv.Trigger().Body), true)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"s1", "s2", "s3"} {
		if err := q.Enqueue(ctx, "slow", []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "slow holds a message", func() bool { return started.Load() > 0 })
	call("POST", "queues/slow/purge", nil, http.StatusOK, &purged)
	if purged.Purged != 3 || depth("slow") != 0 {
		t.Fatalf("purge of a queue being consumed: %+v, %d left", purged, depth("slow"))
	}
	close(release)
	if err := q.Enqueue(ctx, "slow", []byte("after")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the message sent after the purge handled", func() bool { _, ok := slowDone.Load("after"); return ok })

	// Poison messages: a function that fails on its first attempt with
	// the body in its error, until it is healed.
	var healed atomic.Bool
	var mu sync.Mutex
	var done []string
	fm := fast(functions.Manifest{Name: "flaky", Trigger: functions.Trigger{Queue: "flaky"}, MaxDequeueCount: 1})
	if err := fr.Register(fm, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		body := string(inv.Trigger().Body)
		if !healed.Load() {
			return errors.New("cannot handle " + body)
		}
		mu.Lock()
		done = append(done, body)
		mu.Unlock()
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"red-1", "red-2", "blue-1", "red-3", "blue-2"} {
		if err := q.Enqueue(ctx, "flaky", []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "5 poison messages", func() bool { return depth("flaky-poison") == 5 })
	for _, bad := range []string{
		"queues/flaky-poison/delete",                          // no filter
		"queues/flaky-poison/delete?poisonedBefore=yesterday", // not a time
		"queues/flaky-poison/requeue?enqueuedBefore=2026-13-01T00:00:00Z",
		"queues/flaky/delete?all=true",           // not a poison queue
		"queues/Bad.Name-poison/delete?all=true", // not a name
	} {
		call("POST", bad, nil, http.StatusBadRequest, nil)
	}
	var res queueadmin.BulkResult
	call("POST", "queues/flaky-poison/delete?poisonedBefore=2000-01-01T00:00:00Z", nil, http.StatusOK, &res)
	if res.Affected != 0 || depth("flaky-poison") != 5 {
		t.Fatalf("a filter that matches none: %+v, %d left", res, depth("flaky-poison"))
	}
	if depth("flaky-poison") != 5 {
		t.Fatal("refused bulk actions changed the poison queue")
	}
	call("POST", "queues/flaky-poison/delete?error=cannot+handle+blue", nil, http.StatusOK, &res)
	if res.Affected != 2 || res.More || depth("flaky-poison") != 3 {
		t.Fatalf("delete the blue ones: %+v, %d left", res, depth("flaky-poison"))
	}
	healed.Store(true)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	call("POST", "queues/flaky-poison/requeue?error=red&enqueuedBefore="+future, nil, http.StatusOK, &res)
	if res.Affected != 3 || res.More || depth("flaky-poison") != 0 {
		t.Fatalf("requeue the red ones: %+v, %d left", res, depth("flaky-poison"))
	}
	eventually(t, 30*time.Second, "the requeued messages are handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(done) == 3 && !strings.Contains(strings.Join(done, ","), "blue")
	})

	// Test invoke: the body goes to the function's direct subject; its
	// reply, or its error, comes back; the function's log lines are kept.
	var runs atomic.Int32
	em := functions.Manifest{Name: "echo", Trigger: functions.Trigger{Queue: "echo"}}
	if err := fr.Register(em, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		runs.Add(1)
		body := string(inv.Trigger().Body)
		inv.Log("got " + body)
		if body == "fail" {
			return errors.New("asked to fail")
		}
		return inv.SetOutput([]byte("echo: " + body))
	})); err != nil {
		t.Fatal(err)
	}
	var ir admin.InvokeResult
	call("POST", "functions/echo/invoke", []byte("hello"), http.StatusOK, &ir)
	if string(ir.Output) != "echo: hello" || ir.Error != "" {
		t.Fatalf("invoke: %+v", ir)
	}
	call("POST", "functions/echo/invoke", []byte("fail"), http.StatusOK, &ir)
	if !strings.Contains(ir.Error, "asked to fail") {
		t.Fatalf("a failing invocation: %+v", ir)
	}
	before := runs.Load()
	call("POST", "functions/nothing/invoke", []byte("x"), http.StatusNotFound, nil)
	call("POST", "functions/Bad.Name/invoke", []byte("x"), http.StatusBadRequest, nil)
	call("POST", "functions/echo/invoke", bytes.Repeat([]byte("x"), functions.MaxMessage+1), http.StatusBadRequest, nil)
	if runs.Load() != before {
		t.Fatal("a refused invoke ran the function")
	}

	// A function that gives no reply within its timeout + 5 s: a coded
	// 504, not a hung request.
	hang := make(chan struct{})
	defer close(hang)
	hm := functions.Manifest{Name: "hangs", Trigger: functions.Trigger{Queue: "hangs"}, Timeout: functions.Duration(10 * time.Millisecond)}
	if err := fr.Register(hm, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		<-hang // ignores its context: the runner waits for it
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	call("POST", "functions/hangs/invoke", []byte("x"), http.StatusGatewayTimeout, nil)
	if d := time.Since(start); d < 5*time.Second || d > 20*time.Second {
		t.Fatalf("the invoke of a hung function answered after %v, want its timeout + 5 s", d)
	}

	var logs []functions.LogLine
	call("GET", "functions/echo/logs", nil, http.StatusOK, &logs)
	if len(logs) != 2 || logs[0].Line != "got hello" || logs[1].Line != "got fail" || logs[0].Time.IsZero() || logs[0].Trigger == "" {
		t.Fatalf("logs: %+v", logs)
	}
	call("GET", "functions/nothing/logs", nil, http.StatusNotFound, nil)
	// A deployed function this node did not load has no lines yet.
	if _, err := fr.Registry().Deploy(ctx, functions.Manifest{Name: "unloadable", Trigger: functions.Trigger{Queue: "unloadable"}}, []byte("not wasm")); err != nil {
		t.Fatal(err)
	}
	var none []functions.LogLine
	call("GET", "functions/unloadable/logs", nil, http.StatusOK, &none)
	if none == nil || len(none) != 0 {
		t.Fatalf("logs of a function that did not load: %+v", none)
	}
	call("GET", "functions/Bad.Name/logs", nil, http.StatusBadRequest, nil)
	// Only the latest lines are kept.
	for i := range functions.LogLinesKept + 5 {
		call("POST", "functions/echo/invoke", []byte{byte('a' + i%26)}, http.StatusOK, &ir)
	}
	call("GET", "functions/echo/logs", nil, http.StatusOK, &logs)
	if len(logs) != functions.LogLinesKept || logs[len(logs)-1].Line != "got "+string(rune('a'+(functions.LogLinesKept+4)%26)) {
		t.Fatalf("after %d more lines: %d kept, last %+v", functions.LogLinesKept+5, len(logs), logs[len(logs)-1])
	}
}
