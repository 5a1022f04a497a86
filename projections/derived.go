package projections

import (
	"context"
	"fmt"
	"time"

	"github.com/tidwall/btree"

	"github.com/cairn-dev/cairn/engine"
)

// attached is a declared projection on one incarnation of its source
// table. The source's applier keeps its active version exact in the same
// step as the source (Table.Apply) and publishes it with the source
// (Table.Publish); a new version is built beside it (shadow) from a fixed
// snapshot of the source, catches up with the changes since, is checked,
// and swapped in. All fields are guarded by the source's dmu.
type attached struct {
	reader *Table // the projection as readers see it: name, snapshots, waiters

	def    *Definition // the active version's definition (nil until built)
	active *deriver

	target    *Definition // the version being built (nil: none)
	shadow    *deriver
	buffering bool     // the shadow is being built: the applier keeps its changes in buf
	buf       []change // changes since the build's snapshot
	cancel    context.CancelFunc
	progress  BuildProgress
	lastErr   string // why the last build failed, if it did
}

// BuildProgress is a build's progress.
type BuildProgress struct {
	Version    uint64    `json:"version"`
	Generation uint64    `json:"generation,omitempty"`
	Phase      string    `json:"phase"` // build, catch-up, check
	Head       uint64    `json:"head"`  // the source's journal position the build started from
	Done       int64     `json:"done"`  // source entities done
	Total      int64     `json:"total"` // source entities at Head
	Started    time.Time `json:"started"`
	RatePerSec float64   `json:"ratePerSec"`
	ETA        string    `json:"eta,omitempty"`
}

// ProjectionStatus is what a node knows of a declared projection.
type ProjectionStatus struct {
	Name       string         `json:"name"` // as its account names it
	Full       string         `json:"full"` // its full name (engine.FullTableName)
	Source     string         `json:"source"`
	Kind       string         `json:"kind"`
	Version    uint64         `json:"version"` // the version readers see (0: none yet)
	Generation uint64         `json:"generation,omitempty"`
	Declared   uint64         `json:"declared"` // the declared version
	State      string         `json:"state"`    // building, active, rebuilding, faulted, no-source
	Seq        uint64         `json:"seq"`      // the source's journal position it reflects
	Lag        uint64         `json:"lag"`      // records of the source's journal not applied yet (the source view's lag)
	Entities   int            `json:"entities"`
	Build      *BuildProgress `json:"build,omitempty"`
	Error      string         `json:"error,omitempty"`
}

var (
	emptyParts = btree.NewBTreeGOptions(lessPartition, btree.Options{NoLocks: true})
	emptyIDs   = btree.NewBTreeGOptions(lessCommand, btree.Options{NoLocks: true})
)

// projection returns the attached projection of that full name.
func (t *Table) projection(full string) *attached {
	for _, a := range t.derived {
		if Lower(a.reader.name) == Lower(full) {
			return a
		}
	}
	return nil
}

// applyDerived passes one change to every attached projection (under dmu).
func (t *Table) applyDerived(c change) {
	for _, a := range t.derived {
		if a.active != nil {
			a.active.apply(c)
		}
		if a.shadow != nil {
			if a.buffering {
				a.buf = append(a.buf, c)
			} else {
				a.shadow.apply(c)
			}
		}
	}
}

// publishDerived publishes every active projection at the source's
// position (under dmu): readers of a projection see it exactly as of the
// source's snapshot.
// publishDerived publishes the active projections at the source's
// position and returns their read tables, whose waits the caller wakes.
func (t *Table) publishDerived() []*Table {
	var readers []*Table
	for _, a := range t.derived {
		if a.active != nil {
			a.publish(t.seq)
			readers = append(readers, a.reader)
		}
	}
	return readers
}

func (a *attached) publish(seq uint64) {
	r := a.reader
	r.snap.Store(&Snapshot{Table: r.name, Epoch: r.epoch, Seq: seq, rows: a.active.rows.Copy(), parts: emptyParts, ids: emptyIDs})
	r.mu.Lock()
	close(r.notify)
	r.notify = make(chan struct{})
	r.mu.Unlock()
}

// attach adds a projection to the table. On a table that has applied
// nothing yet the projection is active at once (it follows from the first
// record); otherwise it returns true and the caller builds it (build).
func (t *Table) attach(def *Definition) (needsBuild bool) {
	t.dmu.Lock()
	defer t.dmu.Unlock()
	if t.projection(def.Full()) != nil {
		return false
	}
	r := NewTable(def.Full(), t.epoch, 0)
	r.source = t
	a := &attached{reader: r}
	t.derived = append(t.derived, a)
	if t.seq == 0 {
		a.def, a.active = def, newDeriver(def, t.splitShards(def))
		a.publish(0)
		return false
	}
	return true
}

// detach removes a projection (its declaration was dropped): its readers
// and waiters get TableNotFound.
func (t *Table) detach(full string, why error) {
	t.dmu.Lock()
	defer t.dmu.Unlock()
	for i, a := range t.derived {
		if Lower(a.reader.name) == Lower(full) {
			if a.cancel != nil {
				a.cancel()
			}
			a.reader.Fail(why)
			t.derived = append(t.derived[:i:i], t.derived[i+1:]...)
			return
		}
	}
}

// wants reports whether the projection needs a build of def: none is
// active or building for its version and generation.
func (t *Table) wants(def *Definition) bool {
	t.dmu.Lock()
	defer t.dmu.Unlock()
	a := t.projection(def.Full())
	if a == nil {
		return false
	}
	same := func(d *Definition) bool {
		return d != nil && d.Version == def.Version && d.Generation == def.Generation && d.Same(def)
	}
	if same(a.target) {
		return false
	}
	if same(a.def) && a.target == nil {
		return false
	}
	return true
}

// errBuildCheck is a build whose result does not match its source.
type errBuildCheck struct{ msg string }

func (e *errBuildCheck) Error() string { return e.msg }

// build builds version def of an attached projection beside the active
// one and swaps it in:
//
//  1. under dmu, a copy of the source's entities at its current position
//     (the head: O(1), copy-on-write) and a shadow deriver whose changes
//     the applier keeps from now on;
//  2. without the lock, every entity of the head into the shadow (the
//     applier goes on; progress is reported every second);
//  3. the kept changes into the shadow, until few are left, then under
//     dmu the rest, and the applier maintains the shadow itself;
//  4. a check: the shadow's entities and members against a count of the
//     source at one position (both copied under dmu, counted without it);
//  5. under dmu, the swap: readers see the new version from the next
//     snapshot, which is published at once.
//
// A build that ctx cancels (a newer declaration, the table dropped, the
// node stopping) leaves the active version as it was.
func (t *Table) build(ctx context.Context, def *Definition, report func(BuildProgress)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t.dmu.Lock()
	a := t.projection(def.Full())
	if a == nil {
		t.dmu.Unlock()
		return fmt.Errorf("projection %s is not attached", def.Name)
	}
	if a.cancel != nil {
		a.cancel() // an older build gives way
	}
	sh := newDeriver(def, t.splitShards(def))
	head, seq := t.rows.Copy(), t.seq
	a.target, a.shadow, a.buffering, a.buf, a.cancel = def, sh, true, nil, cancel
	a.progress = BuildProgress{Version: def.Version, Generation: def.Generation, Phase: "build", Head: seq, Total: int64(head.Len()), Started: time.Now()}
	t.dmu.Unlock()

	fail := func(err error) error {
		t.dmu.Lock()
		if a.shadow == sh {
			a.target, a.shadow, a.buffering, a.buf, a.cancel = nil, nil, false, nil, nil
			if ctx.Err() == nil {
				a.lastErr = err.Error()
			}
		}
		t.dmu.Unlock()
		return err
	}
	progress := func(phase string, done int64) {
		t.dmu.Lock()
		p := &a.progress
		p.Phase, p.Done = phase, done
		el := time.Since(p.Started).Seconds()
		if el > 0 {
			p.RatePerSec = float64(done) / el
		}
		if p.RatePerSec > 0 && p.Total > done {
			p.ETA = (time.Duration(float64(p.Total-done)/p.RatePerSec) * time.Second).Round(time.Second).String()
		} else {
			p.ETA = ""
		}
		cp := *p
		t.dmu.Unlock()
		if report != nil {
			report(cp)
		}
	}

	// 2. The head (an aggregate's groups are written once, at the end).
	if def.Kind == KindAggregate {
		sh.deferred = map[groupID]struct{}{}
	}
	var done int64
	last := time.Now()
	var err error
	var e engine.Entity // the deriver keeps no part of it (detaching what it keeps)
	head.Scan(func(p engine.Packed) bool {
		p.DecodeInto(&e)
		sh.apply(change{new: &e, ver: e.Version, ts: e.Timestamp})
		done++
		if done&4095 == 0 {
			if err = ctx.Err(); err != nil {
				return false
			}
			if time.Since(last) >= time.Second {
				last = time.Now()
				progress("build", done)
			}
		}
		return true
	})
	if err != nil {
		return fail(err)
	}
	sh.flush()
	progress("catch-up", done)
	if t.afterHead != nil {
		t.dmu.Lock()
		t.afterHead(a)
		t.dmu.Unlock()
	}

	// 3. The changes since the head.
	for {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		t.dmu.Lock()
		if a.shadow != sh {
			t.dmu.Unlock()
			return fail(context.Canceled)
		}
		buf := a.buf
		a.buf = nil
		if len(buf) < 1024 {
			for _, c := range buf {
				sh.apply(c)
			}
			a.buffering = false
			t.dmu.Unlock()
			break
		}
		t.dmu.Unlock()
		for _, c := range buf {
			sh.apply(c)
		}
	}

	// 4. The check, on copies at one position.
	progress("check", done)
	t.dmu.Lock()
	if a.shadow != sh {
		t.dmu.Unlock()
		return fail(context.Canceled)
	}
	src, rows, members, at := t.rows.Copy(), int64(sh.rows.Len()), sh.members, t.seq
	t.dmu.Unlock()
	// A deriver of its own: the applier is using sh (its key hints) meanwhile.
	wantRows, wantMembers := newDeriver(def, t.splitShards(def)).expected(src)
	if rows != wantRows || members != wantMembers {
		return fail(&errBuildCheck{fmt.Sprintf("version %d does not match its source at %d: %d entities holding %d source entities, the source gives %d holding %d",
			def.Version, at, rows, members, wantRows, wantMembers)})
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}

	// 5. The swap, published with the source at once: the source and its
	// projections are always published at one position.
	t.dmu.Lock()
	if a.shadow != sh {
		t.dmu.Unlock()
		return context.Canceled
	}
	a.def, a.active = def, sh
	a.target, a.shadow, a.buf, a.cancel, a.lastErr = nil, nil, nil, nil, ""
	a.progress.Phase, a.progress.Done, a.progress.ETA = "done", a.progress.Total, ""
	t.dirty = true
	p := t.publishLocked()
	t.dmu.Unlock()
	t.wake(p)
	return nil
}

// projectionStatus returns the status of an attached projection.
func (t *Table) projectionStatus(full string) (ProjectionStatus, bool) {
	t.dmu.Lock()
	defer t.dmu.Unlock()
	a := t.projection(full)
	if a == nil {
		return ProjectionStatus{}, false
	}
	st := ProjectionStatus{Name: engine.ShownTable(a.reader.name), Full: a.reader.name, Source: engine.ShownTable(t.name), Error: a.lastErr}
	if a.def != nil {
		st.Version, st.Generation, st.Kind = a.def.Version, a.def.Generation, a.def.Kind
		st.State = "active"
	}
	if a.target != nil {
		p := a.progress
		st.Build = &p
		if st.Kind == "" {
			st.Kind = a.target.Kind
		}
		if a.def == nil {
			st.State = "building"
		} else {
			st.State = "rebuilding"
		}
	}
	if s := a.reader.Snapshot(); s != nil {
		st.Seq, st.Entities = s.Seq, s.Len()
	}
	st.Lag = t.behind.Load()
	if f := t.Fault(); f != nil {
		st.State = "faulted"
		st.Error = fmt.Sprintf("the source's journal record %d cannot be applied: %s", f.Seq, f.Error)
	}
	return st, true
}

// readers returns the attached projections' read tables.
func (t *Table) readers() []*Table {
	t.dmu.Lock()
	defer t.dmu.Unlock()
	out := make([]*Table, len(t.derived))
	for i, a := range t.derived {
		out[i] = a.reader
	}
	return out
}
