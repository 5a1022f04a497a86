//go:build !wasip1

package sdk

// Outside a WebAssembly guest there is no runner to call: the package
// compiles (for vet and type checking) but its calls panic.

const notGuest = "functions/sdk: a function runs only as a WebAssembly guest (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared)"

func call(op int32, req, out []byte) int32 { panic(notGuest) }

func take(out []byte) int32 { panic(notGuest) }
