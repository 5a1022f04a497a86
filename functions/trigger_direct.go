package functions

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/abi"
)

// DirectSubject is the subject a function is invoked on directly.
func DirectSubject(prefix, function string) string { return prefix + ".fn." + function }

// Headers of a direct invocation's reply.
const (
	HeaderReplyError = "Cairn-Error" // set when the invocation failed
)

// serveDirect answers requests on <prefix>.fn.<name>: one invocation each,
// not retried (the caller decides), replied with the function's output or
// its error. A request with a Nats-Msg-Id header uses it as the trigger id,
// so that a caller retrying with the same id does not apply writes twice.
// The invocations run in goroutines that Run waits for. A request whose
// reply subject is not an inbox is dropped unanswered (Config.Replies).
func (rn *Runner) serveDirect() error {
	sub, err := rn.serveConn().QueueSubscribe(DirectSubject(rn.cfg.Prefix, "*"), "cairn-fn", func(msg *nats.Msg) {
		if !rn.cfg.Replies.Allow(msg.Subject, msg.Reply) {
			return
		}
		name := msg.Subject[len(DirectSubject(rn.cfg.Prefix, "")):]
		rn.mu.Lock()
		f, stopping := rn.fns[name], rn.stopping
		if f != nil && !stopping {
			rn.wg.Add(1) // under mu, before stop's Wait
		}
		rn.mu.Unlock()
		switch {
		case stopping:
			replyError(msg, "the node is stopping")
		case f == nil:
			replyError(msg, fmt.Sprintf("function %q is not deployed", name))
		default:
			go func() {
				defer rn.wg.Done()
				f.direct(msg)
			}()
		}
	})
	if err != nil {
		return err
	}
	rn.mu.Lock()
	rn.direct = sub
	rn.mu.Unlock()
	return nil
}

// serveConn is the connection that answers requests (Config.Serve).
func (rn *Runner) serveConn() *nats.Conn {
	if rn.cfg.Serve != nil {
		return rn.cfg.Serve
	}
	return rn.nc
}

func replyError(msg *nats.Msg, text string) {
	r := nats.NewMsg(msg.Reply)
	r.Header.Set(HeaderReplyError, text)
	_ = msg.RespondMsg(r)
}

func (f *function) direct(msg *nats.Msg) {
	v, ok := f.take()
	if !ok {
		replyError(msg, fmt.Sprintf("function %q has stopped", f.name))
		return
	}
	defer v.release()
	id := msg.Header.Get(nats.MsgIdHdr)
	if id == "" {
		id = nats.NewInbox()[len(nats.InboxPrefix):]
	}
	trig := abi.Trigger{
		ID:           "i:" + id,
		Kind:         abi.KindInvoke,
		Function:     f.name,
		Version:      v.m.Version,
		Body:         msg.Data,
		DequeueCount: 1,
		Time:         engine.TimeToTicks(f.rn.now()),
	}
	floors, err := parseFloors(msg.Header)
	if err != nil {
		replyError(msg, err.Error())
		return
	}
	inv, err := f.rn.run(f.rn.ctx, v, trig, floors)
	if err != nil {
		replyError(msg, err.Error())
		return
	}
	r := nats.NewMsg(msg.Reply)
	r.Data = inv.Output()
	_ = msg.RespondMsg(r)
}
