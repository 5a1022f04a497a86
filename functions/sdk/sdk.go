package sdk

import (
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/abi"
)

// handler is the registered function.
var handler func(*Context) error

// Handle registers fn as the function. Call it from an init function: in a
// module built with -buildmode=c-shared, main.main never runs. A second
// call replaces the first.
func Handle(fn func(*Context) error) { handler = fn }

// handle runs one invocation: it is the body of the cairn_handle export.
// A panic is not recovered: it crashes the instance, which is how the runner
// learns of it.
func handle() int32 {
	if handler == nil {
		fail("no function is registered: call sdk.Handle(fn) from an init function (main.main does not run in a module built with -buildmode=c-shared)")
		return abi.StatusFailed
	}
	if err := handler(&Context{}); err != nil {
		msg := err.Error()
		if msg == "" {
			msg = "the function returned an error without text"
		}
		fail(msg)
		return abi.StatusFailed
	}
	return abi.StatusOK
}

// fail tells the runner why the invocation failed.
func fail(msg string) { _, _ = roundTrip(abi.OpFail, []byte(msg)) }

// answer is the buffer the runner writes its answers into; it grows to the
// largest answer seen. A guest runs one invocation at a time, on one
// goroutine, so one buffer serves every call.
var answer = make([]byte, 64<<10)

// roundTrip makes one runner call and returns its raw answer, which is valid
// until the next call.
func roundTrip(op abi.Op, req []byte) ([]byte, error) {
	n := call(int32(op), req, answer)
	if n < 0 {
		return nil, refused(op)
	}
	if int(n) > cap(answer) {
		answer = make([]byte, n)
		if m := take(answer); m != n {
			return nil, refused(op)
		}
	}
	return answer[:n], nil
}

func refused(op abi.Op) error {
	return fmt.Errorf("cairn: the runner refused the %s call (ABI misuse: a bad pointer or an unknown operation)", op)
}

// do performs op with the msgpack request req (raw bytes for OpOutput,
// OpLog and OpFail) and decodes the answer. An error of the store is an
// *engine.Error.
func do(op abi.Op, req any) (abi.Response, error) {
	var (
		b   []byte
		err error
	)
	switch r := req.(type) {
	case nil:
	case []byte:
		b = r
	default:
		if b, err = encodeRequest(r); err != nil {
			return abi.Response{}, fmt.Errorf("cairn: %s: encode the request: %w", op, err)
		}
	}
	ans, err := roundTrip(op, b)
	if err != nil {
		return abi.Response{}, err
	}
	var resp abi.Response
	if err := decodeResponse(ans, &resp); err != nil {
		return abi.Response{}, fmt.Errorf("cairn: %s: decode the answer: %w", op, err)
	}
	if e := resp.Error; e != nil {
		return resp, engine.Errorf(engine.Code(e.Code), "%s", e.Message)
	}
	return resp, nil
}

// errNoTrigger is the panic of a runner that does not give the trigger.
var errNoTrigger = errors.New("cairn: the runner gave no trigger")
