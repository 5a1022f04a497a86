package functions

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Runner runs functions on one node: it watches the registry, loads each
// deployed version, and feeds it from its trigger. Every node's runner runs
// every function; queue deliveries are shared between nodes by JetStream.
type Runner struct {
	cfg      Config
	nc       *nats.Conn
	js       jetstream.JetStream
	views    Views
	comm     Committer
	log      *slog.Logger
	queues   *Queues
	registry *Registry
	// settingsKV is the settings bucket, settings its copy on this node
	// (settingscache.go).
	settingsKV *Settings
	settings   *settingsCache
	keys       *KeyStore // the functions' keys (HTTP triggers)

	ready chan struct{} // closed once Run serves
	// since is when the runner was made: its counters (stats, perFn)
	// count from then, in memory, and a restart starts them again.
	since time.Time
	// ctx is Run's: the functions' goroutines end with it.
	ctx context.Context
	// wg counts every goroutine Run started (triggers, the registry watch,
	// direct invocations, retiring versions); Run returns after them.
	wg sync.WaitGroup

	mu       sync.Mutex
	fns      map[string]*function
	stopping bool // Run is stopping: no new direct invocation starts
	direct   *nats.Subscription
	// statusSub answers HostStatusSubject (hoststatus.go).
	statusSub *nats.Subscription
	// unloaded holds the deployed versions this node could not load.
	unloaded map[string]LoadFailure

	stats Stats
	perFn perFunction // each function's counters, for /metrics and the operators' API
	logs  sync.Map    // function name → *logRing, its latest log lines
}

// NewRunner returns a runner that reads views and commits through comm.
// It starts nothing: Run does.
func NewRunner(nc *nats.Conn, views Views, comm Committer, cfg Config) (*Runner, error) {
	cfg.setDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg, nc: nc, js: js, views: views, comm: comm, log: cfg.Log, fns: map[string]*function{}, settings: newSettingsCache(), unloaded: map[string]LoadFailure{}, ready: make(chan struct{}), since: cfg.Now()}, nil
}

// Queues returns the queue stream (nil before Ready is closed).
func (rn *Runner) Queues() *Queues { return rn.queues }

// Registry returns the registry (nil before Ready is closed).
func (rn *Runner) Registry() *Registry { return rn.registry }

// Keys returns the functions' keys (nil until Ready).
func (rn *Runner) Keys() *KeyStore { return rn.keys }

func (rn *Runner) now() time.Time { return rn.cfg.Now() }

// failpoint kills the process if the configuration names this point,
// alone or followed by ":" and the function reaching it.
func (rn *Runner) failpoint(name, function string) {
	if fp := rn.cfg.Failpoint; fp == "" || (fp != name && fp != name+":"+function) {
		return
	}
	rn.log.Warn("failpoint reached: killing the process", "failpoint", name, "function", function)
	p, _ := os.FindProcess(os.Getpid())
	_ = p.Kill()
	select {} // SIGKILL is not handled; wait for it
}

// Run opens the queue stream and the registry, starts the built-ins, the
// responder of direct requests and every deployed function, closes Ready
// once they are loaded, and serves until ctx ends. Then it stops the
// triggers, lets the deliveries already taken finish (each bounded by its
// function's timeout), closes the sandbox and returns once every goroutine
// it started has exited: nil after ctx ended, or the error that kept it
// from starting (Ready is then never closed). Run is called once.
func (rn *Runner) Run(ctx context.Context) error {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rn.ctx = ctx
	err := rn.start(ctx)
	if err == nil {
		close(rn.ready)
		<-ctx.Done()
	}
	cancel()
	rn.stop()
	if parent.Err() != nil {
		return nil // stopped, perhaps while starting
	}
	return err
}

// Ready is closed once Run serves: the built-ins and the functions
// deployed when it started are loaded.
func (rn *Runner) Ready() <-chan struct{} { return rn.ready }

// start opens what the runner needs and starts its goroutines; it returns
// once the registry's first watch has loaded the deployed functions, or
// with the error that prevented it.
func (rn *Runner) start(ctx context.Context) error {
	var err error
	if rn.queues = rn.cfg.Queues; rn.queues == nil {
		qc := QueueConfig{Replicas: rn.cfg.Replicas, MaxMessages: rn.cfg.QueueMaxMessages, MaxBytes: rn.cfg.QueueMaxBytes, Log: rn.log}
		if rn.queues, err = OpenQueues(ctx, rn.js, rn.cfg.Prefix, qc); err != nil {
			return err
		}
	}
	if got, want := rn.queues.Max(), rn.cfg.QueueMaxMessages; got > want {
		rn.log.Warn("a queue holds more messages than the node's cap: the cap stays at that queue's length until it drains (a lower cap would make the server delete its oldest messages)",
			"queueMaxMessages", want, "cap", got)
	}
	if rn.registry = rn.cfg.Registry; rn.registry == nil {
		if rn.registry, err = OpenRegistry(ctx, rn.js, rn.cfg.Prefix, rn.cfg.Replicas); err != nil {
			return err
		}
	}
	if rn.settingsKV, err = OpenSettings(ctx, rn.js, rn.cfg.Prefix, rn.cfg.Replicas, rn.cfg.SecretsKey); err != nil {
		return err
	}
	// The settings before any function: its first invocation reads them.
	settings := rn.settingsKV
	if err := rn.follow(ctx, "settings", func(ctx context.Context, ready func()) error {
		return settings.watch(ctx, func(fn string, rec *settingsRecord, recErr error, rev uint64) {
			rn.settings.apply(rn, fn, rec, recErr, rev, settings.seal)
		}, ready)
	}); err != nil {
		return err
	}
	if rn.keys, err = OpenKeyStore(ctx, rn.js, rn.cfg.Prefix, rn.cfg.Replicas); err != nil {
		return err
	}
	if err := rn.follow(ctx, "keys", rn.keys.Watch); err != nil {
		return err
	}
	if !rn.cfg.NoBuiltins {
		m := ArchiveManifest()
		rn.install(&m, NativeFunc(Archive))
		if rn.cfg.Values.Store != nil {
			scan, sweep := ValueScanManifest(rn.cfg.Values.Every), ValueSweepManifest()
			rn.install(&scan, NativeFunc(rn.scanValues))
			rn.install(&sweep, NativeFunc(rn.sweepValue))
		}
	}
	if err := rn.serveDirect(); err != nil {
		return err
	}
	if err := rn.serveStatus(); err != nil {
		return err
	}
	return rn.follow(ctx, "registry", func(ctx context.Context, ready func()) error {
		return rn.registry.Watch(ctx, rn.deployed, ready)
	})
}

// follow runs watch, a watch of a key-value bucket that calls ready once
// it has delivered the bucket's present state, until ctx ends, watching
// again a second after a failure (a new watch delivers everything
// again). It returns once the first watch has called ready (nil), or
// with the error that ended it before: the runner cannot start without
// the registry, the settings or the keys. A later failure is logged.
func (rn *Runner) follow(ctx context.Context, what string, watch func(ctx context.Context, ready func()) error) error {
	first := make(chan error, 1)
	rn.wg.Add(1)
	go func() {
		defer rn.wg.Done()
		started := false // only this goroutine reads and writes it
		for {
			err := watch(ctx, func() {
				if !started {
					started = true
					first <- nil
				}
			})
			if ctx.Err() != nil {
				return
			}
			if !started {
				first <- fmt.Errorf("functions: %s watch: %w", what, err)
				return
			}
			rn.log.Warn("functions: "+what+" watch failed; watching again", "err", err)
			if !retryWait(ctx, time.Second) {
				return
			}
		}
	}()
	select {
	case err := <-first:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop, once ctx has ended, stops the functions, waits for every goroutine
// Run started and closes the sandbox.
func (rn *Runner) stop() {
	rn.mu.Lock()
	rn.stopping = true
	sub, statusSub := rn.direct, rn.statusSub
	fns := make([]*function, 0, len(rn.fns))
	for _, f := range rn.fns {
		fns = append(fns, f)
	}
	rn.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
	if statusSub != nil {
		_ = statusSub.Unsubscribe()
	}
	for _, f := range fns {
		f.stop()
	}
	rn.wg.Wait()
	if rn.cfg.Sandbox != nil {
		rn.cfg.Sandbox.Close(context.Background())
	}
}

// Register runs a native function on this node, as if deployed: from its
// trigger, with the same delivery rules. Programs that embed a runner use it
// for functions written in Go, once Ready is closed; a deployed function of
// the same name replaces it.
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

// Version returns the version of a function this node runs (0 for a
// native one), and whether it runs it.
func (rn *Runner) Version(name string) (int, bool) {
	m, ok := rn.Manifest(name)
	return m.Version, ok
}

// Manifest returns the manifest of the version of a function this node
// runs, and whether it runs it.
func (rn *Runner) Manifest(name string) (Manifest, bool) {
	if v := rn.current(name); v != nil {
		return v.m, true
	}
	return Manifest{}, false
}

// Running returns the manifests of the functions this node runs, by name:
// deployed ones at the version it loaded, built-in and native ones with
// Manifest.Builtin set. It costs a copy of each under the runner's lock.
func (rn *Runner) Running() []Manifest {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.runningLocked()
}

// runningLocked is Running; rn.mu must be held.
func (rn *Runner) runningLocked() []Manifest {
	out := make([]Manifest, 0, len(rn.fns))
	for _, f := range rn.fns {
		if v := f.cur.Load(); v != nil {
			out = append(out, v.m)
		}
	}
	slices.SortFunc(out, func(a, b Manifest) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Since is when the runner was made: its counters (Stats) count from
// then.
func (rn *Runner) Since() time.Time { return rn.since }

// Loaded returns how many functions this node runs, built-ins included.
func (rn *Runner) Loaded() int {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return len(rn.fns)
}

// LoadFailure is a deployed version this node does not run, and why: its
// module did not load (a memory budget it does not fit, a module that
// fails to start). The node runs the version it ran before, if any.
type LoadFailure struct {
	Version int    `json:"version"`
	Error   string `json:"error"`
}

// LoadFailure returns why this node did not load the deployed version of
// a function, if it did not.
func (rn *Runner) LoadFailure(name string) (LoadFailure, bool) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	f, ok := rn.unloaded[name]
	return f, ok
}

// noteLoad records the outcome of loading a version (err nil: loaded, or
// undeployed).
func (rn *Runner) noteLoad(name string, version int, err error) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if err == nil {
		delete(rn.unloaded, name)
		return
	}
	rn.unloaded[name] = LoadFailure{Version: version, Error: err.Error()}
}

func (rn *Runner) current(name string) *version {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if f := rn.fns[name]; f != nil {
		return f.cur.Load()
	}
	return nil
}
