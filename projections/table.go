package projections

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/btree"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// DefaultDedupWindow is how long a client's command id is remembered, in
// journal time (record timestamps), so that a retried command is answered
// from its first result instead of being applied twice.
const DefaultDedupWindow = 2 * time.Minute

// Table is the materialised view of one table incarnation. One goroutine,
// the applier, writes it (Apply, Publish); any number of readers use the
// immutable snapshots returned by Snapshot and are never blocked by writes.
type Table struct {
	name   string
	epoch  uint64
	shards uint32 // the incarnation's view shards (engine.TableInfo.Shards)
	held   []bool // the shards this view holds, by number; nil: all
	// split: the table's shards are placed on hosts (Config.Placement),
	// so its aggregates keep a group per shard (derive.go), which reads
	// fold (Fold) whatever this view holds.
	split bool
	// successor is the view that replaced this one (Views.Replace): a
	// wait for a position goes on there.
	successor atomic.Pointer[Table]
	// move, on a view started to replace another (Replace), is what it
	// moves: set before it starts, read only.
	move *moveInfo
	// floor, set when the view started from sources of several positions
	// (shard bases, snapshards.go), is each shard's: a record of a shard
	// at or below its floor is in the view already. Cleared once the
	// view passes floorTop, the highest. Writer state.
	floor    []uint64
	floorTop uint64
	// stand, while the view follows its shards alone (sparse.go), is how
	// it learns where it stands between their records; sparse says its
	// records come with gaps (writer state).
	stand  atomic.Pointer[journal.Stand]
	sparse bool

	// Writer state, owned by the applier goroutine.
	rows        *rowTree
	parts       *btree.BTreeG[*Partition]
	ids         *btree.BTreeG[*CommandRecord]
	expiry      []*CommandRecord // ids in journal-time order, for eviction
	seq         uint64
	dedupWindow int64 // ticks
	dirty       bool

	snap atomic.Pointer[Snapshot]

	// appended holds records this host is appending, by nonce, so that the
	// applier need not decode what the committer already has in memory.
	appended sync.Map

	reads readLoad

	mu     sync.Mutex
	notify chan struct{} // closed and replaced on every Publish or Fail
	failed error

	// aw holds the waits registered with Await (await.go); touched, the
	// partitions applied since the last publish while a wait for
	// partitions exists, and touchAll, set when the whole view was
	// replaced (restore), are writer state under dmu that the next
	// publish hands to them.
	aw       awaiters
	touched  map[string]uint64
	touchAll bool

	faulted atomic.Pointer[Fault] // set once, when the journal holds what the view cannot apply

	// hist is what the view last learnt of its stream's history (its
	// horizon, its retention; history.go), nil before the first look.
	hist atomic.Pointer[journal.History]
	// pruneCut is where the pruner last found the table may be cut
	// (PruneCut).
	pruneCut atomic.Uint64

	// dmu guards the declared projections attached to the table and the
	// writer state a projection's build copies (rows, seq) against the
	// applier: Apply and Publish hold it.
	dmu     sync.Mutex
	derived []*attached
	// source is, for a projection's read table, the table it is derived
	// from (nil for a table).
	source *Table
	// behind is how many records of its journal the applier had yet to
	// apply after its last one (the consumer's pending count): the lag.
	behind atomic.Uint64
	// applyMu makes the applier's records and the records this host
	// applies at their acknowledgement (Appended) one writer.
	applyMu sync.Mutex
	// atAck, while the applier tails the whole journal caught up, applies
	// a record this host appended at its acknowledgement (Appended).
	atAck atomic.Pointer[func(seq uint64, rec *engine.Record)]
	// ackApplied counts the records applied at their acknowledgement.
	ackApplied atomic.Uint64
	// acked keeps the records applied at their acknowledgement until
	// their delivery, which the applier then skips without decoding it.
	acked ackedRecords
	// afterHead, in tests, runs under dmu when a build has done its head.
	afterHead func(*attached)

	snapInfo snapInfo   // its snapshots, for /metrics (snapshotter.go)
	shared   sharedBook // what its snapshot writers know of the store (snapshare.go)
}

// Partition is a view's summary of one partition: the journal position of
// its last record (the expected sequence for the next append) and its load.
type Partition struct {
	Key      string
	LastSeq  uint64
	Records  uint64 // journal records appended
	Writes   uint64 // entity writes (events)
	Entities int64  // entities now present
}

// CommandRecord remembers a committed command by its client id.
type CommandRecord struct {
	PartitionKey string
	ID           string
	Seq          uint64
	First, Count uint32
	Time         int64
}

// rowTree holds a view's entities, packed (engine.Packed): one string
// each, with no pointers for the collector to trace, in key order.
type rowTree = btree.BTreeG[engine.Packed]

// newRows returns an empty tree of entities for one writer.
func newRows() *rowTree {
	return btree.NewBTreeGOptions(engine.LessPacked, btree.Options{NoLocks: true})
}

// unpack decodes a packed entity the tree held (nil for none).
func unpack(p engine.Packed, ok bool) *engine.Entity {
	if !ok {
		return nil
	}
	return p.Entity()
}

func lessPartition(a, b *Partition) bool { return a.Key < b.Key }

func lessCommand(a, b *CommandRecord) bool {
	if a.PartitionKey != b.PartitionKey {
		return a.PartitionKey < b.PartitionKey
	}
	return a.ID < b.ID
}

// NewTable returns an empty view of the table incarnation (name, epoch).
func NewTable(name string, epoch uint64, dedupWindow time.Duration) *Table {
	if dedupWindow <= 0 {
		dedupWindow = DefaultDedupWindow
	}
	opts := btree.Options{NoLocks: true}
	t := &Table{
		name:        name,
		epoch:       epoch,
		rows:        newRows(),
		parts:       btree.NewBTreeGOptions(lessPartition, opts),
		ids:         btree.NewBTreeGOptions(lessCommand, opts),
		dedupWindow: int64(dedupWindow / 100),
		notify:      make(chan struct{}),
	}
	t.Publish()
	return t
}

// Name returns the table's name as its creator spelled it.
func (t *Table) Name() string { return t.name }

// Epoch returns the table's incarnation.
func (t *Table) Epoch() uint64 { return t.epoch }

// Shards is the number of view shards the table's partitions are cut
// into (0: a table of the layout before shards).
func (t *Table) Shards() uint32 { return t.shards }

// Holds reports whether the view holds the partition pk: whether its
// shard is one of those the view materialises (every partition, unless
// the host holds only some shards of the table: Config.Placement).
func (t *Table) Holds(pk string) bool {
	return t.held == nil || t.held[engine.Shard(pk, int(t.shards))]
}

// HoldsShard reports whether the view holds shard s.
func (t *Table) HoldsShard(s uint32) bool { return t.held == nil || int(s) < len(t.held) && t.held[s] }

// Partial reports whether the view holds only some of the table's shards.
func (t *Table) Partial() bool { return t.held != nil }

// layoutOf gives t the shards of o: how many, which it holds, and
// whether they are placed (a view starting over, or read as of a past
// position, holds what the view it stands for held).
func (t *Table) layoutOf(o *Table) { t.shards, t.held, t.split = o.shards, o.held, o.split }

// hold makes the view hold only the shards held says (nil: all). Before
// the view applies anything.
func (t *Table) hold(held []bool) { t.held = t.placed(held) }

// placed is what a view of t's shards holds with the placement held: nil
// (every shard) for a slice that holds every shard or has the wrong
// length.
func (t *Table) placed(held []bool) []bool {
	if t.shards == 0 || len(held) != int(t.shards) || !slices.Contains(held, false) {
		return nil
	}
	return slices.Clone(held)
}

// Apply applies the journal record at seq. Records must come in journal
// order; a record at or below the applied position is ignored (so a
// redelivered record is harmless). The change becomes visible to readers at
// the next Publish. A record of a partition the view does not hold, or a
// nil one (such a record, not decoded: journal.ConsumeHeld; or where a
// sparse view learnt it stands, sparse.go), only moves its position.
func (t *Table) Apply(seq uint64, rec *engine.Record) {
	if seq <= t.seq {
		return
	}
	t.dmu.Lock()
	defer t.dmu.Unlock()
	if t.floor != nil {
		skip := rec != nil && seq <= t.floor[engine.Shard(rec.PartitionKey, int(t.shards))]
		if seq >= t.floorTop {
			t.floor = nil // every shard is at its position from here on
		}
		if skip {
			// In the view already (its shard's base holds it): waits on
			// its partition are told as if it were applied now.
			t.seq, t.dirty = seq, true
			t.noteTouched(rec.PartitionKey, seq)
			return
		}
	}
	if rec == nil || !t.Holds(rec.PartitionKey) {
		t.seq, t.dirty = seq, true
		return
	}
	derived := len(t.derived) > 0
	t.seq = seq
	t.dirty = true
	pk := rec.PartitionKey
	// The hint takes the Set below straight to where the Get ended.
	var hint btree.PathHint
	part, ok := t.parts.GetHint(&Partition{Key: pk}, &hint)
	if ok {
		c := *part
		part = &c
	} else {
		// A record's key may be a substring of the text its entity
		// came in (a request decoded by the front door): the summary,
		// kept as long as the partition, holds a copy of its own.
		part = &Partition{Key: strings.Clone(pk)}
	}
	// From here on pk is the summary's: the command ids kept below for
	// the dedup window hold no record's text either.
	pk = part.Key
	part.LastSeq = seq
	part.Records++
	t.noteTouched(pk, seq)
	for i := range rec.Events {
		ev := &rec.Events[i]
		switch ev.Kind {
		case engine.EventPut:
			e := &engine.Entity{
				PartitionKey: pk,
				RowKey:       ev.RowKey,
				Timestamp:    rec.Time,
				Version:      engine.Version{Seq: seq, Index: uint32(i)},
				Properties:   ev.Properties,
			}
			old, replaced := t.rows.Set(engine.Pack(e))
			if !replaced {
				part.Entities++
			}
			if derived {
				t.applyDerived(change{old: unpack(old, replaced), new: e, ver: e.Version, ts: rec.Time})
			}
		case engine.EventDelete:
			old, deleted := t.rows.Delete(engine.PackedKey(pk, ev.RowKey))
			if deleted {
				part.Entities--
				if derived {
					t.applyDerived(change{old: old.Entity(), ver: engine.Version{Seq: seq, Index: uint32(i)}, ts: rec.Time})
				}
			}
		}
		part.Writes++
	}
	t.parts.SetHint(part, &hint)
	for _, c := range rec.Commands {
		if c.ID == "" {
			continue
		}
		cr := &CommandRecord{PartitionKey: pk, ID: c.ID, Seq: seq, First: c.First, Count: c.Count, Time: rec.Time}
		t.ids.Set(cr)
		t.expiry = append(t.expiry, cr)
	}
	t.evict(rec.Time)
}

// evict forgets command ids older than the dedup window, measured in journal
// time so that a view rebuilt by replay remembers exactly the same ids.
func (t *Table) evict(now int64) {
	n := 0
	for n < len(t.expiry) && t.expiry[n].Time < now-t.dedupWindow {
		cr := t.expiry[n]
		if cur, ok := t.ids.Get(cr); ok && cur == cr {
			t.ids.Delete(cr)
		}
		// Not set to nil: a published Snapshot shares the array (for a
		// snapshot file); it is freed when append or the copy below
		// moves the list.
		n++
	}
	if n > 0 {
		t.expiry = t.expiry[n:]
		if cap(t.expiry) > 1024 && len(t.expiry) < cap(t.expiry)/4 {
			t.expiry = append([]*CommandRecord(nil), t.expiry...)
		}
	}
}

// NoteAppending tells the view that this host is appending rec (whose
// Nonce is unique). If the record is stored, the applier takes it from here
// instead of decoding the message; ForgetAppending drops it afterwards
// either way.
func (t *Table) NoteAppending(rec *engine.Record) { t.appended.Store(rec.Nonce, rec) }

// ForgetAppending drops what NoteAppending stored.
func (t *Table) ForgetAppending(rec *engine.Record) { t.appended.Delete(rec.Nonce) }

// Appended tells the view that rec, which this host appended, is stored
// at seq. When the view has applied every record before it and its
// consumer has nothing else queued, the record is applied and published
// now, without waiting for its delivery (which is then skipped): the
// reply to its commands goes one hop earlier. Otherwise the delivery
// applies it, as every other record.
func (t *Table) Appended(seq uint64, rec *engine.Record) {
	if f := t.atAck.Load(); f != nil {
		(*f)(seq, rec)
	}
}

// AppliedAtAck counts the records the view applied at their
// acknowledgement (Appended) rather than at their delivery.
func (t *Table) AppliedAtAck() uint64 { return t.ackApplied.Load() }

// appendedRecord returns the record being appended with that nonce, or
// applied at its acknowledgement and not yet delivered (once: its
// delivery takes it).
func (t *Table) appendedRecord(nonce string) *engine.Record {
	if v, ok := t.appended.Load(nonce); ok {
		return v.(*engine.Record)
	}
	return t.acked.take(nonce)
}

// ackedKeep bounds the records kept for their delivery after being
// applied at their acknowledgement: a delivery comes within a few
// records, and one that never comes (the consumer resumed past it) must
// not hold its record for ever.
const ackedKeep = 64

// ackedRecords holds the last ackedKeep records applied at their
// acknowledgement whose delivery has not come, by nonce.
type ackedRecords struct {
	mu    sync.Mutex
	recs  map[string]*engine.Record
	order [ackedKeep]string // a ring of the nonces kept, oldest at next
	next  int
}

// keep holds rec until its delivery takes it.
func (a *ackedRecords) keep(rec *engine.Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.recs == nil {
		a.recs = make(map[string]*engine.Record, ackedKeep)
	}
	delete(a.recs, a.order[a.next]) // the oldest, if its delivery never came
	a.order[a.next] = rec.Nonce
	a.next = (a.next + 1) % ackedKeep
	a.recs[rec.Nonce] = rec
}

// take returns the record with that nonce and forgets it (nil: none).
func (a *ackedRecords) take(nonce string) *engine.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	rec := a.recs[nonce]
	if rec != nil {
		delete(a.recs, nonce)
	}
	return rec
}

// Seq returns the writer's applied position (applier goroutine only, and
// under applyMu while records may be applied at their acknowledgement).
func (t *Table) Seq() uint64 { return t.seq }

// appliedSeq is Seq for the applier's goroutine outside its apply, while
// records may be applied at their acknowledgement.
func (t *Table) appliedSeq() uint64 {
	t.applyMu.Lock()
	defer t.applyMu.Unlock()
	return t.seq
}

// Publish makes everything applied so far visible to readers and wakes
// those waiting for a position. It costs O(1) (copy-on-write B-trees), but
// the next writes copy the nodes they touch, so the applier publishes once
// per burst of records rather than once per record.
func (t *Table) Publish() {
	t.dmu.Lock()
	p := t.publishLocked()
	t.dmu.Unlock()
	t.wake(p)
}

// publishLocked stores the snapshot of what was applied, and its declared
// projections' at the same position (under dmu: a build copies rows too,
// and Copy writes the tree's copy-on-write id). It returns what it
// published (snap nil: nothing); the caller then wakes the waiters.
func (t *Table) publishLocked() published {
	if !t.dirty && t.snap.Load() != nil {
		return published{}
	}
	readers := t.publishDerived() // before the source: a reply to a write waits for the source's
	t.dirty = false
	snap := &Snapshot{
		Table: t.name,
		Epoch: t.epoch,
		Seq:   t.seq,
		rows:  t.rows.Copy(),
		parts: t.parts.Copy(),
		ids:   t.ids.Copy(),
		// Appends go past its end and eviction only moves the list's
		// start, so these elements never change.
		expiry: t.expiry[:len(t.expiry):len(t.expiry)],
	}
	t.snap.Store(snap)
	p := published{snap: snap, touched: t.touched, all: t.touchAll, readers: readers}
	t.touched, t.touchAll = nil, false
	return p
}

// wake wakes those waiting for what p published (nothing when p holds
// no snapshot): WaitSeq's waiters and the waits of Await, the table's and
// its declared projections'.
func (t *Table) wake(p published) {
	if p.snap == nil {
		return
	}
	t.mu.Lock()
	close(t.notify)
	t.notify = make(chan struct{})
	t.mu.Unlock()
	t.wakeWaits(p)
	for _, r := range p.readers {
		r.wakeWaits(published{snap: r.snap.Load()})
	}
}

// Fail stops the view: it will not advance again, and waiters get err.
// Used when a record cannot be applied (for example a record written by a
// newer version of Cairn): the view must not silently skip history.
func (t *Table) Fail(err error) {
	t.dmu.Lock()
	for _, a := range t.derived {
		if a.cancel != nil {
			a.cancel() // a build of a projection of a table gone
		}
	}
	t.dmu.Unlock()
	for _, r := range t.readers() {
		r.Fail(err)
	}
	t.mu.Lock()
	t.failLocked(err)
	t.mu.Unlock()
	t.stopWaits()
}

func (t *Table) failLocked(err error) {
	if t.failed == nil {
		t.failed = err
		close(t.notify)
		t.notify = make(chan struct{})
	}
}

// Err returns the error that stopped the view, if any.
func (t *Table) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// Snapshot returns the latest published snapshot.
func (t *Table) Snapshot() *Snapshot { return t.snap.Load() }

// WaitPosition is the read-your-writes wait both front doors offer: the
// published snapshot once the view has reached journal position seq,
// waiting at most wait. A view that stops while waiting answers why
// (TableFaulted, or TableNotFound for a dropped table); one that does not
// get there in time answers PositionNotReached.
func (t *Table) WaitPosition(ctx context.Context, seq uint64, wait time.Duration) (*Snapshot, error) {
	if s := t.snap.Load(); s.Seq >= seq {
		return s, nil
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	s, err := t.WaitAt(wctx, seq)
	if err == nil {
		return s, nil
	}
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return nil, err // the view stopped
	}
	return nil, PositionNotReached(t, seq, wait)
}

// PositionNotReached is the answer to a read of position seq that t's
// view has not reached within wait (WaitPosition, and the front doors'
// waits on Await).
func PositionNotReached(t *Table, seq uint64, wait time.Duration) error {
	if err := t.Err(); err != nil {
		return err // the view stopped
	}
	return engine.Errorf(engine.CodePositionNotReached, "the view of %s has not reached position %d within %v (it is at %d): retry, or check that the position belongs to this table",
		engine.ShownTable(t.name), seq, wait, t.snap.Load().Seq)
}

// WaitSeq waits until the published view has reached journal position seq
// and returns that snapshot. It fails when ctx ends or the view stopped.
func (t *Table) WaitSeq(ctx context.Context, seq uint64) (*Snapshot, error) {
	for {
		s := t.snap.Load()
		if s.Seq >= seq {
			return s, nil
		}
		t.mu.Lock()
		ch, failed := t.notify, t.failed
		t.mu.Unlock()
		if failed != nil {
			if next := t.successor.Load(); next != nil {
				next.learn(seq) // a read's position, perhaps: asked of this view's reader
				return next.WaitSeq(ctx, seq)
			}
			return nil, fmt.Errorf("projections: view of %s stopped: %w", t.name, failed)
		}
		if s = t.snap.Load(); s.Seq >= seq {
			return s, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("projections: waiting for %s to reach %d (at %d): %w", t.name, seq, s.Seq, ctx.Err())
		}
	}
}
