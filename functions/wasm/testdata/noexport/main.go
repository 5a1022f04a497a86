// Command noexport is a test guest built as a plain WASI command: it has
// no cairn_handle export, and Validate must refuse it.
package main

func main() { println("hello") }
