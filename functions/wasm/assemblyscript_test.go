package wasm

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/abi"
	"github.com/cairn-dev/cairn/functions/guesttest"
)

// The checks of the Go guest (wasm_test.go) run against asecho, echo's
// twin built with the AssemblyScript SDK (functions/sdk/assemblyscript).
// Without node and npm they are skipped, saying so.

var asPinned sync.Once

// loadASEcho loads the AssemblyScript echo guest on the shared runtime.
func loadASEcho(t testing.TB, o LoadOptions) *Module {
	t.Helper()
	module := guesttest.AssemblyScript(t, "testdata/asecho/index.ts")
	asPinned.Do(func() {
		rt := sharedRuntime(t)
		e, err := rt.engine(context.Background(), rt.cfg.MemoryLimitPages)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.rt.CompileModule(context.Background(), module); err != nil {
			t.Fatal(err)
		}
	})
	if o.Name == "" {
		o.Name = "asecho"
	}
	m, err := sharedRuntime(t).Load(context.Background(), module, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

func TestAssemblyScriptValidate(t *testing.T) {
	module := guesttest.AssemblyScript(t, "testdata/asecho/index.ts")
	if err := sharedRuntime(t).Validate(context.Background(), module); err != nil {
		t.Fatal(err)
	}
	t.Logf("asecho: %d bytes", len(module))
}

func TestAssemblyScriptRoundTrip(t *testing.T) {
	m := loadASEcho(t, LoadOptions{})

	guestABIChecks(t, m)
	t.Run("merged W is an Int32", func(t *testing.T) {
		h := mustRun(t, m, "ops")
		if v, _ := h.rows["p/a"].Get("W"); v.Type() != engine.TypeInt32 || v.Int() != 3 {
			t.Errorf("merged W = %v", v)
		}
	})
	t.Run("every property type", func(t *testing.T) {
		h := mustRun(t, m, "types")
		e := h.rows["p/types"]
		var g [16]byte
		for i := range g {
			g[i] = byte(i)
		}
		want := engine.NewEntity("p", "types",
			engine.Property{Name: "S", Value: engine.String("héllo")},
			engine.Property{Name: "I", Value: engine.Int32(-7)},
			engine.Property{Name: "L", Value: engine.Int64(-5000000000)},
			engine.Property{Name: "D", Value: engine.Double(2.5)},
			engine.Property{Name: "B", Value: engine.Bool(true)},
			engine.Property{Name: "T", Value: engine.DateTimeTicks(638000000000000000)},
			engine.Property{Name: "G", Value: engine.Guid(g)},
			engine.Property{Name: "X", Value: engine.Binary([]byte{0, 0xff, 7})},
			engine.Property{Name: "U", Value: engine.String("a\uFFFDb")}, // a lone surrogate, replaced
		)
		if e == nil || len(e.Properties) != len(want.Properties) {
			t.Fatalf("written %+v", e)
		}
		for i, p := range want.Properties {
			if got := e.Properties[i]; got.Name != p.Name || !got.Value.Equal(p.Value) {
				t.Errorf("property %d: %v %v, want %v %v", i, got.Name, got.Value, p.Name, p.Value)
			}
		}
		// Read back through the fake runner's get (sorted by name).
		const read = "B:5:true D:4:2.5 G:7:000102030405060708090a0b0c0d0e0f I:2:-7 L:3:-5000000000 S:1:héllo T:6:638000000000000000 U:1:a\uFFFDb X:8:00ff07"
		if string(h.output) != read {
			t.Errorf("read back %q, want %q", h.output, read)
		}
	})
	t.Run("trigger", func(t *testing.T) {
		h := newFakeRunner("trigger")
		h.trigger.Kind, h.trigger.Queue, h.trigger.DequeueCount, h.trigger.Time = abi.KindChange, "", 3, 639000000000000000
		h.trigger.Change = &abi.Change{Table: "T", Seq: 1 << 40, Index: 2,
			Entity: abi.Entity{Entity: engine.NewEntity("p", "r"), ETag: "e2"}, ETag: "e2", PrevETag: "e1",
			Prev: &abi.Entity{Entity: engine.NewEntity("p", "r", engine.Property{Name: "V", Value: engine.String("old")}), ETag: "e1"}}
		if err := m.Invoke(context.Background(), "s", h.call); err != nil {
			t.Fatal(err)
		}
		want := "t-1 change echo 1  3 639000000000000000 change T 1099511627776 2 put p/r e2 prev e1 known r@e1=old"
		if string(h.output) != want {
			t.Errorf("output %q, want %q", h.output, want)
		}
	})
	t.Run("random", func(t *testing.T) {
		// Math.random is seeded once per instance, from random_get.
		a, b := mustRun(t, m, "rand").output, mustRun(t, m, "rand").output
		if !strings.HasPrefix(string(a), "0.") || string(a) == string(b) {
			t.Errorf("Math.random gave %s, then %s", a, b)
		}
	})
	if n := m.started.Load(); n != 1 {
		t.Errorf("%d instances started, want 1", n)
	}
}

func TestAssemblyScriptGuestError(t *testing.T) {
	m := loadASEcho(t, LoadOptions{})
	h, err := run(t, m, "fail")
	var ge *GuestError
	if !errors.As(err, &ge) || ge.Message != "no good" {
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

// TestAssemblyScriptAbort: a throw ends in the SDK's abort, which tells
// the runner why (OpFail) and traps: a crash, whose reason is the throw's
// message, and a fresh instance for the next invocation.
func TestAssemblyScriptAbort(t *testing.T) {
	m := loadASEcho(t, LoadOptions{})
	h, err := run(t, m, "panic")
	var ce *CrashError
	if !errors.As(err, &ce) {
		t.Fatalf("err %v (%T), want CrashError", err, err)
	}
	if !strings.Contains(ce.Reason, "panic: boom (") || !strings.Contains(ce.Reason, "asecho/index.ts:") || !strings.HasPrefix(h.failure, "boom") {
		t.Errorf("reason %q, failure %q", ce.Reason, h.failure)
	}
	t.Logf("%v", err)
	if h := mustRun(t, m, "again"); string(h.output) != "again" {
		t.Errorf("output %q", h.output)
	}
	if n := m.started.Load(); n != 2 {
		t.Errorf("%d instances started, want 2 (a fresh one after the abort)", n)
	}
}

func TestAssemblyScriptTimeout(t *testing.T) {
	m := loadASEcho(t, LoadOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Invoke(ctx, "s", newFakeRunner("loop").call) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out after") {
			t.Fatalf("err %v, want a timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Invoke did not return 10 s after its deadline")
	}
	mustRun(t, m, "after")
}

// TestAssemblyScriptMemoryLimit: a guest that allocates past its limit
// crashes and is replaced. AssemblyScript's allocator traps (unreachable)
// when memory.grow fails, without a message, and may stop short of the
// limit by what it asked for, so the reason is a plain trap rather than
// the Go guest's "memory limit of 256 pages".
func TestAssemblyScriptMemoryLimit(t *testing.T) {
	m := loadASEcho(t, LoadOptions{Name: "assmall", MemoryLimitPages: 256})
	_, err := run(t, m, "bomb")
	var ce *CrashError
	if !errors.As(err, &ce) {
		t.Fatalf("err %v (%T), want a CrashError", err, err)
	}
	t.Logf("%v", ce.Reason)
	mustRun(t, m, "after")
}

func TestAssemblyScriptConcurrency(t *testing.T) {
	m := loadASEcho(t, LoadOptions{Name: "aspool", MaxInstances: 2})
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

// BenchmarkInvokeWarmLanguages compares a warm invocation of the Go
// guest and of the AssemblyScript guest: the trigger, a log line and the
// reply.
func BenchmarkInvokeWarmLanguages(b *testing.B) {
	for _, g := range []struct {
		name string
		load func(testing.TB, LoadOptions) *Module
	}{{"go", loadEcho}, {"assemblyscript", loadASEcho}} {
		b.Run(g.name, func(b *testing.B) {
			m := g.load(b, LoadOptions{Name: "bench-" + g.name})
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
		})
	}
}

// TestAssemblyScriptEntityRoundTrip: random entities, sent to the guest in
// a change trigger and written back, arrive as they were sent: the
// guest's msgpack decoder and encoder against the runner's.
func TestAssemblyScriptEntityRoundTrip(t *testing.T) {
	m := loadASEcho(t, LoadOptions{})
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	for i := range 100 {
		h := newFakeRunner("copy")
		ent := randEntity(r, "e")
		h.trigger.Change = &abi.Change{Table: "T", Seq: r.Uint64(), Entity: abi.Entity{Entity: ent, ETag: randText(r)}, ETag: "x"}
		var prev *engine.Entity
		if r.IntN(2) == 0 {
			prev = randEntity(r, "p")
			h.trigger.Change.Prev = &abi.Entity{Entity: prev, ETag: randText(r)}
		}
		if err := m.Invoke(context.Background(), "s", h.call); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		want := []*engine.Entity{ent}
		etags := h.trigger.Change.Entity.ETag
		if prev != nil {
			want = append(want, prev)
			etags += " " + h.trigger.Change.Prev.ETag
		}
		if len(h.writes) != len(want) || string(h.output) != etags {
			t.Fatalf("%d: %d writes, reply %q; want %d, %q", i, len(h.writes), h.output, len(want), etags)
		}
		for j, w := range want {
			got := h.writes[j].Entity.Entity
			if len(got.Properties) == 0 && len(w.Properties) == 0 {
				got.Properties = w.Properties // nil and empty are one
			}
			if !reflect.DeepEqual(got, w) {
				t.Fatalf("%d: wrote\n%#v\nwant\n%#v", i, got, w)
			}
		}
	}
}

// randText is a string of random length (to 70,000 bytes: every msgpack
// str form) with ASCII, two- and three-byte and four-byte characters.
func randText(r *rand.Rand) string {
	var n int
	switch r.IntN(40) {
	case 0, 1, 2, 3:
		n = 200 + r.IntN(200)
	case 4:
		n = 66000 + r.IntN(4000)
	default:
		n = r.IntN(40)
	}
	runes := []rune{'a', 'Z', '0', ' ', 'é', 'ß', '€', '中', '😀', '\u0000'}
	var b strings.Builder
	for b.Len() < n {
		b.WriteRune(runes[r.IntN(len(runes))])
	}
	return b.String()
}

func randEntity(r *rand.Rand, key string) *engine.Entity {
	ints := []int64{0, 1, -1, 31, -32, -33, 127, 128, 255, 256, -128, -129, 32767, 32768, -32768, -32769,
		math.MaxInt32, math.MinInt32, math.MaxInt32 + 1, math.MinInt32 - 1, math.MaxInt64, math.MinInt64}
	anInt := func() int64 {
		if r.IntN(2) == 0 {
			return ints[r.IntN(len(ints))]
		}
		return r.Int64() >> r.IntN(64)
	}
	var props []engine.Property
	for k := range r.IntN(12) {
		name := "P" + strconv.Itoa(k)
		var v engine.Value
		switch r.IntN(8) {
		case 0:
			v = engine.String(randText(r))
		case 1:
			v = engine.Int32(int32(anInt()))
		case 2:
			v = engine.Int64(anInt())
		case 3:
			v = engine.Double([]float64{0, -1.5, math.Pi, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(1)}[r.IntN(6)])
		case 4:
			v = engine.Bool(r.IntN(2) == 0)
		case 5:
			v = engine.DateTimeTicks(anInt())
		case 6:
			var g [16]byte
			for i := range g {
				g[i] = byte(r.IntN(256))
			}
			v = engine.Guid(g)
		default:
			b := make([]byte, []int{0, 1, 300, 300, 300, 70000}[r.IntN(6)])
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
			v = engine.Binary(b)
		}
		props = append(props, engine.Property{Name: name, Value: v})
	}
	e := engine.NewEntity(key+randText(r), randText(r), props...)
	e.Timestamp = anInt()
	return e
}

// TestAssemblyScriptAnswers: a field the guest does not know, of any
// msgpack type, is skipped; an answer cut short at any byte is an error
// the invocation aborts on, with nothing written.
func TestAssemblyScriptAnswers(t *testing.T) {
	m := loadASEcho(t, LoadOptions{})
	extra, err := msgpack.Marshal(map[string]any{"zz": []any{
		1, -5, 300, -300, 1 << 40, uint64(1 << 63), float32(1.5), 3.5, "s", strings.Repeat("x", 40), strings.Repeat("y", 300), []byte{1, 2},
		nil, true, false, map[string]any{"k": []any{}}, time.Unix(1e9, 5), map[string]any{}, make([]any, 20),
	}})
	if err != nil {
		t.Fatal(err)
	}
	// with answers the trigger with the extra key first, so that the
	// known ones must be found after it, or cut to n bytes.
	with := func(h *fakeRunner, cut int) func(abi.Op, []byte) []byte {
		return func(op abi.Op, req []byte) []byte {
			b := h.call(op, req)
			if op != abi.OpTrigger {
				return b
			}
			if b[0]&0xf0 != 0x80 || extra[0] != 0x81 {
				t.Fatalf("want fixmaps, got 0x%x 0x%x", b[0], extra[0])
			}
			msg := append([]byte{b[0] + 1}, extra[1:]...)
			msg = append(msg, b[1:]...)
			if cut >= 0 {
				msg = msg[:cut]
			}
			return msg
		}
	}
	h := newFakeRunner("write")
	if err := m.Invoke(context.Background(), "s", with(h, -1)); err != nil || len(h.writes) != 1 {
		t.Fatalf("with an unknown field: %v, writes %+v", err, h.writes)
	}
	h = newFakeRunner("write")
	full := len(with(h, -1)(abi.OpTrigger, nil))
	for cut := 0; cut < full; cut += 1 + cut/8 {
		h := newFakeRunner("write")
		err := m.Invoke(context.Background(), "s", with(h, cut))
		var ce *CrashError
		if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "decode the answer") || len(h.writes) != 0 {
			t.Fatalf("an answer cut to %d of %d bytes: %v, writes %+v", cut, full, err, h.writes)
		}
	}
}

// BenchmarkCompileLanguages compares what a node pays to compile a module
// it has not seen (Validate on a runtime without a cache: the deploy's
// check, and a node's first load): the Go guest and the AssemblyScript
// guest.
func BenchmarkCompileLanguages(b *testing.B) {
	for _, g := range []struct {
		name   string
		module func(testing.TB) []byte
	}{
		{"go", func(t testing.TB) []byte { return buildGuest(t, "echo") }},
		{"assemblyscript", func(t testing.TB) []byte { return guesttest.AssemblyScript(t, "testdata/asecho/index.ts") }},
	} {
		b.Run(g.name, func(b *testing.B) {
			module := g.module(b)
			ctx := context.Background()
			for b.Loop() {
				rt, err := NewRuntime(ctx, Config{})
				if err != nil {
					b.Fatal(err)
				}
				if err := rt.Validate(ctx, module); err != nil {
					b.Fatal(err)
				}
				_ = rt.Close(ctx)
			}
		})
	}
}
