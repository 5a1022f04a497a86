package projections

import (
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
	// million entities, deltas of 100,000, a tail of 1,000 entities.
	chain := snapState{intact: true, baseEnts: 1_000_000, chainEnts: 100_000, touched: 1_000, baseAge: time.Minute}
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
		{"empty base", with(func(s *snapState) { s.tailRecords, s.baseEnts, s.chainEnts = DefaultSnapshotEvery, 0, 0 }), snapCompacted},
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

// TestSharedKeepFrom: the store's retention keeps the newest two bases,
// and every base from the horizon base (the newest before the stream's
// first sequence) when the journal was pruned.
func TestSharedKeepFrom(t *testing.T) {
	objs := func(bases ...uint64) []sharedObject {
		var out []sharedObject
		for _, b := range bases {
			out = append(out, sharedObject{seq: b, base: true}, sharedObject{seq: b + 5, prev: b})
		}
		return out
	}
	for _, c := range []struct {
		name  string
		objs  []sharedObject
		first uint64
		want  uint64
		ok    bool
	}{
		{"none", nil, 1, 0, false},
		{"one base", objs(100), 1, 0, false},
		{"two bases", objs(100, 200), 1, 100, true},
		{"three bases, nothing pruned", objs(100, 200, 300), 1, 200, true},
		{"an empty stream", objs(100, 200, 300), 0, 200, true},
		{"pruned after the oldest", objs(100, 200, 300, 400), 101, 100, true},
		{"pruned after the second", objs(100, 200, 300, 400), 201, 200, true},
		{"pruned between bases", objs(100, 200, 300, 400), 250, 200, true},
		{"pruned after the newest but one", objs(100, 200, 300, 400), 301, 300, true},
		{"pruned after the newest", objs(100, 200, 300, 400), 401, 300, true},
		{"pruned before every base", objs(100, 200, 300), 50, 200, true},
	} {
		got, ok := sharedKeepFrom(c.objs, c.first)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: keep from %d (%v), want %d (%v)", c.name, got, ok, c.want, c.ok)
		}
	}
}
