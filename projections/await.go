package projections

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tidwall/btree"
)

// Waits for a view to move, without a goroutine: a registration (Wait)
// holds a callback, and the publish that moves the view past it calls
// it. The front doors' long-polls and reads of a position wait this way,
// so that a waiting request costs a few hundred bytes on its node and
// nothing on the JetStream server (an earlier change feed held a
// consumer of the table's stream per waiting request, and a flood of
// them took every consumer the stream may have).
//
// A publish wakes only the waits it satisfies: the waits for a position
// are kept in order of position, those for partitions in order of
// partition and position, and the applier notes which partitions it
// applied records of while any such wait is registered. So a wait far
// ahead of the view costs nothing per publish, where a channel closed on
// every publish would wake every waiter, each to go back to sleep.

// Wait is a registration of Await, until it is woken or cancelled.
type Wait struct {
	t     *Table
	id    uint64
	from  uint64
	parts []string // nil: any record
	wake  func()
	done  bool // woken or cancelled (under t.aw.mu)
}

// partWait is one partition of a Wait for partitions.
type partWait struct {
	pk string
	w  *Wait
}

// awaiters are the waits registered on one view.
type awaiters struct {
	mu      sync.Mutex
	nextID  uint64
	bySeq   *btree.BTreeG[*Wait]    // waits for any record, by (from, id)
	byPart  *btree.BTreeG[partWait] // waits for partitions, by (pk, from, id)
	stopped bool                    // the view stopped: every wait is due at once
	// parted counts the waits for partitions: while it is not 0, Apply
	// notes the partitions of the records it applies (Table.touched).
	parted atomic.Int64
}

func lessWait(a, b *Wait) bool {
	if a.from != b.from {
		return a.from < b.from
	}
	return a.id < b.id
}

func lessPartWait(a, b partWait) bool {
	if a.pk != b.pk {
		return a.pk < b.pk
	}
	return lessWait(a.w, b.w)
}

// init makes the trees (under mu).
func (aw *awaiters) init() {
	if aw.bySeq == nil {
		opts := btree.Options{NoLocks: true}
		aw.bySeq = btree.NewBTreeGOptions(lessWait, opts)
		aw.byPart = btree.NewBTreeGOptions(lessPartWait, opts)
	}
}

// Await arranges for wake to be called once the view has moved to
// journal position from or beyond: once it has published position from
// when partitions is empty; otherwise once it has applied a record at or
// after from of one of partitions (such a record is in the journal then,
// and published with the view's next publish, which calls wake). wake is
// also called when the view stops (Fail, a fault, the table dropped).
//
// It returns nil when that is so already (wake is never called then), and
// otherwise the registration, which Cancel removes. wake is called at most
// once, on the goroutine that published or stopped the view (the
// applier, mostly), after the view's own locks are released: it must not
// block, only hand the work on.
//
// Cost: O(log n) in the waits registered, and one B-tree entry per
// partition for a wait for partitions; a publish costs O(log n) per wait
// it wakes and per partition it applied while partition waits exist.
func (t *Table) Await(from uint64, partitions []string, wake func()) *Wait {
	w := &Wait{t: t, from: from, wake: wake}
	for _, pk := range partitions {
		if !t.Holds(pk) {
			// This view does not see that partition's records (another
			// host holds its shard): any record may be one of them.
			partitions = nil
			break
		}
	}
	if len(partitions) == 0 {
		defer t.learn(from) // after the registration: what it learns wakes it
		aw := &t.aw
		aw.mu.Lock()
		defer aw.mu.Unlock()
		if aw.stopped || t.snap.Load().Seq >= from {
			return nil
		}
		aw.init()
		aw.nextID++
		w.id = aw.nextID
		aw.bySeq.Set(w)
		return w
	}
	w.parts = slices.Compact(slices.Sorted(slices.Values(partitions)))
	// Under dmu, which Apply holds: the writer's partitions include what
	// was applied and not yet published, and every record applied after
	// this sees parted above 0 and is noted for the next publish.
	t.dmu.Lock()
	defer t.dmu.Unlock()
	for _, pk := range w.parts {
		if p, ok := t.parts.Get(&Partition{Key: pk}); ok && p.LastSeq >= from {
			return nil
		}
	}
	aw := &t.aw
	aw.mu.Lock()
	defer aw.mu.Unlock()
	if aw.stopped {
		return nil
	}
	aw.init()
	aw.nextID++
	w.id = aw.nextID
	for _, pk := range w.parts {
		aw.byPart.Set(partWait{pk: pk, w: w})
	}
	aw.parted.Add(1)
	return w
}

// Cancel removes the registration; it reports whether it did before wake
// was called (wake is then never called).
func (w *Wait) Cancel() bool {
	aw := &w.t.aw
	aw.mu.Lock()
	defer aw.mu.Unlock()
	if w.done {
		return false
	}
	aw.removeLocked(w)
	return true
}

// removeLocked takes w out of the trees and marks it done.
func (aw *awaiters) removeLocked(w *Wait) {
	w.done = true
	if w.parts == nil {
		aw.bySeq.Delete(w)
		return
	}
	for _, pk := range w.parts {
		aw.byPart.Delete(partWait{pk: pk, w: w})
	}
	aw.parted.Add(-1)
}

// published is what one publish hands to the waits: the snapshot it
// stored, the partitions it applied records of since the last one (with
// the last such record's position) and whether the whole view was
// replaced (a snapshot file loaded), which no partition list describes.
type published struct {
	snap    *Snapshot
	touched map[string]uint64
	all     bool
	readers []*Table // the declared projections' read tables it published too
}

// noteTouched records, for the waits for partitions, that the writer
// applied a record of pk at seq (under dmu).
func (t *Table) noteTouched(pk string, seq uint64) {
	if t.aw.parted.Load() == 0 {
		return
	}
	if t.touched == nil {
		t.touched = map[string]uint64{}
	}
	t.touched[pk] = seq
}

// wakeWaits calls the waits p satisfies (after the view's locks are
// released).
func (t *Table) wakeWaits(p published) {
	aw := &t.aw
	aw.mu.Lock()
	if aw.bySeq == nil || (aw.bySeq.Len() == 0 && aw.byPart.Len() == 0) {
		aw.mu.Unlock()
		return
	}
	var due []*Wait
	for {
		w, ok := aw.bySeq.Min()
		if !ok || w.from > p.snap.Seq {
			break
		}
		aw.removeLocked(w)
		due = append(due, w)
	}
	if aw.byPart.Len() > 0 {
		var found []*Wait
		take := func(pk string, last uint64) {
			aw.byPart.Ascend(partWait{pk: pk, w: &Wait{}}, func(e partWait) bool {
				if e.pk != pk || e.w.from > last {
					return false
				}
				found = append(found, e.w)
				return true
			})
		}
		if p.all {
			// The view was replaced: every partition's last position
			// is the snapshot's.
			var pks []string
			aw.byPart.Scan(func(e partWait) bool {
				if len(pks) == 0 || pks[len(pks)-1] != e.pk {
					pks = append(pks, e.pk)
				}
				return true
			})
			for _, pk := range pks {
				take(pk, p.snap.Partition(pk).LastSeq)
			}
		}
		for pk, last := range p.touched {
			take(pk, last)
		}
		for _, w := range found {
			if !w.done { // found through two of its partitions
				aw.removeLocked(w)
				due = append(due, w)
			}
		}
	}
	aw.mu.Unlock()
	for _, w := range due {
		w.wake()
	}
}

// stopWaits wakes every wait: the view stopped, and will not move again.
func (t *Table) stopWaits() {
	aw := &t.aw
	aw.mu.Lock()
	aw.stopped = true
	var due []*Wait
	if aw.bySeq != nil {
		aw.bySeq.Scan(func(w *Wait) bool { due = append(due, w); return true })
		aw.byPart.Scan(func(e partWait) bool {
			if e.pk == e.w.parts[0] { // once per wait
				due = append(due, e.w)
			}
			return true
		})
		for _, w := range due {
			aw.removeLocked(w)
		}
	}
	aw.mu.Unlock()
	for _, w := range due {
		w.wake()
	}
}

// Waiting returns how many waits are registered on the view.
func (t *Table) Waiting() int {
	aw := &t.aw
	aw.mu.Lock()
	defer aw.mu.Unlock()
	if aw.bySeq == nil {
		return 0
	}
	return aw.bySeq.Len() + int(aw.parted.Load())
}
