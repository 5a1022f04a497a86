//go:build wasip1

package sdk

import "unsafe"

// The imports that carry the runner calls (see functions/abi for their
// contract).

//go:wasmimport cairn call
func runnerCall(op int32, reqPtr unsafe.Pointer, reqLen uint32, outPtr unsafe.Pointer, outCap uint32) int32

//go:wasmimport cairn take
func runnerTake(outPtr unsafe.Pointer, outCap uint32) int32

// cairnHandle is the export the runner calls once per invocation.
//
//go:wasmexport cairn_handle
func cairnHandle() int32 { return handle() }

func call(op int32, req, out []byte) int32 {
	return runnerCall(op, unsafe.Pointer(unsafe.SliceData(req)), uint32(len(req)),
		unsafe.Pointer(unsafe.SliceData(out)), uint32(cap(out)))
}

func take(out []byte) int32 {
	return runnerTake(unsafe.Pointer(unsafe.SliceData(out)), uint32(cap(out)))
}
