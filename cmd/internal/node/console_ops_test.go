package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/admin"
	"github.com/cairn-dev/cairn/functions/queueadmin"
)

// TestOperatorConsoleEndpoints: the operators' endpoints the web console
// reads (queues with depths, peek, a function's history and rollback,
// the runner's counters) answer with the token only, peek without taking
// messages, and refuse bad input with a coded error that changes nothing.
func TestOperatorConsoleEndpoints(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	tok := th.h.OperatorToken()
	api := th.h.HTTPURL() + admin.Prefix
	fr := th.h.Functions()

	for _, path := range []string{"queues", "runner", "queues/q/peek", "functions/f/history"} {
		if st := httpDo(t, "", "GET", api+path); st != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", path, st)
		}
	}
	if st := httpDo(t, "", "POST", api+"functions/f/rollback"); st != http.StatusUnauthorized {
		t.Errorf("rollback without the token: %d, want 401", st)
	}

	// A queue no function reads: listed with its depth; a peek shows the
	// messages in order and leaves them there.
	for _, b := range []string{"first", "second"} {
		if err := fr.Queues().Enqueue(ctx, "parked", []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	var qs []admin.QueueInfo
	getJSON(t, tok, api+"queues", &qs)
	found := map[string]admin.QueueInfo{}
	for _, q := range qs {
		found[q.Name] = q
	}
	if p := found["parked"]; p.Depth != 2 || p.Poison || p.Function != "" {
		t.Fatalf("parked in the queue list: %+v (all: %+v)", p, qs)
	}
	if a := found["archive"]; a.Function != "archive" {
		t.Fatalf("the built-in archive function's queue: %+v", a)
	}
	for range 2 { // a peek takes nothing
		var ms []queueadmin.QueueMessage
		getJSON(t, tok, api+"queues/parked/peek?limit=10", &ms)
		if len(ms) != 2 || string(ms[0].Body) != "first" || string(ms[1].Body) != "second" || ms[0].Seq >= ms[1].Seq || ms[0].Time.IsZero() {
			t.Fatalf("peek: %+v", ms)
		}
	}
	var one []queueadmin.QueueMessage
	getJSON(t, tok, api+"queues/parked/peek?limit=1", &one)
	if len(one) != 1 {
		t.Fatalf("peek with limit 1: %d messages", len(one))
	}
	if n, _ := fr.Queues().Depth(ctx, "parked"); n != 2 {
		t.Fatalf("after the peeks parked holds %d, want 2", n)
	}
	coded := func(method, path string, want int) {
		t.Helper()
		resp := operatorDo(t, tok, method, api+path, nil)
		defer resp.Body.Close()
		var e struct{ Code, Error string }
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want || json.Unmarshal(b, &e) != nil || e.Code == "" || e.Error == "" {
			t.Errorf("%s %s: %d %s, want %d with a code", method, path, resp.StatusCode, b, want)
		}
	}
	coded("GET", "queues/bad.name/peek", http.StatusBadRequest)
	coded("GET", "queues/bad.name", http.StatusBadRequest)
	coded("GET", "queues/bad.name/7", http.StatusBadRequest)
	coded("POST", "queues/bad.name/7/requeue", http.StatusBadRequest)
	coded("DELETE", "queues/bad.name/7", http.StatusBadRequest)
	coded("POST", "queues/bad.name/purge", http.StatusBadRequest)
	coded("GET", "queues/parked/7", http.StatusNotFound)
	coded("GET", "functions/bad.name/history", http.StatusBadRequest)
	coded("POST", "functions/bad.name/rollback", http.StatusBadRequest)
	coded("GET", "functions/nothing/history", http.StatusNotFound)
	coded("POST", "functions/nothing/rollback?version=x", http.StatusBadRequest)
	coded("POST", "functions/nothing/rollback", http.StatusBadRequest)

	// Two versions of a function (modules that do not load: the node
	// reports why), its history, a rollback to the first.
	reg := fr.Registry()
	m := functions.Manifest{Name: "broken", Trigger: functions.Trigger{Queue: "broken"}}
	v1, err := reg.Deploy(ctx, m, []byte("not wasm, version one"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Deploy(ctx, m, []byte("not wasm, version two")); err != nil {
		t.Fatal(err)
	}
	var hist []functions.Manifest
	getJSON(t, tok, api+"functions/broken/history", &hist)
	if len(hist) != 2 || hist[0].Version != 1 || hist[1].Version != 2 || hist[0].Digest != v1.Digest {
		t.Fatalf("history: %+v", hist)
	}
	coded("POST", "functions/broken/rollback?version=9", http.StatusBadRequest)
	resp := operatorDo(t, tok, "POST", api+"functions/broken/rollback?version=1", nil)
	var back functions.Manifest
	if err := json.NewDecoder(resp.Body).Decode(&back); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("rollback: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if back.Version != 3 || back.Digest != v1.Digest {
		t.Fatalf("rolled back to %+v, want version 3 with version 1's module", back)
	}
	eventually(t, 30*time.Second, "the node reports that version 3 does not load", func() bool {
		var fns []struct {
			functions.Manifest
			LoadError string `json:"loadError"`
		}
		getJSON(t, tok, api+"functions", &fns)
		for _, f := range fns {
			if f.Name == "broken" && f.Version == 3 && f.LoadError != "" {
				return true
			}
		}
		return false
	})

	// Per function counters: a function that always fails, two attempts,
	// one message poisoned.
	fm := functions.Manifest{Name: "fails", Trigger: functions.Trigger{Queue: "fails"}, MaxDequeueCount: 2}
	if err := fr.Register(fast(fm), functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		return errors.New("no")
	})); err != nil {
		t.Fatal(err)
	}
	if err := fr.Queues().Enqueue(ctx, "fails", []byte("x")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "fails: 2 runs, 2 failures, 1 poisoned", func() bool {
		var fns []struct {
			Name                            string
			Invocations, Failures, Poisoned uint64
		}
		getJSON(t, tok, api+"functions", &fns)
		for _, f := range fns {
			if f.Name == "fails" {
				return f.Invocations == 2 && f.Failures == 2 && f.Poisoned == 1
			}
		}
		return false
	})

	var st admin.RunnerStats
	getJSON(t, tok, api+"runner", &st)
	if st.Loaded < 1 {
		t.Fatalf("runner counters: %+v (the archive built-in is loaded)", st)
	}
	if st.Since.IsZero() || st.Since.After(time.Now()) {
		t.Fatalf("runner counters: since %v, want when the node started", st.Since)
	}
}
