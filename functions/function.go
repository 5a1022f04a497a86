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
	// unmoved remembers the messages its full poison queue refused.
	unmoved unmoved

	cancel context.CancelFunc
	done   chan struct{}
}

// version is one loaded version of a function.
type version struct {
	m       Manifest
	handler Handler
	limits  *limits
	// slots holds one token per HTTP call running (Concurrency of them).
	slots chan struct{}

	mu sync.Mutex
	// inflight counts the invocations using the handler; once retired,
	// the last of them closes it.
	inflight int
	retired  bool
}

// acquire marks an invocation starting on v, unless v is retired (its
// handler closes once the invocations already running are done).
func (v *version) acquire() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.retired {
		return false
	}
	v.inflight++
	return true
}

// release marks an invocation's end; the last one of a retired version
// closes its handler.
func (v *version) release() {
	v.mu.Lock()
	v.inflight--
	last := v.retired && v.inflight == 0
	v.mu.Unlock()
	if last {
		v.handler.Close(context.Background())
	}
}

// retire takes v out of use: its handler is closed once no invocation
// uses it, at once (in a goroutine that wg counts) if none does.
func (v *version) retire(wg *sync.WaitGroup) {
	v.mu.Lock()
	if v.retired {
		v.mu.Unlock()
		return
	}
	v.retired = true
	idle := v.inflight == 0
	v.mu.Unlock()
	if !idle {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		v.handler.Close(context.Background())
	}()
}

// sameFeed reports whether m can run on f's trigger goroutine as it is.
func (f *function) sameFeed(m *Manifest) bool {
	c := f.cur.Load().m
	return c.Trigger.sameFeed(m.Trigger) && c.Concurrency == m.Concurrency && c.AckWait() == m.AckWait()
}

// take returns the current version, marked in use; release it. It
// returns false when the function has stopped (its current version is
// retired and no newer one replaced it).
func (f *function) take() (*version, bool) {
	for {
		v := f.cur.Load()
		if v.acquire() {
			if f.cur.Load() == v {
				return v, true
			}
			v.release() // swapped meanwhile: use the new one
			continue
		}
		if f.cur.Load() == v {
			return nil, false
		}
	}
}

// newFunction returns a function whose current version is v, and the
// context its trigger will run under. It is complete before it is shared:
// stop may be called on it before start, and waits for start then.
func (rn *Runner) newFunction(v *version) (*function, context.Context) {
	ctx, cancel := context.WithCancel(rn.ctx)
	f := &function{rn: rn, name: v.m.Name, cancel: cancel, done: make(chan struct{})}
	f.cur.Store(v)
	return f, ctx
}

// start runs the function's trigger in a goroutine until ctx ends.
func (f *function) start(ctx context.Context) {
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
	f.cancel()
	<-f.done
	f.cur.Load().retire(&f.rn.wg)
}
