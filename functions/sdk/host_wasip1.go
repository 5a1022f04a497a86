//go:build wasip1

package sdk

import "unsafe"

// The host's functions (see functions/abi for their contract).

//go:wasmimport cairn call
func hostCall(op int32, reqPtr unsafe.Pointer, reqLen uint32, outPtr unsafe.Pointer, outCap uint32) int32

//go:wasmimport cairn take
func hostTake(outPtr unsafe.Pointer, outCap uint32) int32

// cairnHandle is the export the host calls once per invocation.
//
//go:wasmexport cairn_handle
func cairnHandle() int32 { return handle() }

func call(op int32, req, out []byte) int32 {
	return hostCall(op, unsafe.Pointer(unsafe.SliceData(req)), uint32(len(req)),
		unsafe.Pointer(unsafe.SliceData(out)), uint32(cap(out)))
}

func take(out []byte) int32 {
	return hostTake(unsafe.Pointer(unsafe.SliceData(out)), uint32(cap(out)))
}
