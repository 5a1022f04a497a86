package wasm

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/cairn-dev/cairn/functions/abi"
)

// Validate compiles module and checks it against the ABI: it imports only
// cairn.call, cairn.take and functions of WASI preview 1 that the sandbox
// gives, with their signatures; it exports cairn_handle () -> i32 and its
// memory; and it is a reactor (no _start without _initialize). The error
// is a sentence for the module's author. It compiles the whole module
// (about a second for a Go guest): with a CacheDir the code is kept on
// disk and a Load that follows reads it back; without one it is dropped
// unless a loaded module shares it.
func (r *Runtime) Validate(ctx context.Context, module []byte) error {
	e, err := r.engine(ctx, r.cfg.MemoryLimitPages)
	if err != nil {
		return err
	}
	cm, err := compile(ctx, e, module)
	if err != nil {
		return err
	}
	defer cm.Close(ctx)
	return e.check(cm)
}

// compile compiles module, explaining a failure.
func compile(ctx context.Context, e *capRuntime, module []byte) (wazero.CompiledModule, error) {
	cm, err := e.rt.CompileModule(ctx, module)
	switch {
	case err == nil:
		return cm, nil
	case !bytes.HasPrefix(module, []byte("\x00asm")):
		return nil, fmt.Errorf("not a WebAssembly module: %v", err)
	default:
		return nil, fmt.Errorf("invalid WebAssembly module: %v", err)
	}
}

// check checks a compiled module's imports and exports.
func (e *capRuntime) check(cm wazero.CompiledModule) error {
	for _, d := range cm.ImportedFunctions() {
		mod, name, _ := d.Import()
		var want api.FunctionDefinition
		switch mod {
		case abi.Module:
			switch name {
			case abi.ImportCall:
				if !sameSignature(d, callParams, handleResults) {
					return fmt.Errorf("module imports cairn.call with signature %s, but the ABI (version %d) defines %s",
						signature(d.ParamTypes(), d.ResultTypes()), abi.Version, signature(callParams, handleResults))
				}
				continue
			case abi.ImportTake:
				if !sameSignature(d, takeParams, handleResults) {
					return fmt.Errorf("module imports cairn.take with signature %s, but the ABI (version %d) defines %s",
						signature(d.ParamTypes(), d.ResultTypes()), abi.Version, signature(takeParams, handleResults))
				}
				continue
			}
		case abi.WASIModule:
			if want = e.wasi[name]; want == nil {
				return fmt.Errorf("module imports %q.%q, which the sandbox's WASI preview 1 does not provide", mod, name)
			}
			if !sameSignature(d, want.ParamTypes(), want.ResultTypes()) {
				return fmt.Errorf("module imports %s.%s with signature %s, but WASI preview 1 defines %s",
					mod, name, signature(d.ParamTypes(), d.ResultTypes()), signature(want.ParamTypes(), want.ResultTypes()))
			}
			continue
		}
		return fmt.Errorf("module imports %q.%q, which the function ABI does not provide (allowed: %s.%s, %s.%s, %s.*)",
			mod, name, abi.Module, abi.ImportCall, abi.Module, abi.ImportTake, abi.WASIModule)
	}
	for _, d := range cm.ImportedMemories() {
		mod, name, _ := d.Import()
		return fmt.Errorf("module imports a memory (%q.%q), which the function ABI does not provide: a module defines and exports its own memory", mod, name)
	}
	exports := cm.ExportedFunctions()
	h := exports[abi.ExportHandle]
	if h == nil {
		hint := ""
		if exports["_start"] != nil {
			hint = " (this module is a WASI command: it exports _start)"
		}
		return fmt.Errorf("module does not export %s: build with //go:wasmexport %s (functions/sdk does this) and -buildmode=c-shared%s",
			abi.ExportHandle, abi.ExportHandle, hint)
	}
	if !sameSignature(h, nil, handleResults) {
		return fmt.Errorf("module exports %s with signature %s, but the ABI (version %d) defines %s",
			abi.ExportHandle, signature(h.ParamTypes(), h.ResultTypes()), abi.Version, signature(nil, handleResults))
	}
	if init := exports[abi.ExportInit]; init != nil {
		if !sameSignature(init, nil, nil) {
			return fmt.Errorf("module exports %s with signature %s; it must take and return nothing",
				abi.ExportInit, signature(init.ParamTypes(), init.ResultTypes()))
		}
	} else if exports["_start"] != nil {
		return fmt.Errorf("module is a WASI command (it exports _start, not %s): build it as a reactor with -buildmode=c-shared", abi.ExportInit)
	}
	if cm.ExportedMemories()[abi.ExportMemory] == nil {
		return fmt.Errorf("module does not export its memory as %q", abi.ExportMemory)
	}
	return nil
}

func sameSignature(d api.FunctionDefinition, params, results []api.ValueType) bool {
	return slices.Equal(d.ParamTypes(), params) && slices.Equal(d.ResultTypes(), results)
}

// signature writes a signature as "(i32, i32) -> i32".
func signature(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return strings.Join(s, ", ")
	}
	res := names(results)
	if len(results) != 1 {
		res = "(" + res + ")"
	}
	return "(" + names(params) + ") -> " + res
}
