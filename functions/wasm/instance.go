package wasm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/cairn-dev/cairn/functions/abi"
)

// instance is one instantiated module. One goroutine at a time uses it:
// the pool hands it to one invocation, which gives it back or discards it.
type instance struct {
	mod    api.Module
	handle api.Function
	mem    api.Memory
	// initial is the memory's size once started, in bytes.
	initial uint32
	// live is the module's count of open instances.
	live   *atomic.Int64
	inv    invocation
	rand   seededRand
	stdout output
	stderr output
	lines  int // log lines left in this invocation
	tail   bytes.Buffer
	stack  [1]uint64 // cairn_handle's results
}

// invocation is what the host functions (runnerCall, runnerTake) need
// during one call into the
// instance; they find it with ctx.Value(invocationKey{}). It lives in the
// instance and is reset after each call. (The context itself is made per
// call: wazero's close-on-context-done goroutine may read it after the call
// returns, so it must not change.)
type invocation struct {
	ctx  context.Context
	call func(op abi.Op, req []byte) []byte
	// kept is the latest answer, for cairn.take.
	kept []byte
	// failure is the text of OpFail.
	failure string
	failed  bool
	// misuse describes the first call that answered -1.
	misuse string
}

type invocationKey struct{}

// with returns ctx carrying v for the host functions.
func (v *invocation) with(ctx context.Context) context.Context {
	v.ctx = ctx
	return context.WithValue(ctx, invocationKey{}, v)
}

// seededRand is the instance's WASI random source, reseeded before each
// invocation so that a retried trigger reads the same bytes.
type seededRand struct{ c rand.ChaCha8 }

func (r *seededRand) Read(p []byte) (int, error) { return r.c.Read(p) }

func (r *seededRand) seed(s string) { r.c.Seed(sha256.Sum256([]byte(s))) }

// start instantiates the module, running _initialize if it has one. ctx
// bounds the initialisation.
func (m *Module) start(ctx context.Context) (*instance, error) {
	inst := &instance{}
	inst.stdout = output{log: m.log, stream: "stdout", lines: &inst.lines}
	inst.stderr = output{log: m.log, stream: "stderr", lines: &inst.lines, tail: &inst.tail}
	inst.lines = maxLines
	inst.rand.seed("cairn-instance:" + m.name)
	cfg := m.config.
		WithStdout(&inst.stdout).
		WithStderr(&inst.stderr).
		WithRandSource(&inst.rand).
		WithNanosleep(inst.sleep)
	start := time.Now()
	mod, err := m.eng.rt.InstantiateModule(inst.inv.with(ctx), m.compiled, cfg)
	inst.stdout.flush()
	inst.stderr.flush()
	inst.inv = invocation{}
	if err != nil {
		if mod != nil {
			_ = mod.Close(context.Background())
		}
		return nil, m.failure(ctx, inst, err, start, "starting an instance")
	}
	inst.mod = mod
	inst.handle = mod.ExportedFunction(abi.ExportHandle)
	inst.mem = mod.Memory()
	inst.initial = inst.mem.Size()
	inst.live = &m.live
	m.live.Add(1)
	m.started.Add(1)
	return inst, nil
}

// sleep is WASI's nanosleep (poll_oneoff on a clock): it returns early
// when the invocation's context ends, so that a sleeping guest does not
// outlive its deadline.
func (inst *instance) sleep(ns int64) {
	var done <-chan struct{}
	if ctx := inst.inv.ctx; ctx != nil {
		done = ctx.Done()
	}
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	}
}

func (inst *instance) close() {
	if inst.mod != nil {
		_ = inst.mod.Close(context.Background())
		inst.live.Add(-1)
	}
}

// runnerCall is the host function cairn.call(op, req_ptr, req_len, out_ptr,
// out_cap) -> i32: one runner call of the guest, answered by the
// invocation's call function.
func runnerCall(ctx context.Context, mod api.Module, stack []uint64) {
	v, _ := ctx.Value(invocationKey{}).(*invocation)
	op := abi.Op(api.DecodeI32(stack[0]))
	req := api.DecodeU32(stack[1])
	reqLen := api.DecodeU32(stack[2])
	out := api.DecodeU32(stack[3])
	outCap := api.DecodeU32(stack[4])
	stack[0] = api.EncodeI32(v.serve(mod.Memory(), op, req, reqLen, out, outCap))
}

func (v *invocation) serve(mem api.Memory, op abi.Op, req, reqLen, out, outCap uint32) int32 {
	if v == nil || v.call == nil {
		return -1 // called outside an invocation (from _initialize)
	}
	if !op.Known() {
		return v.misused("cairn.call: unknown operation %d", int32(op))
	}
	b, ok := mem.Read(req, reqLen)
	if !ok {
		return v.misused("cairn.call(%s): the request at %d, %d bytes long, is outside the memory (%d bytes)", op, req, reqLen, mem.Size())
	}
	// The guest's memory is reused and can move when it grows: copy.
	b = bytes.Clone(b)
	if op == abi.OpFail {
		v.failure, v.failed = string(b), true
	}
	ans := v.call(op, b)
	if len(ans) > math.MaxInt32 {
		v.kept = nil
		return v.misused("cairn.call(%s): the answer is %d bytes, too long for the ABI", op, len(ans))
	}
	v.kept = ans
	if uint32(len(ans)) <= outCap && len(ans) > 0 && !mem.Write(out, ans) {
		return v.misused("cairn.call(%s): the answer buffer at %d, %d bytes long, is outside the memory (%d bytes)", op, out, outCap, mem.Size())
	}
	return int32(len(ans))
}

// runnerTake is the host function cairn.take(out_ptr, out_cap) -> i32: it
// copies the kept
// answer if it fits in out_cap bytes, and returns its length either way
// (-1 when nothing is kept).
func runnerTake(ctx context.Context, mod api.Module, stack []uint64) {
	v, _ := ctx.Value(invocationKey{}).(*invocation)
	out := api.DecodeU32(stack[0])
	outCap := api.DecodeU32(stack[1])
	stack[0] = api.EncodeI32(v.take(mod.Memory(), out, outCap))
}

func (v *invocation) take(mem api.Memory, out, outCap uint32) int32 {
	if v == nil || v.call == nil || v.kept == nil {
		return -1
	}
	ans := v.kept
	if uint32(len(ans)) <= outCap && len(ans) > 0 && !mem.Write(out, ans) {
		return v.misused("cairn.take: the buffer at %d, %d bytes long, is outside the memory (%d bytes)", out, outCap, mem.Size())
	}
	return int32(len(ans))
}

// misused records the first misuse of the ABI and returns -1.
func (v *invocation) misused(format string, args ...any) int32 {
	if v.misuse == "" {
		v.misuse = fmt.Sprintf(format, args...)
	}
	return -1
}
