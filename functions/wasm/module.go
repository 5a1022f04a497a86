package wasm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/sys"

	"github.com/cairn-dev/cairn/functions/abi"
)

// LoadOptions configures a loaded module.
type LoadOptions struct {
	// Name names the module in the log and in errors.
	Name string
	// MemoryLimitPages caps an instance's memory, in 64 KiB pages; 0 is
	// the runtime's default.
	MemoryLimitPages uint32
	// MaxInstances bounds the instances, and so the concurrent
	// invocations; 0 is 1. Instances start on demand and stay until the
	// module is closed, one crashes, or one grows its memory (see
	// Invoke). MemoryLimitPages × MaxInstances is the module's share of
	// the runtime's MemoryBudget.
	MaxInstances int
}

// Module is a loaded module and its pool of instances. It is safe for
// concurrent use.
type Module struct {
	name     string
	log      *slog.Logger
	rt       *Runtime
	need     uint64 // its share of the runtime's memory budget
	eng      *capRuntime
	compiled wazero.CompiledModule
	config   wazero.ModuleConfig
	limit    uint32 // memory cap in pages

	idle  chan *instance // instances ready to run
	slots chan struct{}  // one token per instance alive or starting
	done  chan struct{}  // closed by Close

	mu      sync.Mutex // orders release against Close
	closed  bool
	started atomic.Int64 // instances started, for tests
	// grownClosed counts instances closed because their memory grew.
	grownClosed atomic.Int64
	// live counts the open instances, idle or busy.
	live atomic.Int64
}

// Load validates and compiles module (from the cache when it can) and
// starts one instance, so that a module whose initialisation fails is
// refused here.
func (r *Runtime) Load(ctx context.Context, module []byte, o LoadOptions) (*Module, error) {
	limit := o.MemoryLimitPages
	if limit == 0 {
		limit = r.cfg.MemoryLimitPages
	}
	if limit > 65536 {
		return nil, fmt.Errorf("wasm: load %s: memory limit of %d pages is over the 65536 pages (4 GiB) of a 32-bit memory", o.Name, limit)
	}
	n := max(o.MaxInstances, 1)
	need := uint64(limit) << 16 * uint64(n)
	if err := r.reserve(o.Name, need); err != nil {
		return nil, err
	}
	m, err := r.load(ctx, module, o.Name, limit, n)
	if err != nil {
		r.unreserve(need)
		return nil, err
	}
	m.rt, m.need = r, need
	return m, nil
}

// load is Load once the module's share of the budget is reserved.
func (r *Runtime) load(ctx context.Context, module []byte, name string, limit uint32, n int) (*Module, error) {
	eng, err := r.engine(ctx, limit)
	if err != nil {
		return nil, err
	}
	cm, err := compile(ctx, eng, module)
	if err == nil {
		err = eng.check(cm)
		if err != nil {
			_ = cm.Close(ctx)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("wasm: load %s: %w", name, err)
	}
	// No filesystem, network, arguments or environment: a module config
	// gives none unless asked. WithName("") lets instances coexist.
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithSysWalltime().
		WithSysNanotime().
		WithStartFunctions()
	if cm.ExportedFunctions()[abi.ExportInit] != nil {
		// A Go reactor's every call traps, silently, without it.
		cfg = cfg.WithStartFunctions(abi.ExportInit)
	}
	m := &Module{
		name:     name,
		log:      r.log.With("function", name),
		eng:      eng,
		compiled: cm,
		config:   cfg,
		limit:    limit,
		idle:     make(chan *instance, n),
		slots:    make(chan struct{}, n),
		done:     make(chan struct{}),
	}
	m.slots <- struct{}{}
	inst, err := m.start(ctx)
	if err != nil {
		_ = cm.Close(ctx)
		return nil, fmt.Errorf("wasm: load %s: %w", name, err)
	}
	m.idle <- inst
	return m, nil
}

// Invoke runs one invocation on an instance of its own. call serves the
// guest's cairn.call: given an operation and its request (msgpack, or the
// raw bytes of OpOutput, OpLog and OpFail; a copy the function may keep)
// it returns the answer, an encoded abi.Response; it is called on the
// invoking goroutine. Invoke notes OpFail's text for the GuestError and
// passes every operation to call. seed seeds the random source the guest reads through WASI
// (derive it from the trigger's id, so that a retry reads the same bytes;
// the Go runtime's own generators are seeded once, when the instance
// starts). ctx bounds the invocation, and the wait for an instance when
// all are busy.
//
// An instance whose memory grew during the invocation past what it had
// when it started (plus growSlack) is closed instead of going back to the
// pool: a WebAssembly memory never shrinks, so a pooled instance would
// keep its peak for as long as the module stays loaded.
//
// The error is a *GuestError when the guest failed the invocation (the
// instance is reused unless it grew), a *CrashError when it crashed, or one that wraps
// ctx.Err() (context.DeadlineExceeded: "timed out after …") when ctx ended
// first; after those the instance is discarded.
func (m *Module) Invoke(ctx context.Context, seed string, call func(op abi.Op, req []byte) []byte) error {
	start := time.Now()
	if ctx.Err() != nil {
		return ended(ctx, start) // and wazero would close the instance
	}
	inst, err := m.acquire(ctx)
	if err != nil {
		return err
	}
	inst.rand.seed(seed)
	inst.stdout.reset(&inst.lines)
	inst.stderr.reset(&inst.lines)
	v := &inst.inv
	v.call = call
	err = inst.handle.CallWithStack(v.with(ctx), inst.stack[:])
	status := int32(inst.stack[0])
	inst.stdout.flush()
	inst.stderr.flush()
	failed, failure, misuse := v.failed, v.failure, v.misuse
	*v = invocation{}
	if misuse != "" {
		m.log.Warn("the function misused the ABI", "problem", misuse)
	}
	switch {
	case err != nil:
	case status == abi.StatusOK:
		m.release(inst)
		return nil
	case status == abi.StatusFailed:
		m.release(inst)
		if !failed {
			failure = "the function failed without saying why"
		}
		return &GuestError{Message: failure}
	default:
		m.discard(inst)
		return &CrashError{Reason: fmt.Sprintf("%s returned %d, which is neither StatusOK (%d) nor StatusFailed (%d)",
			abi.ExportHandle, status, abi.StatusOK, abi.StatusFailed)}
	}
	m.discard(inst)
	return m.failure(ctx, inst, err, start, "")
}

// failure explains an error of a call into an instance: ctx's end, or a
// crash. doing, if set, prefixes a crash's reason.
func (m *Module) failure(ctx context.Context, inst *instance, err error, start time.Time, doing string) error {
	if ctx.Err() != nil {
		return ended(ctx, start)
	}
	inst.stderr.flush() // a last line without its newline
	tail, why := stderrTail(&inst.tail)
	if inst.stderr.why != "" {
		why = inst.stderr.why
	}
	var reason string
	var exit *sys.ExitError
	switch {
	case inst.outOfMemory(m.limit, why+"\n"+tail):
		reason = fmt.Sprintf("out of memory: the instance reached its memory limit of %d pages (%d MiB)", m.limit, m.limit/16)
	case errors.As(err, &exit):
		reason = fmt.Sprintf("exited with code %d", exit.ExitCode())
		if why != "" {
			reason = why + " (" + reason + ")"
		}
	default:
		// A Go guest's panic ends in an unreachable trap after printing.
		reason, _, _ = strings.Cut(err.Error(), "\n")
		reason = "trap: " + reason
		if why != "" {
			reason = why + " (" + reason + ")"
		}
	}
	if doing != "" {
		reason = doing + ": " + reason
	}
	return &CrashError{Reason: reason, Stderr: tail}
}

// ended is the error of an invocation whose context ended: it wraps
// ctx.Err(), context.DeadlineExceeded or context.Canceled.
func ended(ctx context.Context, start time.Time) error {
	elapsed := time.Since(start).Round(time.Millisecond)
	if err := ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("timed out after %v: %w", elapsed, err)
	}
	return fmt.Errorf("cancelled after %v: %w", elapsed, ctx.Err())
}

// outOfMemory tells whether a crashed instance ran out of memory: the Go
// runtime says so on stderr; other guests trap with all memory in use.
func (inst *instance) outOfMemory(limit uint32, stderr string) bool {
	if strings.Contains(stderr, "out of memory") {
		return true
	}
	return inst.mem != nil && uint64(inst.mem.Size()) >= uint64(limit)<<16
}

var errClosed = errors.New("the module is closed")

// acquire takes an idle instance, or starts one if there is room, or
// waits for one of those.
func (m *Module) acquire(ctx context.Context) (*instance, error) {
	select {
	case <-m.done:
		return nil, fmt.Errorf("wasm: %s: %w", m.name, errClosed)
	case inst := <-m.idle:
		return inst, nil
	default:
	}
	start := time.Now()
	select {
	case inst := <-m.idle:
		return inst, nil
	case m.slots <- struct{}{}:
		inst, err := m.start(ctx)
		if err != nil {
			<-m.slots
			return nil, err
		}
		return inst, nil
	case <-m.done:
		return nil, fmt.Errorf("wasm: %s: %w", m.name, errClosed)
	case <-ctx.Done():
		return nil, fmt.Errorf("timed out after %v waiting for an instance (all %d busy): %w",
			time.Since(start).Round(time.Millisecond), cap(m.slots), ctx.Err())
	}
}

// growSlack is how much an instance's memory may grow past its size at
// start and still go back to the pool: a Go guest's heap settles in its
// first invocations, and closing an instance for that would make every
// invocation cold.
const growSlack = 16 << 20

// grown reports whether an instance's memory grew past its start size
// plus growSlack.
func (inst *instance) grown() bool {
	return uint64(inst.mem.Size()) > uint64(inst.initial)+growSlack
}

// release returns a healthy instance to the pool, or closes it if its
// memory grew.
func (m *Module) release(inst *instance) {
	if inst.grown() {
		m.grownClosed.Add(1)
		m.discard(inst)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		inst.close()
		<-m.slots
		return
	}
	m.idle <- inst // never blocks: there are at most cap(idle) instances
}

// discard closes an instance that must not run again.
func (m *Module) discard(inst *instance) {
	inst.close()
	<-m.slots
}

// Close closes the idle instances and the compiled module; instances in
// use are closed when their invocation ends. Invoke fails afterwards. The
// module's share of the memory budget is given back at once (instances
// still running finish within their deadline).
func (m *Module) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.done)
	m.mu.Unlock()
	if m.rt != nil {
		m.rt.unreserve(m.need)
	}
	for {
		select {
		case inst := <-m.idle:
			m.discard(inst)
		default:
			return m.compiled.Close(ctx)
		}
	}
}
