package wasm

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/abi"
)

// run invokes m with body as the trigger's body on a fresh fake runner.
func run(t testing.TB, m *Module, body string) (*fakeRunner, error) {
	t.Helper()
	h := newFakeRunner(body)
	return h, m.Invoke(context.Background(), h.trigger.ID, h.call)
}

func mustRun(t testing.TB, m *Module, body string) *fakeRunner {
	t.Helper()
	h, err := run(t, m, body)
	if err != nil {
		t.Fatalf("%q: %v", body, err)
	}
	return h
}

func TestRoundTrip(t *testing.T) {
	m := loadEcho(t, LoadOptions{})

	guestABIChecks(t, m)
	t.Run("main does not run in c-shared", func(t *testing.T) {
		if h := mustRun(t, m, "main"); string(h.output) != "main did not run" {
			t.Errorf("output %q", h.output)
		}
	})
	t.Run("seeded random", func(t *testing.T) {
		rnd := func(seed string) string {
			h := newFakeRunner("rand")
			if err := m.Invoke(context.Background(), seed, h.call); err != nil {
				t.Fatal(err)
			}
			return string(h.output)
		}
		a, b, a2 := rnd("trigger-a"), rnd("trigger-b"), rnd("trigger-a")
		if a != a2 || a == b {
			t.Errorf("seed a: %s, %s; seed b: %s", a, a2, b)
		}
	})
	if n := m.started.Load(); n != 1 {
		t.Errorf("%d instances started, want 1", n)
	}
}

// guestABIChecks runs the ABI's checks every guest SDK passes, on a module
// built from its echo guest (testdata/echo in Go, testdata/asecho in
// AssemblyScript), which answers the same bodies the same way.
func guestABIChecks(t *testing.T, m *Module) {
	t.Run("echo", func(t *testing.T) {
		h := mustRun(t, m, "hello")
		if string(h.output) != "hello" {
			t.Errorf("output %q, want hello", h.output)
		}
		if len(h.logs) != 1 || h.logs[0] != "echo 5 bytes" {
			t.Errorf("logs %q", h.logs)
		}
	})
	t.Run("http", func(t *testing.T) {
		h := newFakeRunner("http")
		h.trigger.Kind = abi.KindHTTP
		h.trigger.HTTP = &abi.HTTPRequest{Method: "POST", Path: "/orders/7", Route: "/orders/{id}", Params: map[string]string{"id": "7"}, Query: "gift=yes"}
		if err := m.Invoke(context.Background(), "s", h.call); err != nil {
			t.Fatal(err)
		}
		if string(h.output) != "POST /orders/{id} gift=yes" || h.status != 201 || h.header["X-Order"][0] != "7" {
			t.Errorf("an HTTP trigger: output %q, status %d, header %v", h.output, h.status, h.header)
		}
	})
	t.Run("get", func(t *testing.T) {
		h := newFakeRunner("get")
		if err := m.Invoke(context.Background(), "s", h.call); err != nil {
			t.Fatal(err)
		}
		if string(h.output) != "absent" {
			t.Errorf("absent: output %q", h.output)
		}
		h = newFakeRunner("get")
		h.rows["p/r"] = engine.NewEntity("p", "r", engine.Property{Name: "V", Value: engine.String("v1")})
		if err := m.Invoke(context.Background(), "s", h.call); err != nil {
			t.Fatal(err)
		}
		if string(h.output) != "v1 etag-r" {
			t.Errorf("present: output %q", h.output)
		}
	})
	t.Run("write and enqueue", func(t *testing.T) {
		h := mustRun(t, m, "write")
		if len(h.writes) != 1 || h.writes[0].Op != "InsertOrReplace" || h.writes[0].Table != "T" {
			t.Fatalf("writes %+v", h.writes)
		}
		if v, _ := h.rows["p/r"].Get("V"); v.Str() != "x" {
			t.Errorf("written V = %v", v)
		}
		if len(h.enqueued) != 1 || h.enqueued[0].Queue != "q" || string(h.enqueued[0].Body) != "m" {
			t.Errorf("enqueued %+v", h.enqueued)
		}
	})
	t.Run("every operation", func(t *testing.T) {
		h := mustRun(t, m, "ops")
		if got, want := string(h.output), "conflict:EntityAlreadyExists a=2 b=b"; got != want {
			t.Errorf("output %q, want %q", got, want)
		}
		var ops []string
		for _, w := range h.writes {
			ops = append(ops, w.Op+"/"+w.Entity.RowKey+"/"+w.IfMatch)
		}
		want := "Insert/a/ Insert/a/ Replace/a/* Merge/a/* InsertOrMerge/b/ InsertOrReplace/c/ Delete/c/*"
		if got := strings.Join(ops, " "); got != want {
			t.Errorf("writes %s, want %s", got, want)
		}
		if len(h.queries) != 1 || h.queries[0] != (abi.QueryRequest{Table: "T", PartitionKey: "p", Filter: "V ne ''", Top: 10}) {
			t.Errorf("queries %+v", h.queries)
		}
		if v, _ := h.rows["p/a"].Get("W"); v.Int() != 3 {
			t.Errorf("merged W = %v", v)
		}
	})
	t.Run("big answer through take", func(t *testing.T) {
		big := strings.Repeat("0123456789abcdef", 200<<10/16) // 200 KiB
		for range 2 {
			h := newFakeRunner("big")
			h.rows["p/big"] = engine.NewEntity("p", "big", engine.Property{Name: "V", Value: engine.String(big)})
			if err := m.Invoke(context.Background(), "s", h.call); err != nil {
				t.Fatal(err)
			}
			if string(h.output) != big {
				t.Fatalf("output of %d bytes, want %d", len(h.output), len(big))
			}
		}
	})
}

func TestGuestError(t *testing.T) {
	m := loadEcho(t, LoadOptions{})
	h, err := run(t, m, "fail")
	var ge *GuestError
	if !errors.As(err, &ge) || ge.Message != "no good" || err.Error() != "no good" {
		t.Fatalf("err %v (%T), want GuestError no good", err, err)
	}
	if h.failure != "no good" {
		t.Errorf("the runner call saw failure %q", h.failure)
	}
	mustRun(t, m, "after")
	if n := m.started.Load(); n != 1 {
		t.Errorf("%d instances started, want 1 (reused after a GuestError)", n)
	}
}

func TestPanic(t *testing.T) {
	m := loadEcho(t, LoadOptions{})
	_, err := run(t, m, "panic")
	var ce *CrashError
	if !errors.As(err, &ce) {
		t.Fatalf("err %v (%T), want CrashError", err, err)
	}
	if !strings.Contains(ce.Reason, "panic: boom") || !strings.Contains(ce.Stderr, "goroutine") {
		t.Errorf("reason %q, stderr %q", ce.Reason, ce.Stderr)
	}
	t.Logf("%v", err)
	if h := mustRun(t, m, "again"); string(h.output) != "again" {
		t.Errorf("output %q", h.output)
	}
	if n := m.started.Load(); n != 2 {
		t.Errorf("%d instances started, want 2 (a fresh one after the panic)", n)
	}
}

func TestTimeout(t *testing.T) {
	m := loadEcho(t, LoadOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	h := newFakeRunner("loop")
	done := make(chan error, 1)
	go func() { done <- m.Invoke(ctx, "s", h.call) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out after") {
			t.Fatalf("err %v, want a timeout", err)
		}
		t.Logf("%v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Invoke did not return 10 s after its deadline")
	}
	mustRun(t, m, "after")
}

func TestWaitForInstance(t *testing.T) {
	m := loadEcho(t, LoadOptions{Name: "one", MaxInstances: 1})
	busy, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Invoke(busy, "s", newFakeRunner("loop").call) }()
	for len(m.idle) > 0 { // until the loop holds the instance
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := m.Invoke(ctx, "s", newFakeRunner("x").call)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for an instance") {
		t.Errorf("err %v, want a timeout waiting for an instance", err)
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the looping invocation: err %v, want cancelled", err)
	}
	mustRun(t, m, "after")
}

func TestMemoryLimit(t *testing.T) {
	m := loadEcho(t, LoadOptions{Name: "small", MemoryLimitPages: 256})
	_, err := run(t, m, "bomb")
	var ce *CrashError
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "memory limit of 256 pages") {
		t.Fatalf("err %v (%T), want a CrashError for the memory limit", err, err)
	}
	t.Logf("%v", ce.Reason)
	mustRun(t, m, "after")
}

func TestConcurrency(t *testing.T) {
	m := loadEcho(t, LoadOptions{Name: "pool", MaxInstances: 2})
	var wg sync.WaitGroup
	errs := make(chan error, 8*50)
	for range 8 {
		wg.Go(func() {
			for range 50 {
				h := newFakeRunner("conc")
				if err := m.Invoke(context.Background(), "s", h.call); err != nil {
					errs <- err
				} else if string(h.output) != "alone" {
					errs <- errors.New("output " + string(h.output))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := m.started.Load(); n > 2 {
		t.Errorf("%d instances started, want at most 2", n)
	}
}

func TestOutputToLog(t *testing.T) {
	m := loadEcho(t, LoadOptions{Name: "printer"})
	mustRun(t, m, "print")
	out := logs.String()
	for _, want := range []string{`function=printer stream=stdout line="to stdout 1"`, `stream=stderr line="to stderr 2"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}

func TestValidate(t *testing.T) {
	rt := sharedRuntime(t)
	ctx := context.Background()
	if err := rt.Validate(ctx, pin(t, "echo")); err != nil {
		t.Errorf("echo: %v", err)
	}
	for _, c := range []struct {
		name   string
		module []byte
		want   string
	}{
		{"badimport", pin(t, "badimport"), `module imports "env"."foo", which the function ABI does not provide (allowed: cairn.call, cairn.take, wasi_snapshot_preview1.*)`},
		{"noexport", pin(t, "noexport"), `module does not export cairn_handle: build with //go:wasmexport cairn_handle (functions/sdk does this) and -buildmode=c-shared (this module is a WASI command: it exports _start)`},
		{"garbage", []byte("this is not wasm"), "not a WebAssembly module: "},
		{"empty", nil, "not a WebAssembly module: "},
	} {
		err := rt.Validate(ctx, c.module)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %s", c.name, err, c.want)
		}
		if _, err := rt.Load(ctx, c.module, LoadOptions{Name: c.name}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Load: err %v, want %s", c.name, err, c.want)
		}
	}
}

func TestCacheDir(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	echo := buildGuest(t, "echo")
	for i := range 2 {
		start := time.Now()
		rt, err := NewRuntime(ctx, Config{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		m, err := rt.Load(ctx, echo, LoadOptions{Name: "cached"})
		if err != nil {
			t.Fatal(err)
		}
		if h := mustRun(t, m, "hi"); string(h.output) != "hi" {
			t.Errorf("output %q", h.output)
		}
		t.Logf("runtime %d: loaded and ran in %v", i, time.Since(start))
		if err := m.Close(ctx); err != nil {
			t.Error(err)
		}
		if err := rt.Close(ctx); err != nil {
			t.Error(err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) == 0 {
		t.Error("the cache directory is empty")
	}
}

func TestClosed(t *testing.T) {
	m := loadEcho(t, LoadOptions{Name: "closed"})
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, m, "x"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("err %v after Close", err)
	}
}

func BenchmarkInvokeWarm(b *testing.B) {
	m := loadEcho(b, LoadOptions{Name: "bench"})
	h := newFakeRunner("x")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		h.logs, h.ops = h.logs[:0], h.ops[:0]
		if err := m.Invoke(ctx, "seed", h.call); err != nil {
			b.Fatal(err)
		}
	}
}

// idleMemory returns the memory sizes of the pooled instances, in bytes;
// it takes them out and puts them back, so call it between invocations.
func (m *Module) idleMemory() []uint32 {
	var sizes []uint32
	var back []*instance
	for {
		select {
		case inst := <-m.idle:
			sizes = append(sizes, inst.mem.Size())
			back = append(back, inst)
			continue
		default:
		}
		break
	}
	for _, inst := range back {
		m.idle <- inst
	}
	return sizes
}

func TestGrownInstanceNotPooled(t *testing.T) {
	m := loadEcho(t, LoadOptions{Name: "grower", MaxInstances: 1})
	for range 5 { // a Go guest's heap settles in its first invocations
		mustRun(t, m, "settle")
	}
	before := m.idleMemory()
	if len(before) != 1 || m.grownClosed.Load() != 0 {
		t.Fatalf("before: idle instances of %v bytes, %d closed for growing; want one, none", before, m.grownClosed.Load())
	}
	if h := mustRun(t, m, "grow"); string(h.output) != "33554432" {
		t.Fatalf("output %q", h.output)
	}
	if got := m.idleMemory(); len(got) != 0 || m.grownClosed.Load() != 1 {
		t.Fatalf("after growing: idle instances of %v bytes, %d closed for growing; want none, one", got, m.grownClosed.Load())
	}
	mustRun(t, m, "after")
	after := m.idleMemory()
	if len(after) != 1 || after[0] > before[0]+growSlack {
		t.Errorf("a fresh instance holds %v bytes, before growing %v", after, before)
	}
	t.Logf("pooled instance: %d KiB before, %d KiB after; the grown one was closed", before[0]>>10, after[0]>>10)
	if n := m.started.Load(); n != 2 {
		t.Errorf("%d instances started, want 2", n)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := m.idleMemory(); len(got) != 0 {
		t.Errorf("after Close, idle instances of %v bytes", got)
	}
}

func TestMemoryBudget(t *testing.T) {
	ctx := context.Background()
	rt, err := NewRuntime(ctx, Config{MemoryBudget: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(ctx) })
	echo := pin(t, "echo")
	// 32 MiB × 2 fits exactly; then nothing more does.
	a, err := rt.Load(ctx, echo, LoadOptions{Name: "fits", MemoryLimitPages: 512, MaxInstances: 2})
	if err != nil {
		t.Fatalf("a module whose worst case fits: %v", err)
	}
	if r, b := rt.Reserved(); r != 64<<20 || b != 64<<20 {
		t.Errorf("reserved %d of %d, want all of 64 MiB", r, b)
	}
	_, err = rt.Load(ctx, echo, LoadOptions{Name: "over", MemoryLimitPages: 256, MaxInstances: 1})
	var be *BudgetError
	if !errors.As(err, &be) || be.Need != 16<<20 || be.Reserved != 64<<20 {
		t.Fatalf("err %v, want a BudgetError for 16 MiB over 64 MiB reserved", err)
	}
	t.Logf("%v", err)
	if r, _ := rt.Reserved(); r != 64<<20 {
		t.Errorf("a refused load left %d bytes reserved", r)
	}
	// Closing gives the share back: the same load fits now.
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := rt.Reserved(); r != 0 {
		t.Errorf("after Close, %d bytes reserved", r)
	}
	b, err := rt.Load(ctx, echo, LoadOptions{Name: "now-fits", MemoryLimitPages: 256, MaxInstances: 1})
	if err != nil {
		t.Fatalf("after the other module closed: %v", err)
	}
	_ = b.Close(ctx)
	// A module whose worst case alone is over the budget never loads.
	if _, err := rt.Load(ctx, echo, LoadOptions{Name: "huge", MemoryLimitPages: 1024, MaxInstances: 2}); !errors.As(err, &be) {
		t.Errorf("err %v, want a BudgetError", err)
	}
}

// TestCloseClosesEveryInstance: closing a module (an undeploy) closes its
// idle instances at once and a busy one when its invocation ends, so no
// instance keeps its memory.
func TestCloseClosesEveryInstance(t *testing.T) {
	ctx := context.Background()
	m, err := sharedRuntime(t).Load(ctx, pin(t, "echo"), LoadOptions{Name: "undeployed", MaxInstances: 2})
	if err != nil {
		t.Fatal(err)
	}
	busy, stop := context.WithCancel(ctx)
	running := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		h := newFakeRunner("loop")
		var once sync.Once
		done <- m.Invoke(busy, "s", func(op abi.Op, req []byte) []byte {
			once.Do(func() { close(running) }) // the guest asks for its trigger first
			return h.call(op, req)
		})
	}()
	<-running
	mustRun(t, m, "beside") // on the second instance
	if n := m.live.Load(); n != 2 {
		t.Fatalf("%d instances open, want 2", n)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := m.live.Load(); n != 1 {
		t.Errorf("after Close, %d instances open, want the busy one", n)
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the busy invocation: %v", err)
	}
	if n := m.live.Load(); n != 0 {
		t.Errorf("after the busy invocation ended, %d instances open", n)
	}
}
