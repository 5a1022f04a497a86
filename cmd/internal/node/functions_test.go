package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/admin"
	"github.com/cairn-dev/cairn/functions/queueadmin"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/journal/jstest"
)

// TestArchiveBuiltin: an archive message moves an employee from Current to
// Archive; a second message for the same employee finds nothing to do.
func TestArchiveBuiltin(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	mustTable(t, th.c, "Current", "Archive")
	if _, err := th.c.Insert(ctx, "Current", namedEmployee("Sales", "456", "Jones")); err != nil {
		t.Fatal(err)
	}
	q := th.h.Functions().Queues()
	for range 2 {
		if err := q.Enqueue(ctx, "archive", archiveMsg("Sales", "456")); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "employee 456 archived", func() bool {
		return exists(t, th.c, "Archive", "Sales", "456") && !exists(t, th.c, "Current", "Sales", "456")
	})
	eventually(t, 20*time.Second, "the archive queue drained", func() bool {
		n, err := q.Depth(ctx, "archive")
		return err == nil && n == 0
	})
	e, _, err := th.c.Retrieve(ctx, "Archive", "Sales", "456")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := e.Get("Name"); v != engine.String("Jones") {
		t.Fatalf("archived entity: %+v", e)
	}
}

// TestPoisonAndRequeue: a failing function sees dequeue counts 1..5 with a
// back-off between attempts; then the message is in the poison queue with
// its error; requeued, it runs again from dequeue count 1.
func TestPoisonAndRequeue(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	type attempt struct {
		n  int
		at time.Time
		id string
	}
	var mu sync.Mutex
	var attempts []attempt
	m := fast(functions.Manifest{Name: "always-fails", Trigger: functions.Trigger{Queue: "work"}})
	fr := th.h.Functions()
	if err := fr.Register(m, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		mu.Lock()
		attempts = append(attempts, attempt{inv.Trigger().DequeueCount, time.Now(), inv.Trigger().ID})
		mu.Unlock()
		return errors.New("no good: " + string(inv.Trigger().Body))
	})); err != nil {
		t.Fatal(err)
	}
	if err := fr.Queues().Enqueue(ctx, "work", []byte("order 7")); err != nil {
		t.Fatal(err)
	}
	var poisoned []queueadmin.PoisonMessage
	eventually(t, 30*time.Second, "the message in work-poison", func() bool {
		var err error
		poisoned, err = th.h.QueueAdmin().Poison(ctx, "work", 0, 10)
		return err == nil && len(poisoned) == 1
	})
	mu.Lock()
	got := append([]attempt(nil), attempts...)
	mu.Unlock()
	if len(got) != 5 {
		t.Fatalf("%d attempts, want 5: %+v", len(got), got)
	}
	m.Defaults()
	for i, a := range got {
		if a.n != i+1 {
			t.Errorf("attempt %d saw dequeue count %d", i+1, a.n)
		}
		if a.id != got[0].id {
			t.Errorf("attempt %d has trigger id %q, the first %q", i+1, a.id, got[0].id)
		}
		if i > 0 {
			if gap, min := a.at.Sub(got[i-1].at), m.Backoff(i); gap < min {
				t.Errorf("attempt %d came %v after the one before; the back-off is %v", i+1, gap, min)
			}
		}
	}
	p := poisoned[0]
	if p.Queue != "work" || p.Function != "always-fails" || p.Attempts != 5 || string(p.Body) != "order 7" || !strings.Contains(p.Error, "no good: order 7") || p.Enqueued.IsZero() || p.Poisoned.Before(p.Enqueued) {
		t.Fatalf("poison message: %+v", p)
	}
	// The move publishes to work-poison first and then terminates the
	// delivery (so a crash between the two keeps the message); the
	// termination is an acknowledgement the server applies after the
	// poison message is listed.
	eventually(t, 10*time.Second, "work emptied by the termination", func() bool {
		n, err := fr.Queues().Depth(ctx, "work")
		return err == nil && n == 0
	})
	// Inspect over HTTP, then requeue there.
	poisonURL := th.h.HTTPURL() + admin.Prefix + "queues/work-poison"
	var listed []queueadmin.PoisonMessage
	tok := th.h.OperatorToken()
	getJSON(t, tok, poisonURL, &listed)
	if len(listed) != 1 || listed[0].Seq != p.Seq || string(listed[0].Body) != "order 7" || listed[0].Attempts != 5 {
		t.Fatalf("GET %s: %+v", poisonURL, listed)
	}
	var one queueadmin.PoisonMessage
	getJSON(t, tok, fmt.Sprintf("%s/%d", poisonURL, p.Seq), &one)
	if one.Error != p.Error {
		t.Fatalf("one poison message over HTTP: %+v", one)
	}
	if code := httpDo(t, tok, "GET", fmt.Sprintf("%s/%d", poisonURL, p.Seq+1000)); code != http.StatusNotFound {
		t.Fatalf("unknown poison message: %d", code)
	}
	if code := httpDo(t, tok, "POST", fmt.Sprintf("%s/%d/requeue", poisonURL, p.Seq)); code != http.StatusNoContent {
		t.Fatalf("requeue over HTTP: %d", code)
	}
	eventually(t, 30*time.Second, "the requeued message poisoned again", func() bool {
		ps, err := th.h.QueueAdmin().Poison(ctx, "work", 0, 10)
		return err == nil && len(ps) == 1 && ps[0].Seq != p.Seq
	})
	resp := operatorDo(t, tok, "GET", th.h.HTTPURL()+"/metrics", nil)
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), "\ncairn_function_poisoned_total 2\n") || !strings.Contains(string(metrics), "\ncairn_function_failures_total{function=\"always-fails\"} 10\n") ||
		!strings.Contains(string(metrics), "\ncairn_function_invocations_total{function=\"always-fails\",trigger=\"queue\"} 10\n") {
		t.Errorf("/metrics:\n%s", metrics)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 10 || attempts[5].n != 1 || attempts[5].id == got[0].id {
		t.Fatalf("after requeue: %+v", attempts[5:])
	}
	if _, err := th.h.QueueAdmin().PoisonMessage(ctx, "work", p.Seq); !errors.Is(err, queueadmin.ErrNoMessage) {
		t.Fatalf("the requeued poison message is still there: %v", err)
	}
}

// operatorDo sends a request to the operators' API with the operator token
// (none when token is empty).
func operatorDo(t *testing.T, token, method, url string, body io.Reader) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func getJSON(t *testing.T, token, url string, v any) {
	t.Helper()
	resp := operatorDo(t, token, "GET", url, nil)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func httpDo(t *testing.T, token, method, url string) int {
	t.Helper()
	resp := operatorDo(t, token, method, url, nil)
	resp.Body.Close()
	return resp.StatusCode
}

// TestPoisonCrashAndHang: a function that panics, or hangs past its
// timeout, on every attempt ends in the poison queue, and the host keeps
// serving meanwhile.
func TestPoisonCrashAndHang(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	fr := th.h.Functions()
	panics := fast(functions.Manifest{Name: "panics", Trigger: functions.Trigger{Queue: "crash"}, MaxDequeueCount: 3})
	hangs := fast(functions.Manifest{Name: "hangs", Trigger: functions.Trigger{Queue: "hang"}, MaxDequeueCount: 3, Timeout: functions.Duration(100 * time.Millisecond)})
	if err := fr.Register(panics, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		var m map[string]int
		m["boom"]++ // nil map: panics
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := fr.Register(hangs, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		<-ctx.Done()
		return ctx.Err()
	})); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"crash", "hang"} {
		if err := fr.Queues().Enqueue(ctx, q, []byte(q)); err != nil {
			t.Fatal(err)
		}
	}
	mustTable(t, th.c, "Alive")
	for _, q := range []string{"crash", "hang"} {
		eventually(t, 30*time.Second, q+"-poison holds the message", func() bool {
			// The host answers commands all along.
			if _, err := th.c.InsertOrReplace(ctx, "Alive", engine.NewEntity("p", q)); err != nil {
				t.Fatal(err)
			}
			ps, err := th.h.QueueAdmin().Poison(ctx, q, 0, 10)
			return err == nil && len(ps) == 1
		})
		ps, _ := th.h.QueueAdmin().Poison(ctx, q, 0, 10)
		if ps[0].Attempts != 3 {
			t.Errorf("%s: %d attempts", q, ps[0].Attempts)
		}
		want := map[string]string{"crash": "panic", "hang": "deadline"}[q]
		if !strings.Contains(ps[0].Error, want) {
			t.Errorf("%s: error %q does not mention %q", q, ps[0].Error, want)
		}
	}
}

// TestReadsSeeOwnWritesAndCommitAfterSuccess: inside an invocation, reads
// see its pending writes; a failing invocation commits nothing; writes to
// one partition commit together.
func TestReadsSeeOwnWritesAndCommitAfterSuccess(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	mustTable(t, th.c, "Things")
	if _, err := th.c.Insert(ctx, "Things", engine.NewEntity("p", "a")); err != nil {
		t.Fatal(err)
	}
	fr := th.h.Functions()
	// The function runs in a goroutine of the runner, and the reply that
	// the test waits for travels over NATS, which the race detector does
	// not see as ordering: mu guards what both sides touch.
	var (
		mu   sync.Mutex
		seen []string
		fail = true
	)
	if err := fr.Register(functions.Manifest{Name: "writer"}, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		for _, rk := range []string{"b", "c"} {
			if err := inv.Write(ctx, "Things", engine.Operation{Op: engine.OpInsert, Entity: engine.NewEntity("p", rk)}); err != nil {
				return err
			}
		}
		if err := inv.Write(ctx, "Things", engine.Operation{Op: engine.OpDelete, Entity: engine.NewEntity("p", "a")}); err != nil {
			return err
		}
		// A second write of one entity, and an insert of an existing one, are refused.
		if err := inv.Write(ctx, "Things", engine.Operation{Op: engine.OpInsertOrReplace, Entity: engine.NewEntity("p", "b")}); engine.ErrorCode(err) != engine.CodeInvalidDuplicateRow {
			return fmt.Errorf("second write of b: %v", err)
		}
		es, err := inv.Query(ctx, "Things", "p", "", 0)
		if err != nil {
			return err
		}
		mu.Lock()
		seen = seen[:0]
		for _, e := range es {
			seen = append(seen, e.RowKey)
		}
		failing := fail
		mu.Unlock()
		if e, _, _ := inv.Get(ctx, "Things", "p", "a"); e != nil {
			return errors.New("a is still visible after its delete")
		}
		if failing {
			return errors.New("failing on purpose")
		}
		return inv.SetOutput([]byte("done"))
	})); err != nil {
		t.Fatal(err)
	}
	invoke := func() (*nats.Msg, error) {
		return th.nc.Request(functions.DirectSubject("cairn", "writer"), nil, 10*time.Second)
	}
	r, err := invoke()
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Header.Get(functions.HeaderReplyError); !strings.Contains(got, "failing on purpose") {
		t.Fatalf("reply error %q", got)
	}
	mu.Lock()
	saw := strings.Join(seen, ",")
	mu.Unlock()
	if saw != "b,c" {
		t.Fatalf("the invocation saw %v, want its own writes b,c", saw)
	}
	if exists(t, th.c, "Things", "p", "b") || !exists(t, th.c, "Things", "p", "a") {
		t.Fatal("a failed invocation changed the table")
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	if r, err = invoke(); err != nil || string(r.Data) != "done" || r.Header.Get(functions.HeaderReplyError) != "" {
		t.Fatalf("reply %v %q %q", err, r.Data, r.Header.Get(functions.HeaderReplyError))
	}
	if !exists(t, th.c, "Things", "p", "b") || !exists(t, th.c, "Things", "p", "c") || exists(t, th.c, "Things", "p", "a") {
		t.Fatal("the invocation's writes are not all committed")
	}
	// One record for the three writes: all or nothing.
	tb, _ := th.h.Views().Table("Things")
	if got := tb.Snapshot().Partition("p").Records; got != 2 {
		t.Fatalf("partition p has %d records, want 2 (the insert of a, then one for the invocation)", got)
	}
	// Unknown functions are answered with an error.
	r, err = th.nc.Request(functions.DirectSubject("cairn", "nobody"), nil, 10*time.Second)
	if err != nil || !strings.Contains(r.Header.Get(functions.HeaderReplyError), "not deployed") {
		t.Fatalf("unknown function: %v %v", err, r)
	}
}

// TestRefusedWriteAloneCommitsNothing: a partition whose only write was
// refused (an insert of an existing entity, which the function handles)
// adds no command, so the invocation succeeds with its other writes, and
// with none at all.
func TestRefusedWriteAloneCommitsNothing(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	mustTable(t, th.c, "Things")
	if _, err := th.c.Insert(ctx, "Things", engine.NewEntity("q", "a")); err != nil {
		t.Fatal(err)
	}
	fr := th.h.Functions()
	if err := fr.Register(functions.Manifest{Name: "refused"}, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		if err := inv.Write(ctx, "Things", engine.Operation{Op: engine.OpInsert, Entity: engine.NewEntity("q", "a")}); engine.ErrorCode(err) != engine.CodeEntityAlreadyExists {
			return fmt.Errorf("insert of an existing entity: %v", err)
		}
		if rk := string(inv.Trigger().Body); rk != "" {
			if err := inv.Write(ctx, "Things", engine.Operation{Op: engine.OpInsert, Entity: engine.NewEntity("p", rk)}); err != nil {
				return err
			}
		}
		return inv.SetOutput([]byte("handled"))
	})); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"", "b"} {
		r, err := th.nc.Request(functions.DirectSubject("cairn", "refused"), []byte(body), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Data) != "handled" || r.Header.Get(functions.HeaderReplyError) != "" {
			t.Fatalf("body %q: reply %q, error %q", body, r.Data, r.Header.Get(functions.HeaderReplyError))
		}
	}
	if !exists(t, th.c, "Things", "p", "b") {
		t.Fatal("the write beside the refused one was not committed")
	}
}

// TestTwoHostsShareQueue: two hosts on one NATS server share a queue's
// messages; every message is processed, none twice.
func TestTwoHostsShareQueue(t *testing.T) {
	a := startHost(t, "")
	b := startHostOn(t, a)
	ctx := ctxT(t)
	mustTable(t, a.c, "Done")
	var mu sync.Mutex
	runs := map[string]int{}
	byHost := map[string]int{}
	m := functions.Manifest{Name: "shared", Trigger: functions.Trigger{Queue: "jobs"}, Concurrency: 8}
	for i, th := range []*testHost{a, b} {
		hostName := fmt.Sprint("host", i)
		if err := th.h.Functions().Register(m, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
			mu.Lock()
			runs[string(inv.Trigger().Body)]++
			byHost[hostName]++
			mu.Unlock()
			time.Sleep(time.Millisecond) // let the other host take some
			return inv.Write(ctx, "Done", engine.Operation{Op: engine.OpInsert, Entity: engine.NewEntity("jobs", string(inv.Trigger().Body))})
		})); err != nil {
			t.Fatal(err)
		}
	}
	const n = 400
	for i := range n {
		if err := a.h.Functions().Queues().Enqueue(ctx, "jobs", fmt.Appendf(nil, "%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	tb, _ := a.h.Views().Table("Done")
	eventually(t, 60*time.Second, "every job done", func() bool { return tb.Snapshot().Len() == n })
	mu.Lock()
	defer mu.Unlock()
	for k, c := range runs {
		if c != 1 {
			t.Errorf("job %s ran %d times", k, c)
		}
	}
	if len(runs) != n || byHost["host0"] == 0 || byHost["host1"] == 0 {
		t.Fatalf("%d jobs ran; per host %v", len(runs), byHost)
	}
	t.Logf("jobs per host: %v", byHost)
}

// TestChangeFeedAndTimer: a function on a table's changes sees every
// committed change in order; a timer function ticks.
func TestChangeFeedAndTimer(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	mustTable(t, th.c, "Orders", "Audit")
	fr := th.h.Functions()
	if err := fr.Register(functions.Manifest{Name: "audit", Trigger: functions.Trigger{Table: "Orders"}}, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		ch := inv.Trigger().Change
		kind := "put"
		if ch.Deleted {
			kind = "delete"
		}
		rk := fmt.Sprintf("%020d-%d", ch.Seq, ch.Index)
		return inv.Write(ctx, "Audit", engine.Operation{Op: engine.OpInsert, Entity: engine.NewEntity(ch.Entity.PartitionKey, rk,
			engine.Property{Name: "Kind", Value: engine.String(kind)}, engine.Property{Name: "Row", Value: engine.String(ch.Entity.RowKey)})})
	})); err != nil {
		t.Fatal(err)
	}
	var ticks sync.Map
	if err := fr.Register(functions.Manifest{Name: "ticker", Trigger: functions.Trigger{Every: functions.Duration(time.Second)}}, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		ticks.Store(inv.Trigger().ID, inv.Trigger().Kind)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := th.c.Insert(ctx, "Orders", engine.NewEntity("o", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := th.c.Delete(ctx, "Orders", "o", "2", "*"); err != nil {
		t.Fatal(err)
	}
	audit, _ := th.h.Views().Table("Audit")
	eventually(t, 30*time.Second, "six changes audited", func() bool { return audit.Snapshot().Len() == 6 })
	var rows []string
	audit.Snapshot().Scan(func(e *engine.Entity) bool {
		k, _ := e.Get("Kind")
		r, _ := e.Get("Row")
		rows = append(rows, k.Str()+":"+r.Str())
		return true
	})
	if got := strings.Join(rows, " "); got != "put:0 put:1 put:2 put:3 put:4 delete:2" {
		t.Fatalf("audit %s", got)
	}
	if err := fr.Register(functions.Manifest{Name: "cron-ticker", Trigger: functions.Trigger{Cron: "@every 1s"}}, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		ticks.Store("cron:"+inv.Trigger().ID, inv.Trigger().Kind)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "two ticks of each timer", func() bool {
		every, cron := 0, 0
		ticks.Range(func(k, v any) bool {
			if v != "timer" {
				t.Errorf("tick %v has kind %v", k, v)
			}
			if strings.HasPrefix(k.(string), "cron:") {
				cron++
			} else {
				every++
			}
			return true
		})
		return every >= 2 && cron >= 2
	})
}

// TestArchiveSurvivesSIGKILL: the host is killed (SIGKILL) between the
// archive's copy and its delete. After a restart the message is delivered
// again: the employee ends in Archive exactly once and not in Current, and
// no write was applied twice.
func TestArchiveSurvivesSIGKILL(t *testing.T) {
	dir := t.TempDir()
	listen := nodetest.FreeAddr(t)
	child := nodetest.StartChild(t, nodetest.ChildConfig{DataDir: dir, NATSListen: listen, Failpoint: "functions.between-commits:archive"})
	nc, err := nats.Connect("nats://" + listen)
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(nc)
	ctx := ctxT(t)
	mustTable(t, c, "Current", "Archive")
	if _, err := c.Insert(ctx, "Current", namedEmployee("Sales", "456", "Jones")); err != nil {
		t.Fatal(err)
	}
	archiveUntilKilled(t, ctx, nc, child, "Sales", "456")

	// Restart without the archive function first: whether the message comes
	// back at once or after its ack wait depends on whether its delivery
	// reached the consumer's state on disk before the kill, so the state the
	// crash left is read while nothing can take the message.
	still := nodetest.StartChild(t, nodetest.ChildConfig{DataDir: dir, NATSListen: listen, NoBuiltins: true})
	nc, err = nats.Connect("nats://" + listen)
	if err != nil {
		t.Fatal(err)
	}
	c = client.New(nc)
	if !exists(t, c, "Archive", "Sales", "456") || !exists(t, c, "Current", "Sales", "456") {
		t.Fatal("after the crash the copy should be committed and the delete not")
	}
	nc.Close()
	if err := still.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := still.Wait(); err != nil {
		t.Fatalf("the node did not stop cleanly: %v\n%s", err, still.Log())
	}

	// Restart with the archive function: the message is delivered again.
	nodetest.StartChild(t, nodetest.ChildConfig{DataDir: dir, NATSListen: listen})
	nc, err = nats.Connect("nats://"+listen, nodeCreds(t, dir)...) // the journal's streams and the queues need the node user
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c = client.New(nc)
	eventually(t, 90*time.Second, "employee 456 out of Current", func() bool { return !exists(t, c, "Current", "Sales", "456") })
	if !exists(t, c, "Archive", "Sales", "456") {
		t.Fatal("employee 456 not in Archive")
	}
	// No write applied twice: Archive's journal holds one record (the
	// copy), Current's two (the hire and the delete).
	js, _ := jetstream.New(nc)
	for table, want := range map[string]uint64{"Archive": 1, "Current": 2} {
		info := tableStream(t, js, table)
		if info.State.Msgs != want {
			t.Errorf("%s's journal holds %d records, want %d", table, info.State.Msgs, want)
		}
	}
	q, err := functions.OpenQueues(ctx, js, "cairn", functions.QueueConfig{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the archive queue drained", func() bool {
		n, err := q.Depth(ctx, "archive")
		return err == nil && n == 0
	})
	if ps, _ := queueadmin.New(q, nil).Poison(ctx, "archive", 0, 10); len(ps) != 0 {
		t.Fatalf("poisoned: %+v", ps)
	}
}

// tableStream finds a table's journal stream.
func tableStream(t *testing.T, js jetstream.JetStream, table string) *jetstream.StreamInfo {
	t.Helper()
	ctx := ctxT(t)
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		if strings.HasPrefix(name, strings.TrimSuffix(journal.StreamName("cairn", table, 0), "0")) {
			s, err := js.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			info, err := s.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return info
		}
	}
	t.Fatalf("no stream for %s", table)
	return nil
}

// TestMessageThatKillsItsHost: a message whose every delivery takes its
// host down (SIGKILL as the invocation starts) is poisoned, not retried
// forever: the deliveries cut short count, and once the count is past the
// maximum the message is moved without being run. The NATS server runs
// apart from the hosts (as in a deployment of several hosts), so it
// outlives them.
func TestMessageThatKillsItsHost(t *testing.T) {
	ns, nc := jstest.Server(t)
	url := ns.ClientURL()
	ctx := ctxT(t)
	// Only the deadly function's invocations reach the failpoint. The
	// built-in values-scan runs at each multiple of its interval (by
	// default every tenth minute of the clock), here every second: a
	// host killed by it instead of by the message would leave the
	// message a delivery short of its poisoning, and the third host
	// would run it.
	cc := nodetest.ChildConfig{NATSURL: url, Failpoint: "functions.invoke:deadly", ValueSweepEvery: time.Second}
	child := nodetest.StartChild(t, cc)
	js, _ := jetstream.New(nc)
	reg, err := functions.OpenRegistry(ctx, js, "cairn", 0)
	if err != nil {
		t.Fatal(err)
	}
	m := functions.Manifest{Name: "deadly", Trigger: functions.Trigger{Queue: "deadly"}, MaxDequeueCount: 2, Timeout: functions.Duration(time.Second)}
	if _, err := reg.Deploy(ctx, m, buildGuest(t, "testdata/guest", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, functions.QueueSubject("cairn", "deadly"), []byte("version")); err != nil {
		t.Fatal(err)
	}
	// Two hosts die on it, one after the other: this one as soon as it
	// runs it, the next once the first delivery's ack wait has passed.
	// The next may die before it is ready (the message waits for it as
	// soon as its runner loads the function): it is not waited for.
	for i := range 2 {
		if i > 0 {
			child = nodetest.SpawnChild(t, cc)
		}
		if err := child.Wait(); err == nil || !strings.Contains(child.Log(), "failpoint reached") {
			t.Fatalf("host %d did not die at the failpoint: %v\n%s", i+1, err, child.Log())
		}
	}
	cc.Failpoint = ""
	child = nodetest.StartChild(t, cc)
	// Three hosts started and two died: under the race detector on two
	// cores that can take most of a minute, so what follows gets a
	// deadline of its own rather than what is left of the first.
	ctx = ctxT(t)
	q, err := functions.OpenQueues(ctx, js, "cairn", functions.QueueConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var ps []queueadmin.PoisonMessage
	var lastErr error
	deadline := time.Now().Add(60 * time.Second)
	for len(ps) != 1 {
		if time.Now().After(deadline) {
			// What the consumer holds and what the host did, to tell a
			// delivery never made from one made and not settled.
			var state any = "unknown"
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // ctx ends with the wait
			defer cancel()
			if c, err := js.Consumer(dctx, functions.StreamName("cairn"), "fn-deadly"); err != nil {
				state = err
			} else {
				state = c.CachedInfo()
			}
			t.Fatalf("after 60s: the deadly message is not in the poison queue (last error %v)\nconsumer: %+v\nthe third host's log:\n%s", lastErr, state, child.Log())
		}
		time.Sleep(20 * time.Millisecond)
		ps, lastErr = queueadmin.New(q, nil).Poison(ctx, "deadly", 0, 10)
	}
	if ps[0].Attempts != 2 || !strings.Contains(ps[0].Error, "without finishing") || string(ps[0].Body) != "version" {
		t.Fatalf("poison message: %+v\n%s", ps[0], child.Log())
	}
}

// TestQueueConsumerDeletedIsCreatedAgain: a function whose queue consumer
// is deleted from outside creates it again and goes on with its queue.
func TestQueueConsumerDeletedIsCreatedAgain(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	mustTable(t, th.c, "Current", "Archive")
	q := th.h.Functions().Queues()
	js, _ := jetstream.New(th.nc)
	stream := functions.StreamName("cairn")
	eventually(t, 20*time.Second, "the archive consumer exists", func() bool {
		_, err := js.Consumer(ctx, stream, "fn-archive")
		return err == nil
	})
	if err := js.DeleteConsumer(ctx, stream, "fn-archive"); err != nil {
		t.Fatal(err)
	}
	if _, err := th.c.Insert(ctx, "Current", namedEmployee("Sales", "789", "Smith")); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, "archive", archiveMsg("Sales", "789")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "employee 789 archived after the consumer was deleted", func() bool {
		return exists(t, th.c, "Archive", "Sales", "789") && !exists(t, th.c, "Current", "Sales", "789")
	})
}

// archiveUntilKilled enqueues the archiving of (pk, rk) on the host child,
// started with a failpoint the archive reaches, and waits for the host to
// die of SIGKILL there; nc, connected to the child's server, is closed.
// The host may die before the enqueue's acknowledgement, stored and
// sent, has reached this process: the acknowledgement is then lost with
// the host's connection (ErrDisconnected). The host's death at the
// failpoint shows that the message was stored.
func archiveUntilKilled(t *testing.T, ctx context.Context, nc *nats.Conn, child *nodetest.Child, pk, rk string) {
	t.Helper()
	js, _ := jetstream.New(nc)
	ack, err := js.PublishAsync(functions.QueueSubject("cairn", "archive"), archiveMsg(pk, rk))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ack.Ok():
	case err := <-ack.Err():
		if !errors.Is(err, nats.ErrDisconnected) {
			t.Fatalf("enqueue: %v\n%s", err, child.Tail())
		}
	case <-child.Done():
	case <-ctx.Done():
		t.Fatalf("enqueue: no acknowledgement, and the host still runs\n%s", child.Tail())
	}
	select {
	case <-child.Done():
	case <-ctx.Done():
		t.Fatalf("the host did not reach the failpoint\n%s", child.Tail())
	}
	err = child.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL || !strings.Contains(child.Log(), "failpoint reached") {
		t.Fatalf("the host did not die of SIGKILL at the failpoint: %v\n%s", err, child.Log())
	}
	nc.Close()
}
