package functions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/commit"
	"github.com/cairn-dev/cairn/functions/abi"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/projections"
)

// Handler runs invocations of one version of a function: a WebAssembly
// module in the sandbox, or native Go (the built-ins).
type Handler interface {
	// Invoke runs the function on inv. ctx carries the invocation's
	// deadline. An error fails the invocation and discards what it
	// collected.
	Invoke(ctx context.Context, inv *Invocation) error
	// Close releases the handler once no invocation uses it.
	Close(ctx context.Context) error
}

// NativeFunc is a function written in Go, run in the node's process. It
// must return when ctx ends; a panic fails the invocation.
type NativeFunc func(ctx context.Context, inv *Invocation) error

// Invoke implements Handler.
func (f NativeFunc) Invoke(ctx context.Context, inv *Invocation) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return f(ctx, inv)
}

// Close implements Handler.
func (NativeFunc) Close(context.Context) error { return nil }

// Sandbox loads deployed modules: functions/wasm behind an adapter (see
// cmd/internal/node). Keeping it an interface keeps the delivery machinery
// independent of the WebAssembly runtime.
type Sandbox interface {
	// Load prepares a module to run with m's limits (memory, concurrency).
	Load(ctx context.Context, module []byte, m Manifest) (Handler, error)
	Close(ctx context.Context) error
}

// Config configures the runner.
type Config struct {
	// Prefix is the first token of subjects and the base of stream names.
	Prefix   string
	Replicas int
	// Sandbox runs deployed modules; nil: only native functions run.
	Sandbox Sandbox
	// NoBuiltins leaves the built-in functions (archive) off.
	NoBuiltins bool
	// Failpoint, when it names a point in the code, kills the process with
	// SIGKILL when it is reached: how crash tests stop a node at an exact
	// step. "functions.invoke": as an invocation starts;
	// "functions.between-commits": after the first partition's commit of an
	// invocation that writes several.
	Failpoint string
	Log       *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Runner runs functions on one node: it watches the registry, loads each
// deployed version, and feeds it from its trigger. Every node's runner runs
// every function; queue deliveries are shared between nodes by JetStream.
type Runner struct {
	cfg      Config
	nc       *nats.Conn
	js       jetstream.JetStream
	views    *projections.Views
	comm     *commit.Committer
	log      *slog.Logger
	j        *journal.Journal
	queues   *Queues
	registry *Registry

	mu  sync.Mutex
	fns map[string]*function
	wg  sync.WaitGroup
	ctx context.Context

	stats Stats
}

// Stats counts a runner's invocations.
type Stats struct {
	Invocations atomic.Uint64 // runs of a function, retries included
	Failures    atomic.Uint64 // runs that failed
	Poisoned    atomic.Uint64 // messages moved to a poison queue
}

// NewRunner returns a runner; Start starts it.
func NewRunner(nc *nats.Conn, j *journal.Journal, views *projections.Views, comm *commit.Committer, cfg Config) (*Runner, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = "cairn"
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg, nc: nc, js: js, j: j, views: views, comm: comm, log: cfg.Log, fns: map[string]*function{}}, nil
}

// WriteMetrics writes the runner's counters in the Prometheus text
// format (appended to /metrics).
func (rn *Runner) WriteMetrics(w io.Writer) {
	rn.mu.Lock()
	loaded := len(rn.fns)
	rn.mu.Unlock()
	for _, m := range []struct {
		name, help, kind string
		v                uint64
	}{
		{"cairn_functions_loaded", "Functions this node runs (built-ins included).", "gauge", uint64(loaded)},
		{"cairn_function_invocations_total", "Invocations run by this node, retries included.", "counter", rn.stats.Invocations.Load()},
		{"cairn_function_failures_total", "Invocations that failed (error, crash, timeout, commit).", "counter", rn.stats.Failures.Load()},
		{"cairn_function_poisoned_total", "Messages this node moved to a poison queue.", "counter", rn.stats.Poisoned.Load()},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", m.name, m.help, m.name, m.kind, m.name, m.v)
	}
}

// Stats returns the runner's counters.
func (rn *Runner) Stats() *Stats { return &rn.stats }

// Queues returns the queue stream (nil before Start).
func (rn *Runner) Queues() *Queues { return rn.queues }

// Registry returns the registry (nil before Start).
func (rn *Runner) Registry() *Registry { return rn.registry }

func (rn *Runner) now() time.Time { return rn.cfg.Now() }

// failpoint kills the process if the configuration names this point.
func (rn *Runner) failpoint(name string) {
	if rn.cfg.Failpoint != name {
		return
	}
	rn.log.Warn("failpoint reached: killing the process", "failpoint", name)
	p, _ := os.FindProcess(os.Getpid())
	_ = p.Kill()
	select {} // SIGKILL is not handled; wait for it
}

// Start opens the queue stream and the registry, starts the sandbox, the
// built-ins and every deployed function, and returns once they are
// loaded. The functions run until ctx ends; then call Wait.
func (rn *Runner) Start(ctx context.Context) error {
	rn.ctx = ctx
	var err error
	if rn.queues, err = OpenQueues(ctx, rn.js, rn.cfg.Prefix, rn.cfg.Replicas); err != nil {
		return err
	}
	if rn.registry, err = OpenRegistry(ctx, rn.js, rn.cfg.Prefix, rn.cfg.Replicas); err != nil {
		return err
	}
	if !rn.cfg.NoBuiltins {
		m := ArchiveManifest()
		rn.install(&m, NativeFunc(Archive))
	}
	if err := rn.serveDirect(); err != nil {
		return err
	}
	ready := make(chan struct{})
	rn.wg.Add(1)
	go func() {
		defer rn.wg.Done()
		for {
			err := rn.registry.Watch(ctx, rn.deployed, func() { close(ready) })
			if ctx.Err() != nil {
				return
			}
			rn.log.Warn("functions: registry watch failed; watching again", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			ready = make(chan struct{}) // closed by the next watch
		}
	}()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Register runs a native function on this node, as if deployed: from its
// trigger, with the same delivery rules. Programs that embed a runner use it
// for functions written in Go; a deployed function of the same name
// replaces it.
func (rn *Runner) Register(m Manifest, fn Handler) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if m.Builtin == "" {
		m.Builtin = "native"
	}
	rn.install(&m, fn)
	return nil
}

// Wait waits, after ctx ended, for the functions to stop and releases the
// sandbox.
func (rn *Runner) Wait() {
	rn.mu.Lock()
	fns := make([]*function, 0, len(rn.fns))
	for _, f := range rn.fns {
		fns = append(fns, f)
	}
	rn.mu.Unlock()
	for _, f := range fns {
		f.stop()
	}
	rn.wg.Wait()
	if rn.cfg.Sandbox != nil {
		rn.cfg.Sandbox.Close(context.Background())
	}
}

// deployed reacts to a registry change: load the new version, or stop an
// undeployed function.
func (rn *Runner) deployed(name string, m *Manifest) {
	if m == nil {
		rn.mu.Lock()
		f := rn.fns[name]
		delete(rn.fns, name)
		rn.mu.Unlock()
		if f != nil {
			f.stop()
			rn.dropConsumer(f.cur.Load().m)
			rn.log.Info("function undeployed", "function", name)
		}
		return
	}
	if err := m.Validate(); err != nil {
		rn.log.Error("function not loaded: bad manifest", "function", name, "err", err)
		return
	}
	if cur := rn.current(name); cur != nil && cur.m.Version == m.Version && cur.m.Digest == m.Digest && cur.m.Builtin == "" {
		return
	}
	start := time.Now()
	module, err := rn.registry.Module(rn.ctx, *m)
	if err != nil {
		rn.log.Error("function not loaded", "function", name, "version", m.Version, "err", err)
		return
	}
	if rn.cfg.Sandbox == nil {
		rn.log.Error("function not loaded: this node runs no sandbox", "function", name)
		return
	}
	handler, err := rn.cfg.Sandbox.Load(rn.ctx, module, *m)
	if err != nil {
		rn.log.Error("function not loaded", "function", name, "version", m.Version, "err", err)
		return
	}
	rn.install(m, handler)
	rn.log.Info("function loaded", "function", name, "version", m.Version, "trigger", m.Trigger.Kind(), "elapsed", time.Since(start).Round(time.Millisecond))
}

// Version returns the version of a function this node runs (0 for a
// native one), and whether it runs it.
func (rn *Runner) Version(name string) (int, bool) {
	if v := rn.current(name); v != nil {
		return v.m.Version, true
	}
	return 0, false
}

func (rn *Runner) current(name string) *version {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if f := rn.fns[name]; f != nil {
		return f.cur.Load()
	}
	return nil
}

// install makes a version current: in place when its trigger and delivery
// settings are the running ones (in-flight invocations finish on the old
// version, none is lost or run twice), else by restarting the trigger.
func (rn *Runner) install(m *Manifest, handler Handler) {
	v := &version{m: *m, handler: handler}
	rn.mu.Lock()
	f := rn.fns[m.Name]
	if f != nil && f.sameFeed(m) {
		old := f.cur.Swap(v)
		rn.mu.Unlock()
		old.retire()
		return
	}
	nf := &function{rn: rn, name: m.Name}
	nf.cur.Store(v)
	rn.fns[m.Name] = nf
	rn.mu.Unlock()
	if f != nil {
		f.stop()
		if old := f.cur.Load().m; old.Trigger != m.Trigger {
			rn.dropConsumer(old)
		}
	}
	nf.start()
}

// submit runs a command through the committer and waits for its reply.
func (rn *Runner) submit(ctx context.Context, cmd *engine.Command) *engine.Reply {
	ch := make(chan *engine.Reply, 1)
	rn.comm.Submit(cmd, func(r *engine.Reply) { ch <- r })
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return &engine.Reply{Error: engine.Errorf(engine.CodeOperationTimedOut, "the commit did not finish: %v", ctx.Err())}
	}
}

// maxConflictRuns bounds how often one delivery runs a function whose
// commit keeps conflicting with other writers.
const maxConflictRuns = 3

// run invokes a function for a trigger and commits what it collected. A
// commit that conflicts with a concurrent writer runs the function again
// (at most maxConflictRuns times) after a short pause.
func (rn *Runner) run(ctx context.Context, v *version, trig abi.Trigger) (*Invocation, error) {
	for n := 1; ; n++ {
		rn.stats.Invocations.Add(1)
		inv := &Invocation{runner: rn, trigger: trig}
		rn.failpoint("functions.invoke")
		ictx, cancel := context.WithTimeout(ctx, v.m.Timeout.D())
		err := v.handler.Invoke(ictx, inv)
		cancel()
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err = inv.commit(cctx)
			cancel()
		}
		if err == nil {
			return inv, nil
		}
		rn.stats.Failures.Add(1)
		var ce *ConflictError
		if !errors.As(err, &ce) || n >= maxConflictRuns {
			return inv, err
		}
		select {
		case <-ctx.Done():
			return inv, err
		case <-time.After(time.Duration(n*n) * 20 * time.Millisecond):
		}
	}
}
