package functions

import (
	"context"
	"sync"
	"sync/atomic"
)

// function is a deployed function on this node: its current version and
// the goroutine that feeds it from its trigger.
type function struct {
	rn   *Runner
	name string
	cur  atomic.Pointer[version]

	cancel context.CancelFunc
	done   chan struct{}
}

// version is one loaded version of a function.
type version struct {
	m       Manifest
	handler Handler
	// inflight counts the invocations using the handler; retire closes
	// it once they are done.
	inflight sync.WaitGroup
	retired  atomic.Bool
}

// acquire marks an invocation starting on v.
func (v *version) acquire() { v.inflight.Add(1) }

func (v *version) release() { v.inflight.Done() }

// retire closes v's handler once its invocations have finished.
func (v *version) retire() {
	if v.retired.Swap(true) {
		return
	}
	go func() {
		v.inflight.Wait()
		v.handler.Close(context.Background())
	}()
}

// sameFeed reports whether m can run on f's trigger goroutine as it is.
func (f *function) sameFeed(m *Manifest) bool {
	c := f.cur.Load().m
	return c.Trigger == m.Trigger && c.Concurrency == m.Concurrency && c.AckWait() == m.AckWait()
}

// take returns the current version, marked in use; release it.
func (f *function) take() *version {
	for {
		v := f.cur.Load()
		v.acquire()
		if f.cur.Load() == v {
			return v
		}
		v.release() // swapped meanwhile: use the new one
	}
}

func (f *function) start() {
	ctx, cancel := context.WithCancel(f.rn.ctx)
	f.cancel, f.done = cancel, make(chan struct{})
	m := f.cur.Load().m
	f.rn.wg.Add(1)
	go func() {
		defer f.rn.wg.Done()
		defer close(f.done)
		var err error
		switch m.Trigger.Kind() {
		case "queue":
			err = f.consumeQueue(ctx, m.Trigger.Queue)
		case "timer":
			err = f.runTimer(ctx, m)
		case "table":
			err = f.followTable(ctx, m.Trigger.Table)
		default:
			<-ctx.Done() // direct invocations only
		}
		if err != nil && ctx.Err() == nil {
			f.rn.log.Error("function stopped", "function", f.name, "err", err)
		}
	}()
}

// stop stops the trigger goroutine and retires the current version.
func (f *function) stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	<-f.done
	f.cur.Load().retire()
}
