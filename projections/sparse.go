package projections

import (
	"cmp"
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/journal"
)

// A view holding some of its table's shards, once caught up, tails them
// alone on a consumer filtered by their subjects (journal.ConsumeShards):
// the journal's fan-out then shrinks with the hosts, where a view reading
// the whole journal to skip other shards' records would receive every
// record on every host. It replays on the whole journal
// (journal.ConsumeHeld), and goes back to it when it falls sparseBehind
// behind (followTable switches on errSwitch). Such a view is sparse:
// while it tails, its records come with gaps, and its position moves on
// its own records only. A wait for a position that is another shard's
// record asks the reader where it stands (journal.Stand: the record at
// the position, which the view waits for when it is one of its shards';
// otherwise the stream's last sequence, then the last record of each of
// its shards, asked of the stream's leader), and the view moves to the
// stream's last sequence once it has applied the last record of its
// shards before it. A question at a position costs a direct get first,
// and nothing more when that is a record of its own shards; then (and
// for a question about any record) one request for the stream's state
// when the stream has not moved past the view, one more per shard held
// when it has; questions asked while one is answered are answered
// together.
//
// Who asks: reads at a position (WaitPosition, WaitAt, Await for any
// record), a ticker while waits for any record are registered (a change
// feed's long-poll of the whole table: another shard's record then wakes
// it within standTick), and every standEvery otherwise, so that an idle
// view's position, and its shard bases', follow the journal (without
// which the journal is never cut). The committer's waits are for its own
// records, which come anyway.

// maxSparseShards bounds the shards a sparse view filters on; a view
// holding more reads the whole journal (journal.ConsumeHeld). Each
// filter subject is a line of the consumer's configuration.
const maxSparseShards = 1024

// errSwitch ends one reader of a sparse view for the other (followTable).
var errSwitch = errors.New("projections: switch the view's reader")

// sparseBehind is how many records of its shards a sparse view's filtered
// consumer may have pending before the view goes back to reading the
// whole journal until it has caught up. JetStream reads a backlog for
// many filter subjects by looking each matching subject up in every
// block it scans, which on a table of thousands of partitions made a
// replay of 50,000 records take 8 s against 0.2 s for the whole journal
// (BenchmarkReadHeld); at the stream's end it scans the few records
// left, which costs what the whole journal's consumer does. A burst of
// a few thousand writes leaves a view that many behind for a moment:
// the bound is above that, so that bursts do not make it switch.
const sparseBehind = 8192

// sparseBehindTest, when not 0, replaces sparseBehind in a test.
var sparseBehindTest atomic.Uint64

// behindBound is sparseBehind, or a test's.
func behindBound() uint64 { return cmp.Or(sparseBehindTest.Load(), sparseBehind) }

const (
	// standTick is how often waits for any record make a sparse view
	// learn where it stands, while there are some.
	standTick = 100 * time.Millisecond
	// standEvery is how often an idle sparse view learns it.
	standEvery = 10 * time.Second
)

// heldShards lists the shards a partial view holds, or nil when a view
// of them would read the whole journal: one that holds every shard, or
// more than maxSparseShards.
func (t *Table) heldShards() []uint32 {
	if t.held == nil {
		return nil
	}
	var out []uint32
	for s, h := range t.held {
		if h {
			out = append(out, uint32(s))
		}
	}
	if len(out) > maxSparseShards || len(out) == int(t.shards) {
		return nil
	}
	return out
}

// learn asks the reader of t's view (its source's, for a projection's
// read table) to learn whether it stands at seq, when the view is sparse
// and not there yet.
func (t *Table) learn(seq uint64) {
	src := t
	if t.source != nil {
		src = t.source
	}
	if s := src.stand.Load(); s != nil && src.snap.Load().Seq < seq {
		s.Learn(seq)
	}
}

// WaitAt is WaitSeq for a position that may be another shard's record, a
// client's or a trigger's: a sparse view learns where it stands, and
// again every standTick while it waits (the record may be written after
// the wait began, on a shard another host holds).
func (t *Table) WaitAt(ctx context.Context, seq uint64) (*Snapshot, error) {
	for {
		t.learn(seq)
		if !t.sparseNow() {
			return t.WaitSeq(ctx, seq)
		}
		tctx, cancel := context.WithTimeout(ctx, standTick)
		s, err := t.WaitSeq(tctx, seq)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return s, err
		}
	}
}

// sparseNow says whether t's view (its source's, for a projection's read
// table) follows its shards alone now.
func (t *Table) sparseNow() bool {
	if t.source != nil {
		t = t.source
	}
	return t.stand.Load() != nil
}

// watchStand keeps a sparse view's position moving while it follows its
// shards (see above); it returns when ctx ends.
func (t *Table) watchStand(ctx context.Context, stand *journal.Stand) {
	tick := time.NewTicker(standTick)
	defer tick.Stop()
	idle := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		at := t.snap.Load().Seq
		from := t.aw.first()
		for _, r := range t.readers() {
			if f := r.aw.first(); f > 0 && (from == 0 || f < from) {
				from = f
			}
		}
		switch {
		case from > at:
			stand.Learn(from)
		case time.Since(idle) >= standEvery:
			idle = time.Now()
			stand.Learn(math.MaxUint64)
		}
	}
}

// first returns the lowest position a wait for any record waits for, 0
// for none.
func (aw *awaiters) first() uint64 {
	aw.mu.Lock()
	defer aw.mu.Unlock()
	if aw.bySeq == nil {
		return 0
	}
	if w, ok := aw.bySeq.Min(); ok {
		return w.from
	}
	return 0
}
