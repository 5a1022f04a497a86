package projections

import (
	"context"
	"sort"

	"github.com/cairn-dev/cairn/engine"
)

// broadcastLocked wakes every waiter (the catalog advanced or a view became
// ready) and closes Ready the first time everything has caught up.
func (v *Views) broadcastLocked() {
	close(v.notify)
	v.notify = make(chan struct{})
	if !v.readyClosed && v.caughtUpLocked() {
		v.readyClosed = true
		close(v.ready)
	}
}

// caughtUpLocked reports whether the catalog and the view of every live
// table have caught up with the journal as it was when they started. A
// faulted table never will and is not waited for: the others serve.
func (v *Views) caughtUpLocked() bool {
	if !v.catalogLoaded {
		return false
	}
	for _, e := range v.entries {
		if e.live && !e.ready && e.table.Fault() == nil {
			return false
		}
	}
	return true
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

// Ready returns a channel that is closed once the catalog and the view of
// every live table have caught up with the journal as it was when Run
// started them: a view then answers at least what was committed before the
// host started. It is closed once and stays closed; a table created later
// is caught up on its own (WaitTableReady, Lookup).
//
// Ready is never closed if Run returns first (wait for Run's error too). A
// table faulted during its replay (Table.Fault) is not waited for.
func (v *Views) Ready() <-chan struct{} { return v.ready }

// WaitReady blocks until Ready is closed or ctx ends.
func (v *Views) WaitReady(ctx context.Context) error {
	select {
	case <-v.ready:
		return nil
	default:
	}
	select {
	case <-v.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitTableReady blocks until the view of the named table (epoch) has
// caught up; it fails with TableNotFound if the table is gone and with
// TableFaulted if its view stopped for good (Table.Fault).
func (v *Views) WaitTableReady(ctx context.Context, name string, epoch uint64) error {
	var gone bool
	var faulted error
	err := v.wait(ctx, func() bool {
		e := v.entries[Lower(name)]
		if e == nil || !e.live || e.info.Epoch != epoch {
			gone = true
			return true
		}
		if e.table.Fault() != nil {
			faulted = e.table.Err()
			return true
		}
		return e.ready
	})
	switch {
	case err != nil:
		return err
	case gone:
		return engine.Errorf(engine.CodeTableNotFound, "table %s does not exist", engine.ShownTable(name))
	case faulted != nil:
		return faulted
	}
	return nil
}

// Missing reports what of the journal this node found missing: the
// catalog stream (its follower's last try found none), and the live
// tables faulted because their stream does not exist, by full name
// (Fault.StreamMissing). It reads the views' state only, no request:
// the catalog follower finds a missing catalog when its consumer fails
// (missed heartbeats, 2 s), an applier a missing stream the same way.
// Neither comes back by itself: the records are gone with the stream.
func (v *Views) Missing() (catalog bool, tables []string) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	for _, e := range v.entries {
		if !e.live || e.table == nil {
			continue
		}
		if f := e.table.Fault(); f != nil && f.StreamMissing {
			tables = append(tables, e.info.Name)
		}
	}
	sort.Strings(tables)
	return v.catalogGone.Load(), tables
}
