package commit

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// state is where a committer is in its life: it takes commands only while
// running.
type state uint8

const (
	stateNew     state = iota // New returned; Run not called
	stateRunning              // Run takes commands
	stateStopped              // Run's context ended: no new commands
)

// errNotRunning answers a command that arrives while Run is not taking
// commands; it was not applied.
func errNotRunning() *engine.Error {
	return engine.Errorf(engine.CodeServerBusy, "the host is not taking commands (starting or shutting down)")
}

// Run takes commands until ctx ends. Then it refuses new ones (ServerBusy),
// lets those already taken finish, and returns once every goroutine of the
// committer has exited. Commands still in flight after Config.DrainTimeout
// are abandoned: each is answered with an error, which says whether the
// command may have been applied. Run returns nil; a committer runs once.
//
// Running is closed once Run takes commands.
func (c *Committer) Run(ctx context.Context) error {
	// The partition goroutines' context outlives ctx by the drain.
	work, abandon := context.WithCancel(context.WithoutCancel(ctx))
	defer abandon()
	c.mu.Lock()
	if c.state != stateNew {
		c.mu.Unlock()
		return errors.New("commit: Run called twice")
	}
	c.ctx, c.state = work, stateRunning
	c.mu.Unlock()
	close(c.running)

	<-ctx.Done()
	c.mu.Lock()
	c.state = stateStopped // from now on no partition starts to run
	close(c.stopped)
	c.mu.Unlock()
	drained := make(chan struct{})
	go func() { c.wg.Wait(); c.workers.Wait(); close(drained) }()
	t := time.NewTimer(c.cfg.DrainTimeout)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
		c.log.Warn("commands still in flight after the drain timeout; abandoning them", "drain_timeout", c.cfg.DrainTimeout)
		abandon()
		<-drained
	}
	return nil
}

// Ready is closed once Run takes commands.
func (c *Committer) Ready() <-chan struct{} { return c.running }

// taking reports whether Run takes commands.
func (c *Committer) taking() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state == stateRunning
}
