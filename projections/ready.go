package projections

import (
	"context"

	"github.com/cairn-dev/cairn/engine"
)

func (v *Views) broadcastLocked() {
	close(v.notify)
	v.notify = make(chan struct{})
}

// wait blocks until cond (called with v.mu read-locked) holds or ctx ends.
func (v *Views) wait(ctx context.Context, cond func() bool) error {
	for {
		v.mu.RLock()
		ok, ch := cond(), v.notify
		v.mu.RUnlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitReady blocks until the catalog and every table's view have caught up
// with the journal as it was when they started.
func (v *Views) WaitReady(ctx context.Context) error {
	return v.wait(ctx, func() bool {
		if !v.ready {
			return false
		}
		for _, e := range v.entries {
			if e.live && !e.ready {
				return false
			}
		}
		return true
	})
}

// WaitTableReady blocks until the view of the named table (epoch) has
// caught up; it fails with TableNotFound if the table is gone.
func (v *Views) WaitTableReady(ctx context.Context, name string, epoch uint64) error {
	var gone bool
	err := v.wait(ctx, func() bool {
		e := v.entries[Lower(name)]
		if e == nil || !e.live || e.info.Epoch != epoch {
			gone = true
			return true
		}
		return e.ready
	})
	if err == nil && gone {
		return engine.Errorf(engine.CodeTableNotFound, "table %s does not exist", name)
	}
	return err
}
