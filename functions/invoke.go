package functions

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/abi"
)

// submit runs a command through the committer and waits for its reply.
func (rn *Runner) submit(ctx context.Context, cmd *engine.Command) *engine.Reply {
	ch := make(chan *engine.Reply, 1)
	rn.comm.Submit(cmd, func(r *engine.Reply) { ch <- r })
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return &engine.Reply{Error: engine.Errorf(engine.CodeOperationTimedOut, "the commit did not finish: %v", ctx.Err())}
	}
}

// maxConflictRuns bounds how often one delivery runs a function whose
// commit keeps conflicting with other writers.
const maxConflictRuns = 3

// run invokes a function for a trigger and commits what it collected. A
// commit that conflicts with a concurrent writer runs the function again
// (at most maxConflictRuns times) after a short pause.
func (rn *Runner) run(ctx context.Context, v *version, trig abi.Trigger, floors []floor) (*Invocation, error) {
	for n := 1; ; n++ {
		rn.stats.Invocations.Add(1)
		rn.perFn.start(v.m.Name)
		inv := &Invocation{runner: rn, limits: v.limits, trigger: trig, floors: floors}
		rn.failpoint("functions.invoke", v.m.Name)
		begin := time.Now()
		ictx, cancel := context.WithTimeout(ctx, v.m.Timeout.D())
		err := v.handler.Invoke(ictx, inv)
		cancel()
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err = inv.commit(cctx)
			cancel()
		}
		rn.perFn.record(v.m.Name, trig.Kind, time.Since(begin), err != nil)
		if err == nil {
			return inv, nil
		}
		rn.stats.Failures.Add(1)
		var ce *ConflictError
		if !errors.As(err, &ce) || n >= maxConflictRuns {
			return inv, err
		}
		select {
		case <-ctx.Done():
			return inv, err
		case <-time.After(time.Duration(n*n) * 20 * time.Millisecond):
		}
	}
}
