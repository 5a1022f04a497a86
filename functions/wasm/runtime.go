package wasm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/cairn-dev/cairn/functions/abi"
)

// DefaultMemoryLimitPages is the memory cap of an instance when neither
// the Config nor the LoadOptions set one: 2048 pages of 64 KiB, 128 MiB.
const DefaultMemoryLimitPages = 2048

// DefaultMemoryBudget is the memory a runtime's modules may reserve
// together when the Config sets no budget: 2 GiB, four functions of the
// default manifest (128 MiB × 4 instances).
const DefaultMemoryBudget = 2 << 30

// Config configures a Runtime.
type Config struct {
	// CacheDir holds compiled modules across restarts (wazero's compilation
	// cache); "" keeps them in memory only.
	CacheDir string
	// MemoryLimitPages is the default cap of an instance's memory, in
	// 64 KiB pages; 0 is DefaultMemoryLimitPages.
	MemoryLimitPages uint32
	// MemoryBudget bounds, in bytes, the sum over loaded modules of their
	// worst case: memory cap × instances. A Load that would pass it is
	// refused with a *BudgetError; a Close gives the module's share back.
	// 0 is DefaultMemoryBudget.
	MemoryBudget uint64
	// Log receives the lines guests write to stdout and stderr (lines sent
	// with abi.OpLog go to the Invoke's call function instead);
	// slog.Default() if nil.
	Log *slog.Logger
}

// Runtime compiles and runs modules. It is safe for concurrent use.
type Runtime struct {
	cfg   Config
	log   *slog.Logger
	cache wazero.CompilationCache

	mu     sync.Mutex
	closed bool
	// reserved is the worst case of the loaded modules, in bytes (at most
	// cfg.MemoryBudget).
	reserved uint64
	// engines holds one wazero runtime per memory cap (wazero sets the cap
	// per runtime); all share the compilation cache, so a module compiled
	// for one cap is not compiled again for another.
	engines map[uint32]*capRuntime
}

// capRuntime is a wazero runtime with WASI and the host module instantiated.
type capRuntime struct {
	rt   wazero.Runtime
	wasi map[string]api.FunctionDefinition // WASI's functions by name
}

// NewRuntime prepares a runtime. It fails if the cache directory cannot be
// created.
func NewRuntime(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.MemoryLimitPages == 0 {
		cfg.MemoryLimitPages = DefaultMemoryLimitPages
	}
	if cfg.MemoryLimitPages > 65536 {
		return nil, fmt.Errorf("wasm: memory limit of %d pages is over the 65536 pages (4 GiB) of a 32-bit memory", cfg.MemoryLimitPages)
	}
	if cfg.MemoryBudget == 0 {
		cfg.MemoryBudget = DefaultMemoryBudget
	}
	r := &Runtime{cfg: cfg, log: cfg.Log, engines: map[uint32]*capRuntime{}}
	if r.log == nil {
		r.log = slog.Default()
	}
	if cfg.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("wasm: compilation cache %s: %w", cfg.CacheDir, err)
		}
		r.cache = c
	} else {
		r.cache = wazero.NewCompilationCache()
	}
	if _, err := r.engine(ctx, cfg.MemoryLimitPages); err != nil {
		_ = r.cache.Close(ctx)
		return nil, err
	}
	return r, nil
}

// engine returns the wazero runtime for a memory cap, making it on first
// use.
func (r *Runtime) engine(ctx context.Context, limit uint32) (*capRuntime, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("wasm: the runtime is closed")
	}
	if e := r.engines[limit]; e != nil {
		return e, nil
	}
	// NewRuntimeConfig is the compiler where wazero supports it and the
	// interpreter elsewhere. Closing on context done is what stops a
	// runaway guest; without it one froze the whole process at the next GC.
	rc := wazero.NewRuntimeConfig().
		WithCompilationCache(r.cache).
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(limit)
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	_, err := wasi_snapshot_preview1.Instantiate(ctx, rt)
	if err == nil {
		_, err = hostModule(rt).Instantiate(ctx)
	}
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("wasm: prepare the runtime: %w", err)
	}
	e := &capRuntime{rt: rt, wasi: map[string]api.FunctionDefinition{}}
	for name, d := range rt.Module(abi.WASIModule).ExportedFunctionDefinitions() {
		e.wasi[name] = d
	}
	r.engines[limit] = e
	return e, nil
}

// Close closes the runtime and every module loaded from it.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	var errs []error
	for _, e := range r.engines {
		errs = append(errs, e.rt.Close(ctx))
	}
	errs = append(errs, r.cache.Close(ctx))
	return errors.Join(errs...)
}

// The signatures of the host module's functions.
var (
	i32           = api.ValueTypeI32
	callParams    = []api.ValueType{i32, i32, i32, i32, i32}
	takeParams    = []api.ValueType{i32, i32}
	handleResults = []api.ValueType{i32}
)

// hostModule builds the module "cairn". Its functions find the invocation
// in their context (see invocation) and read and write the guest's memory
// with bounds checks; a misuse answers -1.
func hostModule(rt wazero.Runtime) wazero.HostModuleBuilder {
	b := rt.NewHostModuleBuilder(abi.Module)
	b.NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(runnerCall), callParams, handleResults).
		WithParameterNames("op", "req_ptr", "req_len", "out_ptr", "out_cap").
		Export(abi.ImportCall)
	b.NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(runnerTake), takeParams, handleResults).
		WithParameterNames("out_ptr", "out_cap").
		Export(abi.ImportTake)
	return b
}
