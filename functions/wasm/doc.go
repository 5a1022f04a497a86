// Package wasm is the function sandbox: it runs functions compiled to
// WebAssembly (see functions/abi for the contract, functions/sdk for the Go
// side) with wazero, each invocation on an instance that no other
// invocation uses at the same time.
//
// # Steps
//
//  1. NewRuntime prepares wazero: the compiler (the interpreter where the
//     compiler is unsupported), a compilation cache, WASI without a
//     filesystem or network, and the module "cairn" of host functions
//     (wazero's term) that serve the guest's runner calls.
//  2. Validate compiles a module and checks its imports and exports against
//     the ABI; a deploy calls it so that a bad module is refused with a
//     sentence saying what is wrong.
//  3. Load compiles (from the cache when it can) and starts one instance,
//     so that a module whose initialisation fails is refused at once.
//  4. Invoke takes an idle instance from the module's pool (starting one
//     if the pool has room, waiting otherwise), points it at the
//     invocation's call function, reseeds its random source, and calls
//     cairn_handle. The instance goes back to the pool after a success or
//     a failure the guest reported (*GuestError), unless its memory grew
//     more than 16 MiB past its size at start (a WebAssembly memory never
//     shrinks: the pool would keep the peak); after anything else — a
//     panic, a trap, running out of memory, the deadline — it is closed
//     and never reused.
//  5. Close closes the idle instances at once and the busy ones as their
//     invocations end, and gives back the module's share of the budget.
//
// # Memory budget
//
// A runtime has a MemoryBudget (2 GiB by default). Load reserves a
// module's worst case, its memory cap times its instances, and refuses
// with a *BudgetError a module that does not fit in what is left; Close
// gives it back. The budget counts what instances may reach, not what
// they hold: the Go runtime's own heap and wazero's compiled code are
// outside it.
//
// # Costs and limits
//
// A warm invocation of the echo test guest (trigger, reply, a log line)
// costs about 50 µs on 2 cores (BenchmarkInvokeWarm); a cold compile of a
// Go module takes seconds, a reload from the on-disk cache about a tenth
// of a second. Runaway guests are stopped at the context's deadline by
// wazero's close-on-context-done, which is not free: the compiler checks
// at every loop header with a call out of the compiled code, and a Go
// guest has a loop in every function, so CPU-bound guest code pays for
// it (it is still mandatory: a guest that could not be stopped froze the
// whole process at the next GC). Memory is capped per instance; wazero sets the cap per runtime, so
// the sandbox keeps one wazero runtime per distinct cap, all sharing one
// compilation cache.
//
// WASI gives clocks (the real ones), a random source reseeded from each
// invocation's seed, and stdout and stderr, whose lines go to the log
// (at most 100 lines of 4 KiB per invocation). Sleeping is bounded by the
// invocation's context. There is no filesystem, network, argument or
// environment variable.
package wasm
