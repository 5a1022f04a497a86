package projections

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// Declare sets the declared projections (the whole set: a projection not
// in it is dropped). Each is attached to its source table's view: on a
// table that has applied nothing yet it follows from the first record;
// otherwise, and for a new version or generation of one already there, a
// build starts (Table.build) while the version before keeps serving.
// Safe from any goroutine, before or while Run runs.
func (v *Views) Declare(defs []*Definition) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.decls = make(map[string]*Definition, len(defs))
	for _, d := range defs {
		v.decls[Lower(d.Full())] = d
	}
	for _, e := range v.entries {
		if e.live && e.table != nil {
			v.reconcileLocked(e.table)
		}
	}
	v.broadcastLocked()
}

// declaredFor returns the projections declared on the source table name.
func (v *Views) declaredForLocked(source string) []*Definition {
	var out []*Definition
	for _, d := range v.decls {
		if Lower(d.FullSource()) == Lower(source) {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// reconcileLocked makes the table's attached projections the declared ones
// (under v.mu).
func (v *Views) reconcileLocked(t *Table) {
	want := v.declaredForLocked(t.Name())
	keep := map[string]bool{}
	for _, d := range want {
		keep[Lower(d.Full())] = true
	}
	for _, r := range t.readers() {
		if !keep[Lower(r.name)] {
			t.detach(r.name, engine.Errorf(engine.CodeTableNotFound, "projection %s was dropped", engine.ShownTable(r.name)))
		}
	}
	for _, d := range want {
		t.attach(d)
		if p := v.runCtx.Load(); t.wants(d) && p != nil && (*p).Err() == nil {
			v.startBuildLocked(t, d, *p)
		}
	}
}

// startBuildLocked builds a projection's version in a goroutine counted in
// v.wg (under v.mu, while Run runs).
func (v *Views) startBuildLocked(t *Table, d *Definition, ctx context.Context) {
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		start := time.Now()
		name := engine.ShownTable(d.Full())
		v.log.Info("building projection", "projection", name, "source", engine.ShownTable(t.Name()), "version", d.Version, "generation", d.Generation)
		err := t.build(ctx, d, func(p BuildProgress) {
			pct := 100.0
			if p.Total > 0 {
				pct = 100 * float64(p.Done) / float64(p.Total)
			}
			v.log.Info("building projection", "projection", name, "version", d.Version, "phase", p.Phase,
				"entities", p.Done, "of", p.Total, "percent", fmt.Sprintf("%.1f", pct), "per_s", int(p.RatePerSec), "eta", p.ETA)
		})
		switch {
		case err == nil:
			st, _ := t.projectionStatus(d.Full())
			v.log.Info("projection built and swapped in", "projection", name, "version", d.Version, "generation", d.Generation,
				"entities", st.Entities, "at", st.Seq, "elapsed", time.Since(start).Round(time.Millisecond))
		case ctx.Err() != nil || err == context.Canceled:
			v.log.Info("projection build stopped", "projection", name, "version", d.Version, "why", err)
		default:
			v.log.Error("projection build failed: the version before keeps serving", "projection", name, "version", d.Version, "err", err)
		}
		v.mu.Lock()
		v.broadcastLocked()
		v.mu.Unlock()
	}()
}

// attachDeclaredLocked attaches the declared projections to a table's new
// view before its applier starts (under v.mu): they follow from its first
// record.
func (v *Views) attachDeclaredLocked(t *Table) {
	for _, d := range v.declaredForLocked(t.Name()) {
		t.attach(d)
	}
}

// Declared returns the declared projection of that full name.
func (v *Views) Declared(name string) (*Definition, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	d, ok := v.decls[Lower(name)]
	return d, ok
}

// Read is Readable for the front doors: the table a read of name reads,
// or a coded error: TableNotFound for a name that is neither a table nor
// a projection, and a stopped view's error (TableFaulted when its journal
// holds what it cannot apply; an InternalError saying the view stopped
// otherwise), since a stopped view is stale for good.
func (v *Views) Read(ctx context.Context, name string) (*Table, error) {
	t, ok, err := v.Readable(ctx, name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, engine.Errorf(engine.CodeTableNotFound, "table %s does not exist", engine.ShownTable(name))
	}
	if err := t.Err(); err != nil {
		if engine.ErrorCode(err) == engine.CodeInternalError {
			err = engine.Errorf(engine.CodeInternalError, "the view of table %s has stopped: %v", engine.ShownTable(t.Name()), err)
		}
		return nil, err
	}
	return t, nil
}

// Readable returns what a read of the name reads: the view of a live
// table (Lookup), or a declared projection's read table. A projection
// whose source table does not exist is TableNotFound; one whose first
// version is still being built is ProjectionNotReady.
func (v *Views) Readable(ctx context.Context, name string) (*Table, bool, error) {
	if t, ok := v.Table(name); ok {
		return t, true, nil
	}
	d, ok := v.Declared(name)
	if !ok {
		return v.Lookup(ctx, name)
	}
	src, ok, err := v.Lookup(ctx, d.FullSource())
	if err != nil || !ok {
		if err == nil {
			err = engine.Errorf(engine.CodeTableNotFound, "the source table %s of projection %s does not exist", engine.ShownTable(d.FullSource()), engine.ShownTable(d.Full()))
		}
		return nil, false, err
	}
	src.dmu.Lock()
	a := src.projection(d.Full())
	var r *Table
	ready := false
	var p BuildProgress
	if a != nil {
		r, ready, p = a.reader, a.active != nil, a.progress
	}
	src.dmu.Unlock()
	if r == nil {
		return nil, false, engine.Errorf(engine.CodeProjectionNotReady, "projection %s is not attached to its source yet: retry", engine.ShownTable(d.Full()))
	}
	if !ready {
		if err := src.Err(); err != nil {
			return nil, false, err
		}
		return nil, false, engine.Errorf(engine.CodeProjectionNotReady, "projection %s is being built: %d of %d entities of its source (%s): retry",
			engine.ShownTable(d.Full()), p.Done, p.Total, p.Phase)
	}
	return r, true, nil
}

// readOnly is ErrReadOnly when name, in any case, is a declared
// projection's (nil otherwise), naming the projection as it was declared:
// the committer looks tables up by their names in lower case.
func (v *Views) readOnly(name string) error {
	d, ok := v.Declared(name)
	if !ok {
		return nil
	}
	return ErrReadOnly(d.Full())
}

// ErrReadOnly is the error of a write to a declared projection.
func ErrReadOnly(name string) error {
	return engine.Errorf(engine.CodeProjectionReadOnly, "%s is a declared projection: only its source table's writes change it", engine.ShownTable(name))
}

// Source returns, for a projection's read table, its source table's view.
func (t *Table) Source() (*Table, bool) { return t.source, t.source != nil }

// ProjectionStatuses returns the status of every declared projection on
// this node, sorted by full name.
func (v *Views) ProjectionStatuses() []ProjectionStatus {
	v.mu.RLock()
	defs := make([]*Definition, 0, len(v.decls))
	for _, d := range v.decls {
		defs = append(defs, d)
	}
	v.mu.RUnlock()
	sort.Slice(defs, func(i, j int) bool { return defs[i].Full() < defs[j].Full() })
	out := make([]ProjectionStatus, 0, len(defs))
	for _, d := range defs {
		st := ProjectionStatus{Name: engine.ShownTable(d.Full()), Full: d.Full(), Source: engine.ShownTable(d.FullSource()), Kind: d.Kind, State: "no-source"}
		if t, ok := v.Table(d.FullSource()); ok {
			if s, ok := t.projectionStatus(d.Full()); ok {
				st = s
			}
		}
		st.Declared, st.Full = d.Version, d.Full()
		out = append(out, st)
	}
	return out
}

// WaitProjection waits until the projection's declared version and
// generation are the ones readers see on this node (tests and tools); it
// fails at once when the projection or its source is faulted.
func (v *Views) WaitProjection(ctx context.Context, d *Definition) error {
	for {
		v.mu.RLock()
		ch := v.notify
		v.mu.RUnlock()
		for _, st := range v.ProjectionStatuses() {
			if Lower(st.Full) != Lower(d.Full()) {
				continue
			}
			if st.Version == d.Version && st.Generation == d.Generation && st.State == "active" {
				return nil
			}
			if st.State == "faulted" {
				return engine.Errorf(engine.CodeTableFaulted, "projection %s: %s", st.Name, st.Error)
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("projections: waiting for %s version %d: %w", d.Name, d.Version, ctx.Err())
		}
	}
}

// WriteProjectionMetrics writes the declared projections' metrics in the
// Prometheus text format.
func (v *Views) WriteProjectionMetrics(w io.Writer) {
	sts := v.ProjectionStatuses()
	gauge := func(name, help string, val func(ProjectionStatus) (float64, bool)) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
		for _, st := range sts {
			if x, ok := val(st); ok {
				fmt.Fprintf(w, "%s{projection=%q,source=%q} %g\n", name, st.Full, st.Source, x)
			}
		}
	}
	gauge("cairn_projection_version", "The version of the projection readers see on this node (0: none yet).", func(s ProjectionStatus) (float64, bool) { return float64(s.Version), true })
	gauge("cairn_projection_entities", "Entities of the projection readers see.", func(s ProjectionStatus) (float64, bool) { return float64(s.Entities), true })
	gauge("cairn_projection_position", "The source's journal position the projection reflects (the source view's: they move together).", func(s ProjectionStatus) (float64, bool) { return float64(s.Seq), true })
	gauge("cairn_projection_lag_records", "Records of the source's journal this node has yet to apply (its projections move with its view).", func(s ProjectionStatus) (float64, bool) { return float64(s.Lag), true })
	gauge("cairn_projection_faulted", "1 when the projection's source stopped at a record it cannot apply, or it has no source.", func(s ProjectionStatus) (float64, bool) {
		return b2f(s.State == "faulted" || s.State == "no-source"), true
	})
	gauge("cairn_projection_build_done", "Source entities a running build has done.", func(s ProjectionStatus) (float64, bool) {
		if s.Build == nil {
			return 0, false
		}
		return float64(s.Build.Done), true
	})
	gauge("cairn_projection_build_total", "Source entities a running build does (the source at its start).", func(s ProjectionStatus) (float64, bool) {
		if s.Build == nil {
			return 0, false
		}
		return float64(s.Build.Total), true
	})
	gauge("cairn_projection_build_rate", "Source entities per second of a running build.", func(s ProjectionStatus) (float64, bool) {
		if s.Build == nil {
			return 0, false
		}
		return s.Build.RatePerSec, true
	})
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
