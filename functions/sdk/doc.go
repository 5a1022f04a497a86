// Package sdk is the Go side of a Cairn function: a program compiled to
// WebAssembly that the function runner runs on each trigger (a queue
// message, a committed change, a timer tick, a direct request).
//
// A function is a package main that registers its handler in an init
// function and has an empty main:
//
//	package main
//
//	import "github.com/cairn-dev/cairn/functions/sdk"
//
//	func init() { sdk.Handle(run) }
//
//	func main() {}
//
//	func run(c *sdk.Context) error {
//		t := c.Trigger()
//		return c.Reply(t.Body)
//	}
//
// built as a WebAssembly reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o fn.wasm .
//
// With -buildmode=c-shared the module's _initialize export (which the sandbox
// runs once per instance) initialises the Go runtime and runs the package
// init functions, but main.main is never called: registering the handler
// in main does not work, and such a module fails every invocation with a
// message saying so.
//
// # Invocations
//
// The runner calls the cairn_handle export once per invocation, one at a
// time per instance (it runs several instances for concurrency), and
// reuses an instance after the handler returns, with or without an error.
// Package-level state therefore survives between invocations of one
// instance, but not across instances: do not rely on it.
//
// Writes and enqueued messages are collected by the runner and committed
// together only if the handler returns nil; a returned error discards them
// and fails the invocation with the error's text (the trigger is then
// retried, and poisoned after its retries). A panic, a call of os.Exit, a
// trap, running out of memory or past the deadline crashes the instance:
// the invocation fails the same way and the runner starts a fresh instance.
//
// Errors of the store (a conflict, a missing table, a refused write) are
// *engine.Error values, so a handler can test their codes:
//
//	if errors.Is(err, &engine.Error{Code: engine.CodeEntityAlreadyExists}) { … }
//
// The package compiles on other platforms so that code using it can be
// vetted and type-checked, but its calls panic outside a WebAssembly guest.
package sdk
