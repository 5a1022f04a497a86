package projections

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// TestDecideSnapshot: when a view writes a snapshot and which kind, as a
// table of states.
func TestDecideSnapshot(t *testing.T) {
	cfg := Config{SnapshotDir: "x"}
	cfg.defaults()
	// A chain that is neither due for compaction nor old: a base of a
	// million entities, deltas of 100,000, a tail of 1,000 entities, all
	// of them rewriting entities of the base.
	chain := snapState{intact: true, baseEnts: 1_000_000, chainEnts: 100_000, touched: 1_000, deltas: 10, ents: 1_000_000, baseAge: time.Minute}
	with := func(f func(*snapState)) snapState {
		st := chain
		f(&st)
		return st
	}
	for _, c := range []struct {
		name string
		st   snapState
		want snapKind
	}{
		{"nothing applied", chain, snapNone},
		{"a small tail, young", with(func(s *snapState) { s.tailRecords, s.tailBytes, s.tailAge = 10, 1000, time.Minute }), snapNone},
		{"records bound", with(func(s *snapState) { s.tailRecords = DefaultSnapshotEvery }), snapDelta},
		{"bytes bound", with(func(s *snapState) { s.tailRecords, s.tailBytes = 10, DefaultSnapshotBytes }), snapDelta},
		{"a small tail, old", with(func(s *snapState) { s.tailRecords, s.tailAge = 1, DefaultSnapshotInterval }), snapDelta},
		{"no tail, old", with(func(s *snapState) { s.tailAge = 10 * DefaultSnapshotInterval }), snapNone},
		{"due, a delta being written", with(func(s *snapState) { s.tailRecords, s.deltaBusy = DefaultSnapshotEvery, true }), snapNone},
		{"due, a base being written", with(func(s *snapState) { s.tailRecords, s.baseBusy = DefaultSnapshotEvery, true }), snapDelta},
		{"no chain", with(func(s *snapState) { s.tailRecords, s.intact = DefaultSnapshotEvery, false }), snapBase},
		{"no chain, a delta being written", with(func(s *snapState) { s.tailRecords, s.intact, s.deltaBusy = DefaultSnapshotEvery, false, true }), snapBase},
		{"no chain, a base being written", with(func(s *snapState) { s.tailRecords, s.intact, s.baseBusy = DefaultSnapshotEvery, false, true }), snapNone},
		{"overflow", with(func(s *snapState) { s.tailRecords, s.overflow = DefaultSnapshotEvery, true }), snapBase},
		{"chain past the fraction", with(func(s *snapState) { s.tailRecords, s.chainEnts = DefaultSnapshotEvery, 499_001 }), snapCompacted},
		{"chain at the fraction", with(func(s *snapState) { s.tailRecords, s.chainEnts = DefaultSnapshotEvery, 499_000 }), snapDelta},
		{"chain past the fraction, a base being written", with(func(s *snapState) { s.tailRecords, s.chainEnts, s.baseBusy = DefaultSnapshotEvery, 600_000, true }), snapDelta},
		{"base old", with(func(s *snapState) { s.tailRecords, s.baseAge = DefaultSnapshotEvery, DefaultSnapshotBaseAge }), snapCompacted},
		{"base old, small tail, old", with(func(s *snapState) {
			s.tailRecords, s.tailAge, s.baseAge = 1, DefaultSnapshotInterval, 2*DefaultSnapshotBaseAge
		}), snapCompacted},
		{"inserts only, the chain twice the base", with(func(s *snapState) {
			s.tailRecords, s.chainEnts, s.touched, s.ents = DefaultSnapshotEvery, 2_000_000, 50_000, 3_050_000
		}), snapDelta},
		{"inserts, some rewritten past the fraction", with(func(s *snapState) {
			s.tailRecords, s.chainEnts, s.touched, s.ents = DefaultSnapshotEvery, 2_000_000, 50_000, 2_000_000
		}), snapCompacted},
		{"deletions past the fraction", with(func(s *snapState) { s.tailRecords, s.ents = DefaultSnapshotEvery, 700_000 }), snapCompacted},
		{"deletions within the fraction", with(func(s *snapState) { s.tailRecords, s.ents = DefaultSnapshotEvery, 800_000 }), snapDelta},
		{"empty base, the table filled since", with(func(s *snapState) {
			s.tailRecords, s.baseEnts, s.chainEnts, s.touched, s.ents = DefaultSnapshotEvery, 0, 0, 1_000, 1_000
		}), snapDelta},
		{"table emptied", with(func(s *snapState) { s.tailRecords, s.ents = DefaultSnapshotEvery, 0 }), snapCompacted},
		{"deltas at the bound", with(func(s *snapState) { s.tailRecords, s.deltas = DefaultSnapshotEvery, maxChainDeltas }), snapCompacted},
		{"deltas below the bound", with(func(s *snapState) { s.tailRecords, s.deltas = DefaultSnapshotEvery, maxChainDeltas-1 }), snapDelta},
	} {
		if got := decideSnapshot(&cfg, c.st); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	never := cfg
	never.SnapshotInterval = -1
	if got := decideSnapshot(&never, with(func(s *snapState) { s.tailRecords, s.tailAge = 1, 1000*time.Hour })); got != snapNone {
		t.Errorf("no time-based snapshot: %v", got)
	}
}

// TestSnapshotterCompaction: a view's snapshotter, each write waited
// for before the next record (so that no decision finds one in
// progress), keeps one base and a chain of deltas while the table only
// grows, every record a new entity: loading them costs what a new base
// would. Once the chain holds more than half the view's entities beyond
// the view (the same entities written again), it writes a new base; and
// a table whose entities are deleted is compacted the same way.
func TestSnapshotterCompaction(t *testing.T) {
	cfg := Config{SnapshotDir: t.TempDir(), SnapshotEvery: 50, SnapshotInterval: -1}
	v := NewViews(nil, slog.New(slog.DiscardHandler), cfg)
	tb := NewTable("Grow", 1, time.Minute)
	s := newSnapshotter(v, tb)
	var seq uint64
	var bases []uint64
	write := func(pk int, kind engine.EventKind) {
		t.Helper()
		seq++
		rec := &engine.Record{Time: int64(seq), PartitionKey: fmt.Sprint(pk), Nonce: fmt.Sprint(seq), Events: []engine.Event{{Kind: kind, RowKey: "r"}}}
		tb.Apply(seq, rec)
		s.applied(rec)
		s.collect(true)
		if seq < uint64(cfg.SnapshotEvery) {
			return // no snapshot yet
		}
		if !s.book.intact {
			t.Fatalf("at %d: the chain is broken (a write failed)", seq)
		}
		if len(bases) == 0 || bases[len(bases)-1] != s.book.baseSeq {
			bases = append(bases, s.book.baseSeq)
		}
	}
	const n = 1000
	for i := range n {
		write(i, engine.EventPut)
	}
	if len(bases) != 1 || s.book.deltas != n/cfg.SnapshotEvery-1 {
		t.Fatalf("after %d inserts: bases at %v and %d deltas, want one base and a delta every %d records", n, bases, s.book.deltas, cfg.SnapshotEvery)
	}
	for i := range n {
		write(i, engine.EventPut)
		if len(bases) > 1 {
			// Past 500 entities in the chain beyond the view's 1,000,
			// at the first snapshot due after it.
			if i+1 != 550 {
				t.Fatalf("a base after %d entities written again, want 550", i+1)
			}
			break
		}
	}
	if len(bases) != 2 {
		t.Fatalf("after %d entities written again: bases at %v, want a second one", n, bases)
	}
	// Deleting entities: the view shrinks, and the chain's deltas hold
	// the deletions; past half of the view's entities (which the
	// deletions leave at about 700), a base.
	for i := range n {
		write(i, engine.EventDelete)
		if len(bases) > 2 {
			break
		}
	}
	if len(bases) != 3 || tb.rows.Len() < 600 {
		t.Fatalf("after deletions: bases at %v, %d entities left", bases, tb.rows.Len())
	}
}

// TestRecordSize: the tail's count of a record's bytes is within a few
// percent of its encoding for entities of some properties, and never
// far below it.
func TestRecordSize(t *testing.T) {
	rec := &engine.Record{Time: 1, PartitionKey: "p0001", Nonce: "0123456789abcdef0123", Commands: []engine.CommandRef{{ID: "c", Count: 1}},
		Events: []engine.Event{{Kind: engine.EventPut, RowKey: "r0000001", Properties: []engine.Property{
			{Name: "Name", Value: engine.String("Jones, Margaret Anne (Sales)")},
			{Name: "Email", Value: engine.String("margaret.jones@contoso.example")},
			{Name: "Notes", Value: engine.String(string(make([]byte, 900)))},
			{Name: "Age", Value: engine.Int32(38)},
			{Name: "Salary", Value: engine.Double(1.5)},
		}}}}
	enc, err := journal.EncodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if size := recordSize(rec); float64(size) < 0.9*float64(len(enc)) || float64(size) > 1.1*float64(len(enc)) {
		t.Fatalf("a record of %d bytes counts %d", len(enc), size)
	}
}

// TestSharedKept: the store keeps the newest two bases with the deltas
// after the older, the horizon base once the journal was pruned, and with
// a cut the newest base before it and a few spread towards the newest.
func TestSharedKept(t *testing.T) {
	for _, c := range []struct {
		name        string
		bases       []uint64
		first, cut  uint64
		keep        []uint64
		deltasAfter uint64
		ok          bool
	}{
		{"none", nil, 1, 0, nil, 0, false},
		{"one base", []uint64{100}, 1, 0, nil, 0, false},
		{"two bases", []uint64{100, 200}, 1, 0, []uint64{100, 200}, 100, true},
		{"three, nothing pruned", []uint64{100, 200, 300}, 1, 0, []uint64{200, 300}, 200, true},
		{"an empty stream", []uint64{100, 200, 300}, 0, 0, []uint64{200, 300}, 200, true},
		{"unsorted", []uint64{300, 100, 200}, 1, 0, []uint64{200, 300}, 200, true},
		{"pruned after the oldest", []uint64{100, 200, 300, 400}, 101, 0, []uint64{100, 300, 400}, 300, true},
		{"pruned between bases", []uint64{100, 200, 300, 400}, 250, 0, []uint64{200, 300, 400}, 300, true},
		{"pruned after the newest", []uint64{100, 200, 300, 400}, 401, 0, []uint64{300, 400}, 300, true},
		{"pruned before every base", []uint64{100, 200, 300}, 50, 0, []uint64{200, 300}, 200, true},
		{"a cut before every base", []uint64{100, 200, 300}, 1, 50, []uint64{100, 200, 300}, 200, true},
		{"a cut, spread four ways", []uint64{100, 200, 300, 400, 500, 600, 700, 800, 900, 1000}, 1, 150,
			[]uint64{100, 300, 500, 700, 900, 1000}, 900, true},
		{"a cut and a horizon", []uint64{100, 200, 300, 400, 500, 600}, 150, 450, []uint64{100, 400, 500, 600}, 500, true},
	} {
		keep, after, ok := sharedKept(c.bases, c.first, c.cut)
		var got []uint64
		for b := range keep {
			got = append(got, b)
		}
		slices.Sort(got)
		if ok != c.ok || after != c.deltasAfter || !slices.Equal(got, c.keep) {
			t.Errorf("%s: keeps %v and the deltas after %d (%v), want %v after %d (%v)", c.name, got, after, ok, c.keep, c.deltasAfter, c.ok)
		}
	}
}
