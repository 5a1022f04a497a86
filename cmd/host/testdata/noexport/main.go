//go:build wasip1

// Command noexport is a WebAssembly program that is not a Cairn function:
// it lacks the cairn_handle export, so deploy must refuse it.
package main

func main() {}
