package node_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/commit"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/journal/values"
)

// signedValue sends a request on an entity's value with the development
// account's SharedKey.
func signedValue(t *testing.T, th *testHost, method, table, pk, rk, prop string, body []byte) (*http.Response, []byte) {
	t.Helper()
	return signedValueAt(t, th.h.HTTPURL(), method, table, pk, rk, prop, body)
}

// signedValueAt is signedValue on the HTTP API at base.
func signedValueAt(t *testing.T, base, method, table, pk, rk, prop string, body []byte) (*http.Response, []byte) {
	t.Helper()
	path := "/" + httpapi.DevAccountName + "/" + table + "(PartitionKey='" + pk + "',RowKey='" + rk + "')/$value"
	if prop != "" {
		path += "/" + prop
	}
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	req.Header.Set("x-ms-date", date)
	key, _ := base64.StdEncoding.DecodeString(httpapi.DevAccountKey)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strings.Join([]string{method, "", "", date, "/" + httpapi.DevAccountName + req.URL.EscapedPath()}, "\n")))
	req.Header.Set("Authorization", "SharedKey "+httpapi.DevAccountName+":"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// uploadValue puts a value for an entity and returns its reference.
func uploadValue(t *testing.T, th *testHost, table, pk, rk string, body []byte) string {
	t.Helper()
	resp, b := signedValue(t, th, http.MethodPut, table, pk, rk, "", body)
	var up struct{ Reference string }
	if err := json.Unmarshal(b, &up); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %s %s", resp.Status, b)
	}
	return up.Reference
}

func withRef(pk, rk, prop, ref string) *engine.Entity {
	return engine.NewEntity(pk, rk, engine.Property{Name: prop, Value: engine.String(ref)})
}

// valueStore opens the node's values' bucket as the node user.
func valueStore(t *testing.T, th *testHost) *values.Store {
	t.Helper()
	js, err := jetstream.New(th.nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := values.Open(ctxT(t), js, "cairn", 1)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stored reports whether the value ref of an entity is in the store.
func stored(t *testing.T, s *values.Store, table, pk, rk, ref string) bool {
	t.Helper()
	k := values.Key{Account: httpapi.DevAccountName, Table: table, PartitionKey: pk, RowKey: rk}
	_, err := s.Info(ctxT(t), k, strings.TrimPrefix(ref, engine.ValueRefPrefix))
	if errors.Is(err, values.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// TestValueClaimWindow: a reference is claimed only within the window of
// its upload, by any door (here NATS: the decision checks the window),
// and kept by a write past it when the entity held it.
func TestValueClaimWindow(t *testing.T) {
	const window = 2 * time.Second
	th := startNode(t, node.Config{Commit: commit.Config{ClaimWindow: window},
		Functions: node.FunctionsConfig{ValueSweepMargin: time.Hour}})
	ctx := ctxT(t)
	mustTable(t, th.c, "Staff")
	ref := uploadValue(t, th, "Staff", "Sales", "1", []byte("photo"))
	if _, err := th.c.Insert(ctx, "Staff", withRef("Sales", "1", "Photo", ref)); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimPrefix(ref, engine.ValueRefPrefix)
	at, _ := engine.ParseValueID(id)
	// A poll of the clock: the window has to pass.
	for time.Since(at) < window+100*time.Millisecond {
		time.Sleep(50 * time.Millisecond)
	}
	// Held in the same property: kept by a replace past the window.
	e := withRef("Sales", "1", "Photo", ref)
	e.Properties = append(e.Properties, engine.Property{Name: "Name", Value: engine.String("Ann")})
	if _, err := th.c.Replace(ctx, "Staff", e, "*"); err != nil {
		t.Fatalf("a replace keeping the reference past the window: %v", err)
	}
	// A new claim past the window: refused, by NATS and by HTTP.
	if _, err := th.c.Insert(ctx, "Staff", withRef("Sales", "2", "Photo", ref)); engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Fatalf("a claim past the window over NATS: %v", err)
	}
	if _, err := th.c.InsertOrMerge(ctx, "Staff", withRef("Sales", "1", "Other", ref)); engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Fatalf("the reference moved to another property past the window: %v", err)
	}
	if _, err := th.c.Delete(ctx, "Staff", "Sales", "1", "*"); err != nil {
		t.Fatal(err)
	}
	if _, err := th.c.Insert(ctx, "Staff", withRef("Sales", "1", "Photo", ref)); engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Fatalf("the reference taken up again after its entity was deleted: %v", err)
	}
	if exists(t, th.c, "Staff", "Sales", "1") || exists(t, th.c, "Staff", "Sales", "2") {
		t.Fatal("a refused claim stored an entity")
	}
	// Within the window, a malformed reference over NATS is refused by the
	// decision too.
	if _, err := th.c.Insert(ctx, "Staff", withRef("Sales", "3", "Photo", engine.ValueRefPrefix+"x")); engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Fatalf("a malformed reference over NATS: %v", err)
	}
}

// TestValueSweep: the sweep removes the values no entity holds once they
// are past the window and the margin (never referenced, replaced, their
// entity deleted, their table dropped) and keeps the ones held; a message
// naming a value already gone succeeds.
func TestValueSweep(t *testing.T) {
	th := startNode(t, node.Config{Commit: commit.Config{ClaimWindow: time.Second},
		Functions: node.FunctionsConfig{ValueSweepMargin: time.Second, ValueSweepEvery: time.Second}})
	ctx := ctxT(t)
	mustTable(t, th.c, "Staff", "Day1")
	store := valueStore(t, th)
	kept := uploadValue(t, th, "Staff", "Sales", "1", []byte("kept"))
	never := uploadValue(t, th, "Staff", "Sales", "1", []byte("never referenced"))
	replaced := uploadValue(t, th, "Staff", "Sales", "2", []byte("replaced"))
	deleted := uploadValue(t, th, "Staff", "Sales", "3", []byte("deleted"))
	dropped := uploadValue(t, th, "Day1", "Sales", "1", []byte("dropped"))
	for _, w := range []struct {
		table, rk, ref string
	}{{"Staff", "1", kept}, {"Staff", "2", replaced}, {"Staff", "3", deleted}, {"Day1", "1", dropped}} {
		if _, err := th.c.Insert(ctx, w.table, withRef("Sales", w.rk, "Photo", w.ref)); err != nil {
			t.Fatal(err)
		}
	}
	replacement := uploadValue(t, th, "Staff", "Sales", "2", []byte("replacement"))
	if _, err := th.c.Replace(ctx, "Staff", withRef("Sales", "2", "Photo", replacement), "*"); err != nil {
		t.Fatal(err)
	}
	if _, err := th.c.Delete(ctx, "Staff", "Sales", "3", "*"); err != nil {
		t.Fatal(err)
	}
	if err := th.c.DeleteTable(ctx, "Day1"); err != nil {
		t.Fatal(err)
	}
	gone := []struct{ table, rk, ref string }{{"Staff", "1", never}, {"Staff", "2", replaced}, {"Staff", "3", deleted}, {"Day1", "1", dropped}}
	defer func() {
		if t.Failed() {
			for _, f := range []string{functions.ValueScanName, functions.ValueSweepName} {
				lines, _ := th.h.Functions().FunctionLogs(f)
				i, fl, p := th.h.Functions().FunctionTotals(f)
				t.Logf("%s: %d runs, %d failures, %d poisoned; %+v", f, i, fl, p, lines)
			}
		}
	}()
	eventually(t, 30*time.Second, "the unreferenced values removed", func() bool {
		for _, g := range gone {
			if stored(t, store, g.table, "Sales", g.rk, g.ref) {
				return false
			}
		}
		return true
	})
	// The held values were as old: the same scans looked at them.
	if !stored(t, store, "Staff", "Sales", "1", kept) || !stored(t, store, "Staff", "Sales", "2", replacement) {
		t.Fatal("the sweep removed a value an entity holds")
	}
	resp, b := signedValue(t, th, http.MethodGet, "Staff", "Sales", "1", "Photo", nil)
	if resp.StatusCode != http.StatusOK || string(b) != "kept" {
		t.Fatalf("download of a kept value: %s %q", resp.Status, b)
	}
	// Idempotent: a message naming a value already gone succeeds.
	k := values.Key{Account: httpapi.DevAccountName, Table: "Staff", PartitionKey: "Sales", RowKey: "1"}
	msg, _ := json.Marshal(functions.SweepRequest{Object: k.Name(strings.TrimPrefix(never, engine.ValueRefPrefix))})
	if err := th.h.Functions().Queues().Enqueue(ctx, functions.ValueSweepQueue, msg); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the values-sweep queue drained", func() bool {
		ds, err := th.h.QueueAdmin().Depths(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Queue == functions.ValueSweepQueue && d.Messages > 0 {
				return false
			}
		}
		return true
	})
	if p, err := th.h.QueueAdmin().Poison(ctx, functions.ValueSweepQueue, 0, 10); err != nil || len(p) != 0 {
		t.Fatalf("poisoned sweeps: %+v, %v", p, err)
	}
	if !stored(t, store, "Staff", "Sales", "1", kept) {
		t.Fatal("the kept value is gone")
	}
}

// TestValueRefsCheckedOverNATS: a command sent over NATS has its
// references checked against the store before it is submitted, as over
// HTTP: one to nothing (never uploaded, or uploaded for another entity)
// is InvalidInput (with its index in a batch), nothing stored; one to a
// value of that entity is accepted.
func TestValueRefsCheckedOverNATS(t *testing.T) {
	th := startNode(t, node.Config{Functions: node.FunctionsConfig{ValueSweepMargin: time.Hour}})
	ctx := ctxT(t)
	mustTable(t, th.c, "Staff")
	ref := uploadValue(t, th, "Staff", "Sales", "1", []byte("photo"))
	nothing := engine.ValueRef(engine.NewValueID(time.Now(), [engine.ValueIDRandom]byte{1, 2, 3}))
	for _, w := range []struct {
		name string
		e    *engine.Entity
	}{
		{"never uploaded", withRef("Sales", "1", "Photo", nothing)},
		{"another entity's", withRef("Sales", "2", "Photo", ref)},
	} {
		_, err := th.c.Insert(ctx, "Staff", w.e)
		if engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), "names no value of the entity") {
			t.Fatalf("a reference to %s over NATS: %v", w.name, err)
		}
	}
	ops := []engine.Operation{
		{Op: engine.OpInsert, Entity: engine.NewEntity("Sales", "3")},
		{Op: engine.OpInsert, Entity: withRef("Sales", "1", "Photo", ref)},
		{Op: engine.OpInsert, Entity: withRef("Sales", "4", "Photo", ref)},
	}
	_, err := th.c.Batch(ctx, "Staff", ops)
	if e := engine.AsError(err); e.Code != engine.CodeInvalidInput || e.Index != 2 {
		t.Fatalf("a batch with another entity's reference: %v", err)
	}
	for _, rk := range []string{"1", "2", "3", "4"} {
		if exists(t, th.c, "Staff", "Sales", rk) {
			t.Fatalf("a refused write stored (Sales, %s)", rk)
		}
	}
	if _, err := th.c.Insert(ctx, "Staff", withRef("Sales", "1", "Photo", ref)); err != nil {
		t.Fatalf("a reference to the entity's value over NATS: %v", err)
	}
	resp, b := signedValue(t, th, http.MethodGet, "Staff", "Sales", "1", "Photo", nil)
	if resp.StatusCode != http.StatusOK || string(b) != "photo" {
		t.Fatalf("download: %s %q", resp.Status, b)
	}
}

// TestValueRefsCheckedInFunctions: a function's write goes through the
// same check as the doors', for every partition before the first is
// committed: an invocation writing a reference to nothing fails and
// stores nothing; one writing its entity's value commits.
func TestValueRefsCheckedInFunctions(t *testing.T) {
	th := startNode(t, node.Config{Functions: node.FunctionsConfig{ValueSweepMargin: time.Hour}})
	ctx := ctxT(t)
	mustTable(t, th.c, "Staff")
	ref := uploadValue(t, th, "Staff", "Sales", "1", []byte("photo"))
	nothing := engine.ValueRef(engine.NewValueID(time.Now(), [engine.ValueIDRandom]byte{4, 5, 6}))
	fn := func(name, queue string, writes ...*engine.Entity) {
		m := functions.Manifest{Name: name, Trigger: functions.Trigger{Queue: queue}}
		err := th.h.Functions().Register(m, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
			for _, e := range writes {
				if err := inv.Write(ctx, "Staff", engine.Operation{Op: engine.OpInsert, Entity: e}); err != nil {
					return err
				}
			}
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		if err := th.h.Functions().Queues().Enqueue(ctx, queue, []byte("go")); err != nil {
			t.Fatal(err)
		}
	}
	// The first partition's write is fine, the second's names nothing.
	fn("dangling", "dangling", engine.NewEntity("Other", "1"), withRef("Sales", "2", "Photo", nothing))
	eventually(t, 30*time.Second, "the dangling write failed", func() bool {
		_, failures, _ := th.h.Functions().FunctionTotals("dangling")
		return failures > 0
	})
	lines, _ := th.h.Functions().FunctionLogs("dangling")
	if exists(t, th.c, "Staff", "Other", "1") || exists(t, th.c, "Staff", "Sales", "2") {
		t.Fatalf("a refused invocation stored a write; log %+v", lines)
	}
	fn("good", "good", withRef("Sales", "1", "Photo", ref))
	eventually(t, 30*time.Second, "the good write committed", func() bool {
		return exists(t, th.c, "Staff", "Sales", "1")
	})
	if _, failures, _ := th.h.Functions().FunctionTotals("good"); failures != 0 {
		t.Fatalf("the good write failed %d times", failures)
	}
}

// TestValueSweepPlaced: on 3 hosts each holding a third of a table's
// shards, the sweep reads an entity where its partition's view is,
// whichever host runs the message: the values no entity holds are
// removed, the held ones kept, and no sweep fails.
func TestValueSweepPlaced(t *testing.T) {
	hosts := startPlacedWith(t, 3, node.Config{ViewReplicas: 1, Commit: commit.Config{ClaimWindow: 3 * time.Second},
		Functions: node.FunctionsConfig{ValueSweepMargin: time.Second, ValueSweepEvery: time.Second}})
	ctx := ctxT(t)
	mustTable(t, hosts[0].c, "Staff")
	placedViews(t, hosts, "Staff")
	store := valueStore(t, hosts[0])
	const n = 12 // partitions: each host holds some, and runs messages for the others'
	kept, never := make([]string, n), make([]string, n)
	for i := range n {
		pk, th := fmt.Sprintf("p%02d", i), hosts[i%3]
		kept[i] = uploadValue(t, th, "Staff", pk, "1", []byte("kept "+pk))
		never[i] = uploadValue(t, th, "Staff", pk, "1", []byte("never "+pk))
		if _, err := hosts[(i+1)%3].c.Insert(ctx, "Staff", withRef(pk, "1", "Photo", kept[i])); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		if t.Failed() {
			for i, th := range hosts {
				lines, _ := th.h.Functions().FunctionLogs(functions.ValueSweepName)
				r, fl, p := th.h.Functions().FunctionTotals(functions.ValueSweepName)
				t.Logf("host %d: %d runs, %d failures, %d poisoned; %+v", i, r, fl, p, lines)
			}
		}
	}()
	eventually(t, 60*time.Second, "the unreferenced values removed", func() bool {
		for i := range n {
			if stored(t, store, "Staff", fmt.Sprintf("p%02d", i), "1", never[i]) {
				return false
			}
		}
		return true
	})
	runs := 0
	for i, th := range hosts {
		r, failures, poisoned := th.h.Functions().FunctionTotals(functions.ValueSweepName)
		if failures != 0 || poisoned != 0 {
			t.Fatalf("host %d: %d sweeps failed, %d poisoned", i, failures, poisoned)
		}
		runs += int(r)
	}
	if runs < 2*n {
		t.Fatalf("%d sweeps ran, want at least %d", runs, 2*n)
	}
	for i := range n {
		pk := fmt.Sprintf("p%02d", i)
		if !stored(t, store, "Staff", pk, "1", kept[i]) {
			t.Fatalf("the sweep removed the value (%s, 1) holds", pk)
		}
		resp, b := signedValue(t, hosts[(i+2)%3], http.MethodGet, "Staff", pk, "1", "Photo", nil)
		if resp.StatusCode != http.StatusOK || string(b) != "kept "+pk {
			t.Fatalf("download of (%s, 1): %s %q", pk, resp.Status, b)
		}
	}
}
