package node_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/guesttest"
	"github.com/cairn-dev/cairn/functions/queueadmin"
)

// buildGuest builds a Go function package to WebAssembly.
func buildGuest(t testing.TB, dir string, ldflags string) []byte {
	t.Helper()
	return guesttest.Module(t, guesttest.Build{Dir: dir, LDFlags: ldflags})
}

// deploy deploys a module and waits until the host runs that version.
func deploy(t testing.TB, th *testHost, m functions.Manifest, module []byte) functions.Manifest {
	t.Helper()
	ctx := ctxT(t)
	d, err := th.h.Functions().Registry().Deploy(ctx, m, module)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, fmt.Sprintf("%s version %d loaded", d.Name, d.Version), func() bool {
		v, ok := th.h.Functions().Version(d.Name)
		return ok && v == d.Version
	})
	return d
}

// TestSandboxLimits: an endless loop, a memory bomb and a panic in a guest
// fail their invocations within their limits, and the host keeps answering
// queries over HTTP and commands over NATS meanwhile.
func TestSandboxLimits(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	mustTable(t, th.c, "Processed")
	// One module, three functions: a short timeout for the loop, a small
	// memory cap and time enough to reach it for the bomb, time enough
	// for the panic. A function's timeout counts the start of the
	// instance it runs on, when it needs a new one (the loop's is
	// discarded at its timeout): under the race detector on a busy
	// machine that start alone took more than 300 ms, so the panic has a
	// function of its own.
	module := buildGuest(t, "testdata/guest", "")
	deploy(t, th, fast(functions.Manifest{Name: "guest", Trigger: functions.Trigger{Queue: "guest"}, Timeout: functions.Duration(300 * time.Millisecond), MaxDequeueCount: 2}), module)
	deploy(t, th, fast(functions.Manifest{Name: "greedy", Trigger: functions.Trigger{Queue: "greedy"}, Timeout: functions.Duration(20 * time.Second), MemoryMB: 16, MaxDequeueCount: 2}), module)
	deploy(t, th, fast(functions.Manifest{Name: "crashy", Trigger: functions.Trigger{Queue: "crashy"}, Timeout: functions.Duration(20 * time.Second), MaxDequeueCount: 2}), module)

	svc, err := aztables.NewServiceClientFromConnectionString(httpapi.DevConnectionString(th.h.HTTPURL()), nil)
	if err != nil {
		t.Fatal(err)
	}
	table := svc.NewClient("Processed")
	stop := make(chan struct{})
	served := make(chan int, 1)
	go func() { // commands and queries all along
		n := 0
		defer func() { served <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := th.c.InsertOrReplace(ctx, "Processed", engine.NewEntity("alive", fmt.Sprint(n%50))); err != nil {
				t.Error(err)
				return
			}
			pager := table.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: to("PartitionKey eq 'alive'")})
			if _, err := pager.NextPage(ctx); err != nil {
				t.Error(err)
				return
			}
			n++
		}
	}()
	for queue, bodies := range map[string][]string{"guest": {"loop"}, "greedy": {"bomb"}, "crashy": {"panic"}} {
		for _, body := range bodies {
			if err := th.h.Functions().Queues().Enqueue(ctx, queue, []byte(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var ps []queueadmin.PoisonMessage
	eventually(t, 90*time.Second, "loop, bomb and panic poisoned", func() bool {
		ps = nil
		for _, q := range []string{"guest", "greedy", "crashy"} {
			p, _ := th.h.QueueAdmin().Poison(ctx, q, 0, 10)
			ps = append(ps, p...)
		}
		return len(ps) == 3
	})
	close(stop)
	if n := <-served; n == 0 {
		t.Fatal("no command or query was answered while the guests ran")
	}
	reasons := map[string]string{}
	for _, p := range ps {
		reasons[string(p.Body)] = p.Error
		if p.Attempts != 2 {
			t.Errorf("%s: %d attempts", p.Body, p.Attempts)
		}
	}
	for body, want := range map[string]string{"loop": "timed out", "bomb": "out of memory", "panic": "on purpose"} {
		if !strings.Contains(reasons[body], want) {
			t.Errorf("%s: error %q, want it to mention %q", body, reasons[body], want)
		}
	}
	// The function still works after its instances were discarded.
	if err := th.h.Functions().Queues().Enqueue(ctx, "crashy", []byte("after")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a message processed after the crashes", func() bool { return exists(t, th.c, "Processed", "m", "after") })
}

func to[T any](v T) *T { return &v }

// TestHotDeploy: a second version replaces the first on a running host
// while messages flow; none is lost or processed twice.
func TestHotDeploy(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	mustTable(t, th.c, "Processed")
	m := functions.Manifest{Name: "hot", Trigger: functions.Trigger{Queue: "hot"}, Concurrency: 4}
	v1 := deploy(t, th, m, buildGuest(t, "testdata/guest", "-X main.version=1"))
	v2module := buildGuest(t, "testdata/guest", "-X main.version=2")
	q := th.h.Functions().Queues()
	// Messages flow before, during and after the switch: a steady
	// stream until the host runs version 2 (it compiles it meanwhile),
	// then 100 more.
	n, after := 0, -1
	send := func() {
		if err := q.Enqueue(ctx, "hot", fmt.Appendf(nil, "%05d", n)); err != nil {
			t.Fatal(err)
		}
		n++
	}
	for range 100 {
		send()
	}
	v2, err := th.h.Functions().Registry().Deploy(ctx, m, v2module)
	if err != nil {
		t.Fatal(err)
	}
	// Two guest builds and a compile under the race detector on two
	// cores can take most of a minute: the stream until version 2 runs
	// (its compile, as long again) gets a deadline of its own rather
	// than what is left of the first.
	ctx = ctxT(t)
	deadline := time.Now().Add(60 * time.Second)
	for after < 100 {
		send()
		time.Sleep(3 * time.Millisecond)
		if v, _ := th.h.Functions().Version("hot"); v == v2.Version && after < 0 {
			after = 0
		}
		if after >= 0 {
			after++
		}
		if time.Now().After(deadline) {
			t.Fatal("version 2 not loaded within 60s")
		}
	}
	tb, _ := th.h.Views().Table("Processed")
	eventually(t, 60*time.Second, "every message processed", func() bool { return tb.Snapshot().Len() == n })
	if v, _ := th.h.Functions().Version("hot"); v != v2.Version || v2.Version != v1.Version+1 {
		t.Fatalf("running version %d, deployed %d then %d", v, v1.Version, v2.Version)
	}
	versions := map[string]int{}
	tb.Snapshot().Scan(func(e *engine.Entity) bool {
		v, _ := e.Get("Version")
		versions[v.Str()]++
		if d, _ := e.Get("DequeueCount"); d.Int() != 1 {
			t.Errorf("message %s needed %d deliveries", e.RowKey, d.Int())
		}
		return true
	})
	if versions["1"] == 0 || versions["2"] == 0 {
		t.Fatalf("processed by version: %v; want both", versions)
	}
	st := th.h.Functions().Stats()
	if f := st.Failures.Load(); f != 0 {
		t.Fatalf("%d failed invocations (a message processed twice fails its Insert)", f)
	}
	if ps, _ := th.h.QueueAdmin().Poison(ctx, "hot", 0, 10); len(ps) != 0 {
		t.Fatalf("poisoned: %+v", ps)
	}
	// Roll back to version 1: a new version with version 1's module.
	rb, err := th.h.Functions().Registry().Rollback(ctx, "hot", 0)
	if err != nil || rb.Digest != v1.Digest || rb.Version != v2.Version+1 {
		t.Fatalf("rollback: %+v, %v", rb, err)
	}
	eventually(t, 30*time.Second, "version 1's module answering again", func() bool {
		r, err := th.nc.Request(functions.DirectSubject("cairn", "hot"), []byte("version"), 5*time.Second)
		return err == nil && string(r.Data) == "1"
	})
	// A queue feeds one function.
	for _, other := range []functions.Manifest{{Name: "hot-two", Trigger: functions.Trigger{Queue: "hot"}}, {Name: "mine", Trigger: functions.Trigger{Queue: "archive"}}, {Name: "archive"}} {
		if _, err := th.h.Functions().Registry().Deploy(ctx, other, v2module); err == nil {
			t.Errorf("deploying %s on queue %q was accepted", other.Name, other.Trigger.Queue)
		}
	}
	// Undeploy: the function stops; its queue keeps new messages.
	if err := th.h.Functions().Registry().Undeploy(ctx, "hot"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "hot undeployed", func() bool { _, ok := th.h.Functions().Version("hot"); return !ok })
	if err := q.Enqueue(ctx, "hot", []byte("later")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if d, _ := q.Depth(ctx, "hot"); d != 1 {
		t.Fatalf("queue depth %d after undeploy, want the 1 new message kept", d)
	}
}
