package functions

import (
	"context"
	"fmt"
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
