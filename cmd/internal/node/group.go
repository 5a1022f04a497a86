package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// A component is a long-running part of a node: the views, the committer,
// the front doors, the function runner. Its constructor starts nothing;
// Run runs it until ctx ends and returns once everything it started has
// stopped: nil after ctx ended, otherwise the error that stopped it.
type component interface {
	Run(ctx context.Context) error
}

// A readier is a component with a moment from which it serves (the views
// once they have replayed the journal); the components after it start only
// then. A component without Ready serves as soon as Run is called.
type readier interface {
	Ready() <-chan struct{}
}

// group runs a node's components: it starts them one after the other, each
// once the one before serves, and stops them in the reverse order, each
// only after every later one has returned, so that nothing outlives what
// it depends on (the committer stops before the views, the front doors
// before the committer). It is an errgroup with an order: the first
// component that stops on its own fails the group.
type group struct {
	log    *slog.Logger
	parts  []*part
	failed chan struct{} // closed when a component stops on its own
	once   sync.Once
}

type part struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned
	err    error         // what Run returned, once done is closed
}

func newGroup(log *slog.Logger) *group {
	return &group{log: log, failed: make(chan struct{})}
}

// Failed is closed as soon as a component stops without being asked to.
func (g *group) Failed() <-chan struct{} { return g.failed }

// Start runs c and returns once it serves. The component runs under a
// context of its own, ended only by Stop; ctx bounds the wait for it to
// serve. If c stops or ctx ends before it serves, Start returns why (and
// the group is then to be stopped).
func (g *group) Start(ctx context.Context, name string, c component) error {
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &part{name: name, cancel: cancel, done: make(chan struct{})}
	g.parts = append(g.parts, p)
	go func() {
		defer close(p.done)
		p.err = c.Run(cctx)
		if cctx.Err() == nil {
			if p.err == nil {
				p.err = fmt.Errorf("%s stopped", name)
			}
			g.log.Error("component stopped", "component", name, "err", p.err)
			g.once.Do(func() { close(g.failed) })
		}
	}()
	r, ok := c.(readier)
	if !ok {
		return nil
	}
	select {
	case <-r.Ready():
		return nil
	case <-p.done:
		return fmt.Errorf("%s: %w", name, p.err)
	case <-ctx.Done():
		return fmt.Errorf("%s did not start: %w", name, context.Cause(ctx))
	}
}

// Stop stops the components in the reverse order of their start, each
// once the later ones have returned, and returns the errors of those that
// stopped on their own (nil after a clean stop).
func (g *group) Stop() error {
	var errs []error
	for i := len(g.parts) - 1; i >= 0; i-- {
		p := g.parts[i]
		p.cancel()
		<-p.done
		if p.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.name, p.err))
		}
	}
	g.parts = nil
	return errors.Join(errs...)
}
