package wasm

// GuestError is an invocation that the guest failed: cairn_handle returned
// abi.StatusFailed, and Message is the text it sent with abi.OpFail. The
// instance is reused.
type GuestError struct {
	Message string
}

func (e *GuestError) Error() string { return e.Message }

// CrashError is an invocation that ended without cairn_handle returning: a
// panic or exit of the guest, a trap, running out of memory. The instance
// is discarded.
type CrashError struct {
	// Reason says what happened, in a line: "panic: …", "out of memory …",
	// "trap: …", "exited with code …".
	Reason string
	// Stderr is the tail (at most 1 KiB) of what the guest wrote to stderr
	// during the invocation.
	Stderr string
}

// Error is the reason only: the stderr lines are in the node's log, and the
// error travels into poison messages, where a goroutine dump would bury it.
func (e *CrashError) Error() string { return "the function crashed: " + e.Reason }
