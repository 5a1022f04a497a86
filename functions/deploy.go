package functions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/journal"
)

// consumerOf names the stream of the durable consumer "fn-<name>" that a
// manifest's trigger uses ("" for none).
func (rn *Runner) consumerOf(m Manifest) (stream string) {
	switch m.Trigger.Kind() {
	case "queue", "timer":
		return StreamName(rn.cfg.Prefix)
	case "table":
		if t, ok := rn.views.Table(m.Trigger.Table); ok {
			return journal.StreamName(rn.cfg.Prefix, t.Name(), t.Epoch())
		}
	}
	return ""
}

// dropConsumer deletes the durable consumer of a function that no longer
// uses it (undeployed, or moved to another trigger), so that its queue can
// be given to another function. Every node tries; the first succeeds.
func (rn *Runner) dropConsumer(m Manifest) {
	stream := rn.consumerOf(m)
	if stream == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := rn.js.DeleteConsumer(ctx, stream, "fn-"+m.Name)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		rn.log.Warn("function: could not delete its consumer", "function", m.Name, "stream", stream, "err", err)
	}
}

// deployed reacts to a registry change: load the new version, or stop an
// undeployed function. Every outcome of a load is kept (LoadFailure),
// logged and reported on the function's load-report subject.
func (rn *Runner) deployed(name string, m *Manifest) {
	if m == nil {
		rn.mu.Lock()
		f := rn.fns[name]
		delete(rn.fns, name)
		rn.mu.Unlock()
		rn.noteLoad(name, 0, nil)
		if f != nil {
			f.stop()
			rn.dropConsumer(f.cur.Load().m)
			rn.log.Info("function undeployed", "function", name)
		}
		return
	}
	if cur := rn.current(name); cur != nil && cur.m.Version == m.Version && cur.m.Digest == m.Digest && cur.m.Builtin == "" {
		return
	}
	start := time.Now()
	handler, err := rn.load(m)
	if err != nil && rn.ctx.Err() != nil {
		return // stopping: the load was cut short, nothing to report
	}
	if err != nil {
		rn.noteLoad(name, m.Version, err)
		rn.log.Error("function not loaded", "function", name, "version", m.Version, "err", err)
		rn.report(name, m.Version, err)
		return
	}
	rn.noteLoad(name, m.Version, nil)
	rn.install(m, handler)
	rn.log.Info("function loaded", "function", name, "version", m.Version, "trigger", m.Trigger.Kind(), "elapsed", time.Since(start).Round(time.Millisecond))
	rn.report(name, m.Version, nil)
}

// load checks a manifest and loads its module into the sandbox.
func (rn *Runner) load(m *Manifest) (Handler, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("bad manifest: %w", err)
	}
	module, err := rn.registry.Module(rn.ctx, *m)
	if err != nil {
		return nil, err
	}
	if rn.cfg.Sandbox == nil {
		return nil, errors.New("this node runs no sandbox")
	}
	return rn.cfg.Sandbox.Load(rn.ctx, module, *m)
}

// install makes a version current: in place when its trigger and delivery
// settings are the running ones (in-flight invocations finish on the old
// version, none is lost or run twice), else by restarting the trigger.
func (rn *Runner) install(m *Manifest, handler Handler) {
	v := &version{m: *m, handler: handler, limits: newLimits(m, rn.log, &rn.stats), slots: make(chan struct{}, m.Concurrency)}
	rn.mu.Lock()
	f := rn.fns[m.Name]
	if f != nil && f.sameFeed(m) {
		old := f.cur.Swap(v)
		rn.mu.Unlock()
		old.retire(&rn.wg)
		return
	}
	nf, ctx := rn.newFunction(v)
	rn.fns[m.Name] = nf
	rn.mu.Unlock()
	if f != nil {
		f.stop()
		if old := f.cur.Load().m; !old.Trigger.sameFeed(m.Trigger) {
			rn.dropConsumer(old)
		}
	}
	nf.start(ctx)
}
