package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/abi"
	"github.com/cairn-dev/cairn/functions/wasm"
)

// sandbox runs deployed modules in the WebAssembly runtime, with the
// compilation cache under the data directory and a memory budget in bytes
// (0: the runtime's default).
type sandbox struct{ rt *wasm.Runtime }

func newSandbox(ctx context.Context, dataDir string, budget uint64, log *slog.Logger) (functions.Sandbox, error) {
	rt, err := wasm.NewRuntime(ctx, wasm.Config{CacheDir: filepath.Join(dataDir, "wasm-cache"), MemoryBudget: budget, Log: log})
	if err != nil {
		return nil, fmt.Errorf("host: sandbox: %w", err)
	}
	return sandbox{rt}, nil
}

func (s sandbox) Load(ctx context.Context, module []byte, m functions.Manifest) (functions.Handler, error) {
	mod, err := s.rt.Load(ctx, module, wasm.LoadOptions{
		Name:             m.Name,
		MemoryLimitPages: uint32(m.MemoryMB) * 16, // 64 KiB pages
		MaxInstances:     m.Concurrency,
	})
	if err != nil {
		return nil, err
	}
	return wasmHandler{mod}, nil
}

func (s sandbox) Close(ctx context.Context) error { return s.rt.Close(ctx) }

// wasmHandler runs invocations on a module's instances.
type wasmHandler struct{ mod *wasm.Module }

func (w wasmHandler) Invoke(ctx context.Context, inv *functions.Invocation) error {
	err := w.mod.Invoke(ctx, inv.Trigger().ID, func(op abi.Op, req []byte) []byte { return inv.Call(ctx, op, req) })
	var ge *wasm.GuestError
	if errors.As(err, &ge) && ge.Message == "" && inv.Failure() != "" {
		return errors.New(inv.Failure())
	}
	return err
}

func (w wasmHandler) Close(ctx context.Context) error { return w.mod.Close(ctx) }
