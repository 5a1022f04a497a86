// Command badimport is a test guest that imports a function the ABI does
// not provide: Validate must refuse it.
package main

//go:wasmimport env foo
func foo() int32

//go:wasmexport cairn_handle
func handle() int32 { return foo() }

func main() {}
