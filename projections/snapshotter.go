package projections

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// When a view writes its snapshot, and which kind (docs/INTERNALS.md,
// Views, has the measurements behind the defaults):
//
//   - A snapshot is due once the tail, the records applied since the
//     last one, reaches Config.SnapshotEvery records or
//     Config.SnapshotBytes bytes, whichever comes first, whatever the
//     time: what a start replays after a crash is bounded by the tail,
//     not by the clock. A table with a smaller tail writes one once its
//     last is Config.SnapshotInterval old, so that a slowly written
//     table's snapshot is never far behind either.
//   - A snapshot is a delta (snapdelta.go: the entities and partitions
//     the tail touched, read from the published view) when it can follow
//     the chain on disk, and a full base otherwise: the first one, after
//     a write failed, or when the tail touched more entities than the
//     applier keeps note of.
//   - A chain is compacted into a new base when what a start would load
//     beyond the view (the base's entities and the deltas', less the
//     view's: keys written again, and deletions) exceeds
//     Config.SnapshotCompact times the view's entities, when it holds
//     maxChainDeltas deltas, or when its base is Config.SnapshotBaseAge
//     old. A chain that only grew the table (inserts) loads what a new
//     base would, so it is not compacted for its size: rewriting the
//     whole table each time it grew by half cost a table under inserts
//     more than the deltas themselves (docs/PERFORMANCE.md, Snapshot
//     writing). The base is written beside the
//     deltas (one of each kind at a time): a delta at the base's position
//     is written first, so that a crash during the long base write
//     leaves the old chain reaching that position, and the deltas after
//     it follow both.

// The defaults of the snapshot policy (Config), and why.
const (
	// DefaultSnapshotEvery and DefaultSnapshotBytes bound the tail a
	// start replays: 50,000 records, or 32 MiB of them, replay in about
	// 0.25–0.5 s at the 100–190k records/s a view replays on two cores
	// (32 MiB of ~1 KB records is ~30,000 of them, ~0.3 s), against the
	// ~1–1.6 s a million-entity base takes to load.
	DefaultSnapshotEvery = 50_000
	DefaultSnapshotBytes = 32 << 20
	// DefaultSnapshotInterval is how old a snapshot gets on a table
	// whose tail stays under the bounds.
	DefaultSnapshotInterval = 5 * time.Minute
	// DefaultSnapshotCompact is what a start would load beyond the
	// view, in entities, at which a new base is written, as a fraction
	// of the view's: a start loads at most 1+f times the view, and a
	// table rewritten in place writes each entity its deltas hold about
	// 1+1/f times (docs/INTERNALS.md, Views, has the
	// measurements).
	DefaultSnapshotCompact = 0.5
	// DefaultSnapshotBaseAge is the oldest a chain's base gets on a
	// written table: full bases at regular positions, where the
	// journal's pruning may cut it.
	DefaultSnapshotBaseAge = time.Hour
)

// maxChainDeltas is the most deltas a chain holds before it is
// compacted, whatever they hold: each is a file and an object in the
// shared store, which a start opens (or fetches) one after another, and
// the shared store keeps the deltas of two chains.
const maxChainDeltas = 256

// snapKind is the kind of a snapshot to write.
type snapKind int

const (
	snapNone      snapKind = iota
	snapDelta              // a delta after the last snapshot
	snapBase               // a base, nothing before it
	snapCompacted          // a delta after the last snapshot, then a base at the same position
)

func (k snapKind) String() string {
	switch k {
	case snapDelta:
		return "delta"
	case snapBase:
		return "base"
	case snapCompacted:
		return "delta+base"
	}
	return "none"
}

// snapState is what the decision of the next snapshot reads.
type snapState struct {
	tailRecords int           // records applied since the last snapshot
	tailBytes   int64         // their size (recordSize)
	tailAge     time.Duration // since the last snapshot
	intact      bool          // a chain (written, or being written) reaches the last snapshot
	overflow    bool          // the tail touched more entities than the applier notes
	touched     int           // entities the tail touched
	deltaBusy   bool          // a delta is being written
	baseBusy    bool          // a base is being written
	baseAge     time.Duration // since the chain's base was taken
	baseEnts    int           // entities of the chain's base
	chainEnts   int           // entities of the chain's deltas
	deltas      int           // deltas in the chain
	ents        int           // entities in the view now
}

// decideSnapshot is the snapshot to write now, if any: a pure function
// of the state and the configuration, table-tested.
func decideSnapshot(cfg *Config, st snapState) snapKind {
	due := st.tailRecords >= cfg.SnapshotEvery || st.tailBytes >= cfg.SnapshotBytes ||
		cfg.SnapshotInterval > 0 && st.tailRecords > 0 && st.tailAge >= cfg.SnapshotInterval
	if !due {
		return snapNone
	}
	if !st.intact || st.overflow {
		if st.baseBusy {
			return snapNone // the base being written is the one to wait for
		}
		return snapBase
	}
	if st.deltaBusy {
		return snapNone
	}
	// What a start would load beyond the view: entities written again
	// since the base, and the deletions.
	extra := st.baseEnts + st.chainEnts + st.touched - st.ents
	compact := st.baseAge >= cfg.SnapshotBaseAge || st.deltas >= maxChainDeltas ||
		float64(extra) > cfg.SnapshotCompact*float64(st.ents)
	if compact && !st.baseBusy {
		return snapCompacted
	}
	return snapDelta
}

// touchedCap is how many entities the applier notes in a tail before it
// gives up (overflow) and writes a base instead: the note never holds
// more than a fraction of the view (about 100 bytes an entity), or
// SnapshotEvery entities for a small view. A tail that rewrote more of
// the view than that would be compacted at once anyway.
func touchedCap(cfg *Config, ents int) int {
	return max(int(cfg.SnapshotCompact*float64(ents)), cfg.SnapshotEvery)
}

// recordSize is a record's size as the tail counts it: its keys, and its
// properties' names and values (numbers as 8 bytes), plus its messages:
// within a few percent of its msgpack encoding for entities of a few
// properties or more, which is what replaying it costs.
func recordSize(rec *engine.Record) int64 {
	n := len(rec.PartitionKey) + len(rec.Nonce)
	for i := range rec.Events {
		ev := &rec.Events[i]
		n += len(ev.RowKey)
		for _, p := range ev.Properties {
			n += len(p.Name) + max(p.Value.Len(), 8)
		}
	}
	for i := range rec.Messages {
		n += engine.MessageSize(&rec.Messages[i])
	}
	return int64(n)
}

// snapOutcome is a write's end, sent by its goroutine to the applier.
type snapOutcome struct {
	base bool
	seq  uint64
	err  error
}

// chainBook is the applier's account of the chain it writes.
type chainBook struct {
	intact    bool
	baseSeq   uint64
	baseAt    time.Time
	baseEnts  int
	chainEnts int
	deltas    int
}

// snapshotter is an applier's snapshot writer: it notes what the applier
// applies (applier goroutine), decides when to write, and hands the
// published Snapshot to goroutines of its own, one delta and one base at
// a time.
type snapshotter struct {
	v *Views
	t *Table

	// Applier goroutine only.
	lastSeq     uint64    // the position of the last snapshot handed over or loaded
	lastAt      time.Time // when
	tailRecords int
	tailBytes   int64
	touched     *touchedSet // nil after an overflow
	book        chainBook
	old         chainBook // the chain before the base being written, if it bridged
	bridged     bool      // the base being written followed a delta at its position
	deltaBusy   bool
	baseBusy    bool
	outcomes    chan snapOutcome // a write's end; room for one of each kind

	shares *shareQueue // the deltas written, to be put in the shared store
}

// off reports whether the view writes no snapshots: none are kept.
func (s *snapshotter) off() bool { return s.v.cfg.SnapshotDir == "" }

// shards reports whether the view writes shard bases (snapshards.go): it
// holds only some shards of its table, whose bases and deltas would look
// whole to another host.
func (s *snapshotter) shards() bool { return s.t.Partial() }

func newSnapshotter(v *Views, t *Table) *snapshotter {
	return &snapshotter{v: v, t: t, touched: newTouchedSet(), lastAt: time.Now(), outcomes: make(chan snapOutcome, 2), shares: newShareQueue(&t.snapInfo.shareQueue)}
}

// loaded sets the chain the view was loaded from (applier goroutine,
// before the first record).
func (s *snapshotter) loaded(c *loadedChain) {
	s.lastSeq, s.lastAt = c.seq, time.Now()
	s.book = chainBook{intact: true, baseSeq: c.baseSeq, baseAt: c.baseAt, baseEnts: c.baseEnts, chainEnts: c.chainEnts, deltas: c.deltas}
	s.t.snapInfo.noteLoaded(c)
}

// applied notes a record the view applied and writes a snapshot if one
// is due (applier goroutine).
func (s *snapshotter) applied(rec *engine.Record) {
	if s.off() {
		return
	}
	if s.shards() {
		// Every record of the table counts, its shards' or not: a host
		// whose shards see no writes still writes their (small) bases,
		// without which the journal is never cut (SharedBases). A
		// sparse view is not handed the others' records: it counts the
		// positions it moved by.
		s.tailRecords = int(s.t.seq - min(s.lastSeq, s.t.seq))
		s.t.snapInfo.tail.Store(uint64(s.tailRecords))
		s.maybeShards()
		return
	}
	if rec == nil {
		return
	}
	s.tailRecords++
	s.tailBytes += recordSize(rec)
	if s.touched != nil {
		noted := s.touched.note(rec)
		if c := touchedCap(&s.v.cfg, max(s.book.baseEnts, s.t.rows.Len())); !noted || s.touched.keys.len() > c || len(s.touched.parts) > c {
			s.touched = nil // the next snapshot is a base
		}
	}
	s.t.snapInfo.tail.Store(uint64(s.tailRecords))
	s.maybe()
}

// collect takes the outcomes of the writes that ended.
func (s *snapshotter) collect(wait bool) {
	for s.deltaBusy || s.baseBusy {
		var o snapOutcome
		if wait {
			o = <-s.outcomes
		} else {
			select {
			case o = <-s.outcomes:
			default:
				return
			}
		}
		s.ended(o)
	}
}

// ended updates the account of the chain with a write's outcome.
func (s *snapshotter) ended(o snapOutcome) {
	if !o.base {
		s.deltaBusy = false
		if o.err != nil {
			s.book.intact = false // the deltas after it follow nothing
		}
		return
	}
	s.baseBusy = false
	if o.err == nil {
		return
	}
	if s.bridged && s.book.intact {
		// The old chain reaches the base's position (its delta there),
		// and the deltas after it follow it as well: back to that chain,
		// whose deltas now hold those too.
		ents, deltas := s.book.chainEnts, s.book.deltas
		s.book = s.old
		s.book.chainEnts += ents
		s.book.deltas += deltas
		s.t.snapInfo.noteChain(s.book)
		return
	}
	s.book.intact = false
}

func (s *snapshotter) state() snapState {
	st := snapState{
		tailRecords: s.tailRecords, tailBytes: s.tailBytes, tailAge: time.Since(s.lastAt),
		intact: s.book.intact, overflow: s.touched == nil,
		deltaBusy: s.deltaBusy, baseBusy: s.baseBusy,
		baseAge: time.Since(s.book.baseAt), baseEnts: s.book.baseEnts, chainEnts: s.book.chainEnts,
		deltas: s.book.deltas, ents: s.t.rows.Len(),
	}
	if s.touched != nil {
		st.touched = s.touched.keys.len()
	}
	return st
}

// maybe starts the writes that are due (applier goroutine).
func (s *snapshotter) maybe() {
	s.collect(false)
	kind := decideSnapshot(&s.v.cfg, s.state())
	if kind == snapNone {
		return
	}
	s.t.Publish()
	snap := s.t.Snapshot()
	prev, touched := s.lastSeq, s.touched
	s.lastSeq, s.lastAt = snap.Seq, time.Now()
	s.tailRecords, s.tailBytes, s.touched = 0, 0, newTouchedSet()
	s.t.snapInfo.tail.Store(0)
	if kind == snapDelta || kind == snapCompacted {
		s.book.chainEnts += touched.keys.len()
		s.book.deltas++
		s.deltaBusy = true
		s.start(func(context.Context) error { return s.writeDelta(snap, prev, touched) }, false, snap.Seq)
	}
	if kind == snapBase || kind == snapCompacted {
		s.old, s.bridged = s.book, kind == snapCompacted
		s.book = chainBook{intact: true, baseSeq: snap.Seq, baseAt: time.Now(), baseEnts: snap.Len()}
		s.baseBusy = true
		s.t.shared.putting(snap.Seq)
		s.start(func(ctx context.Context) error { return s.writeBase(ctx, snap) }, true, snap.Seq)
	}
	s.t.snapInfo.noteChain(s.book)
}

// maybeShards starts the shard base that is due, if any (applier
// goroutine), once the view's shards are all at its position (no floor),
// one at a time. A shard base is the view's share whole, never a delta,
// so it is due once the tail holds SnapshotEvery records and at least
// SnapshotCompact times the view's entities (each base then costs at
// most 1/SnapshotCompact entity writes per record, as a whole view's
// compactions do), or SnapshotInterval after the last.
func (s *snapshotter) maybeShards() {
	s.collect(false)
	cfg := &s.v.cfg
	due := s.tailRecords >= max(cfg.SnapshotEvery, int(cfg.SnapshotCompact*float64(s.t.rows.Len()))) ||
		cfg.SnapshotInterval > 0 && s.tailRecords > 0 && time.Since(s.lastAt) >= cfg.SnapshotInterval
	if !due || s.baseBusy || s.t.floor != nil {
		return
	}
	s.t.Publish()
	snap := s.t.Snapshot()
	s.lastSeq, s.lastAt = snap.Seq, time.Now()
	s.tailRecords = 0
	s.t.snapInfo.tail.Store(0)
	s.baseBusy = true
	s.start(func(ctx context.Context) error { return s.writeShardBase(ctx, snap) }, true, snap.Seq)
}

// start runs write in a goroutine of the views', which sends its outcome.
// Its context is Run's, and lasts shareOnStopTimeout past Run's end: a
// base the stop catches while it is put in the store is still put (a
// store out of reach holds the stop that long at most), so that the
// store's chain is not left a base behind the node's files.
func (s *snapshotter) start(write func(context.Context) error, base bool, seq uint64) {
	run := s.v.baseContext()
	ctx, cancel := context.WithCancel(context.WithoutCancel(run))
	stop := context.AfterFunc(run, func() {
		grace := time.NewTimer(shareOnStopTimeout)
		defer grace.Stop()
		select {
		case <-grace.C:
			cancel()
		case <-ctx.Done(): // the write ended
		}
	})
	s.v.wg.Add(1)
	go func() {
		defer s.v.wg.Done()
		err := write(ctx)
		cancel()
		stop()
		s.outcomes <- snapOutcome{base: base, seq: seq, err: err}
	}()
}

// final writes a last snapshot when the views stop cleanly and the view
// applied records since its last one (after the applier returned): a
// delta when the chain allows one, else a base.
func (s *snapshotter) final() {
	if s.off() {
		return
	}
	s.collect(true)
	if s.v.cfg.NoSnapshotOnStop || s.t.Fault() != nil || s.t.Err() != nil {
		return
	}
	s.t.Publish()
	snap := s.t.Snapshot()
	if s.shards() {
		s.finalShards(snap)
		return
	}
	if snap.Seq <= s.lastSeq {
		return
	}
	// The views are stopping (Run's context has ended): the upload of
	// this last snapshot has a bound of its own, short, so that a store
	// out of reach (a cluster going down with the node) does not hold
	// the stop.
	ctx, cancel := context.WithTimeout(context.Background(), shareOnStopTimeout)
	defer cancel()
	// The deltas written before are put first (within the same bound):
	// the last of them is what this one follows.
	s.shares.wait(ctx)
	// A delta when it follows the chain, on disk and in the store (a
	// delta the store cannot chain is not shared): the store then holds
	// a chain up to the stop, as the file on disk does.
	if s.book.intact && s.touched != nil && (s.v.cfg.SnapshotStore == nil || s.t.shared.holds(s.lastSeq) || s.v.sharedHolds(ctx, s.t, s.lastSeq)) {
		_ = s.writeDelta(snap, s.lastSeq, s.touched)
		s.shares.wait(ctx)
	} else {
		_ = s.writeBase(ctx, snap)
	}
}

// finalShards writes, as the views stop, a shard base of the records
// applied since the last one.
func (s *snapshotter) finalShards(snap *Snapshot) {
	if s.t.floor != nil || snap.Seq <= s.lastSeq {
		return // its shards are not all at its position, or nothing new
	}
	ctx, cancel := context.WithTimeout(context.Background(), shareOnStopTimeout)
	defer cancel()
	_ = s.writeShardBase(ctx, snap)
}

// snapInfo is a view's snapshot figures, for /metrics: written by its
// snapshotter's goroutines, read by anyone.
type snapInfo struct {
	seq        atomic.Uint64 // position of the last snapshot written or loaded
	at         atomic.Int64  // when it was written (Unix nanoseconds; a loaded one's file says)
	baseSeq    atomic.Uint64 // position of its chain's base
	deltas     atomic.Uint64 // deltas after the base in the chain
	tail       atomic.Uint64 // records applied since the last snapshot was taken
	replayed   atomic.Uint64 // records replayed after the loaded snapshot at the last start
	writing    atomic.Int64  // a base being written: when it started (0: none)
	writeFail  atomic.Uint64 // writes that failed
	shareQueue atomic.Int64  // deltas written and not yet put in the shared store, the one being put included
}

func (si *snapInfo) noteLoaded(c *loadedChain) {
	si.noteWritten(c.seq, c.at)
	si.noteChain(chainBook{baseSeq: c.baseSeq, deltas: c.deltas})
}

// noteWritten records the snapshot written (or loaded) at seq, taken at at.
func (si *snapInfo) noteWritten(seq uint64, at time.Time) {
	for {
		cur := si.seq.Load()
		if seq <= cur {
			return // a base finishing after a later delta
		}
		if si.seq.CompareAndSwap(cur, seq) {
			si.at.Store(at.UnixNano())
			return
		}
	}
}

// noteChain records the chain the applier is writing.
func (si *snapInfo) noteChain(b chainBook) {
	si.baseSeq.Store(b.baseSeq)
	si.deltas.Store(uint64(b.deltas))
}
