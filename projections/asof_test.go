package projections_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections"
)

// history appends to table: v1 of (p, r), v2 of it, its deletion, then
// (q, r): four records, so that each position holds a different state.
func (r *rig) history(table string) {
	r.t.Helper()
	epoch := r.catalog[table]
	put := func(pk string, v int64) *engine.Record {
		return &engine.Record{Time: v, PartitionKey: pk, Nonce: fmt.Sprint("n", v),
			Events: []engine.Event{{Kind: engine.EventPut, RowKey: "r",
				Properties: []engine.Property{{Name: "V", Value: engine.Int64(v)}}}}}
	}
	del := &engine.Record{Time: 3, PartitionKey: "p", Nonce: "n3", Events: []engine.Event{{Kind: engine.EventDelete, RowKey: "r"}}}
	last := map[string]uint64{}
	for _, rec := range []*engine.Record{put("p", 1), put("p", 2), del, put("q", 4)} {
		seq, err := r.j.Append(r.ctx, table, epoch, rigShards, rec, last[rec.PartitionKey])
		last[rec.PartitionKey] = seq
		if err != nil {
			r.t.Fatal(err)
		}
	}
}

// state describes a snapshot: its position and every entity with its V.
func state(s *projections.Snapshot) string {
	out := fmt.Sprintf("@%d", s.Seq)
	s.Scan(func(e *engine.Entity) bool {
		v, _ := e.Get("V")
		out += fmt.Sprintf(" %s/%s=%d", e.PartitionKey, e.RowKey, v.Int())
		return true
	})
	return out
}

// TestAsOf: a view as of each position holds exactly what the records up
// to it made of the table; positions outside the journal, beyond the
// limit or whose history was removed are coded errors; finished views are
// kept (at most AsOfCache) and a position asked again is not replayed.
func TestAsOf(t *testing.T) {
	r := newRig(t)
	r.cfg.AsOfMaxRecords = 3
	r.cfg.AsOfCache = 2
	for _, name := range []string{"Tab", "Purged", "Holed"} {
		r.create(name)
		r.history(name)
	}
	vctx, stop := context.WithCancel(r.ctx)
	defer stop()
	v, done := r.start(vctx)
	if err := v.WaitReady(r.ctx); err != nil {
		t.Fatal(err)
	}
	tb, _ := v.Table("Tab")
	want := map[uint64]string{
		1: "@1 p/r=1",
		2: "@2 p/r=2",
		3: "@3",
		4: "@4 q/r=4",
	}
	first := map[uint64]*projections.Snapshot{}
	for _, seq := range []uint64{2, 1, 3, 4} {
		s, err := v.AsOf(r.ctx, tb, seq)
		if err != nil {
			t.Fatalf("as of %d: %v", seq, err)
		}
		if got := state(s); got != want[seq] {
			t.Errorf("as of %d: %s, want %s", seq, got, want[seq])
		}
		if s.Table != "Tab" || s.Epoch != tb.Epoch() {
			t.Errorf("as of %d: snapshot of %s epoch %d", seq, s.Table, s.Epoch)
		}
		first[seq] = s
	}
	if s := first[4]; s != tb.Snapshot() {
		t.Error("as of the view's own position: not the live snapshot")
	}
	// Three replays (2, 1, 3), at most two kept: 1 and 3, the most recent.
	if n := v.AsOfCached(); n != 2 {
		t.Errorf("%d as-of views kept, want 2", n)
	}
	for _, seq := range []uint64{1, 3} {
		if s, err := v.AsOf(r.ctx, tb, seq); err != nil || s != first[seq] {
			t.Errorf("as of %d again: %v, replayed again: %v", seq, err, s != first[seq])
		}
	}
	if s, err := v.AsOf(r.ctx, tb, 2); err != nil || s == first[2] || state(s) != want[2] {
		t.Errorf("as of 2 after it was dropped: %v, %v", err, s)
	}

	for _, c := range []struct {
		seq  uint64
		code engine.Code
	}{{0, engine.CodeInvalidAsOfPosition}, {5, engine.CodeInvalidAsOfPosition}, {1 << 40, engine.CodeInvalidAsOfPosition}} {
		if _, err := v.AsOf(r.ctx, tb, c.seq); engine.ErrorCode(err) != c.code {
			t.Errorf("as of %d: %v, want %s", c.seq, err, c.code)
		}
	}
	// Beyond the limit: a fifth record, so that 4 is in the past.
	if err := r.append(r.ctx, "Tab", r.catalog["Tab"], 5); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.WaitSeq(r.ctx, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := v.AsOf(r.ctx, tb, 4); engine.ErrorCode(err) != engine.CodeAsOfTooFar {
		t.Errorf("as of 4 with a limit of 3 records: %v", err)
	}

	// History removed behind Cairn's back (the views check every 30 s, so
	// they have not faulted the tables yet).
	if err := r.stream("Purged", r.catalog["Purged"]).Purge(r.ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.stream("Holed", r.catalog["Holed"]).DeleteMsg(r.ctx, 2); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Purged", "Holed"} {
		tb, _ := v.Table(name)
		if _, err := v.AsOf(r.ctx, tb, 3); engine.ErrorCode(err) != engine.CodeHistoryTruncated {
			t.Errorf("%s as of 3: %v, want HistoryTruncated", name, err)
		}
		if _, err := v.AsOf(r.ctx, tb, 1); name == "Holed" && err != nil {
			t.Errorf("%s as of 1, before the hole: %v", name, err)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestAsOfReplaysAtOnce: with AsOfReplays replays running, a read of
// another position is refused with ServerBusy at once, a read of a
// position being replayed waits for that replay, and a replay whose
// reader gave up goes on and keeps its view for the retry.
func TestAsOfReplaysAtOnce(t *testing.T) {
	r := newRig(t)
	r.cfg.AsOfReplays = 1
	epoch := r.create("Big")
	const n = 3000
	for i := 1; i <= n; i++ {
		if err := r.append(r.ctx, "Big", epoch, i); err != nil {
			t.Fatal(err)
		}
	}
	vctx, stop := context.WithCancel(r.ctx)
	defer stop()
	v, done := r.start(vctx)
	if err := v.WaitReady(r.ctx); err != nil {
		t.Fatal(err)
	}
	tb, _ := v.Table("Big")
	gone, cancel := context.WithCancel(r.ctx)
	cancel()
	// A reader that gives up at once: ServerBusy, the replay goes on.
	if _, err := v.AsOf(gone, tb, n-1); engine.ErrorCode(err) != engine.CodeServerBusy {
		t.Fatalf("as of %d without waiting: %v", n-1, err)
	}
	if _, err := v.AsOf(r.ctx, tb, n-2); engine.ErrorCode(err) != engine.CodeServerBusy {
		t.Errorf("a second replay while one runs: %v, want ServerBusy", err)
	}
	start := time.Now()
	s, err := v.AsOf(r.ctx, tb, n-1)
	if err != nil || s.Seq != n-1 || s.Len() != n-1 {
		t.Fatalf("as of %d: %v %v", n-1, err, s)
	}
	t.Logf("joined the replay of %d records, %v", n-1, time.Since(start))
	if _, err := v.AsOf(r.ctx, tb, n-2); err != nil {
		t.Errorf("a replay once the other ended: %v", err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestAsOfFromBases: with snapshots shared, a view as of a position
// starts from the newest snapshot at or before it — here downloaded from
// the store by views whose directory is empty — and replays only the
// records after it, at most AsOfMaxRecords of them; it equals the view a
// replay from the first record gives. A position with no snapshot before
// it replays from the first record, within the same bound (AsOfTooFar
// past it). Once the journal is pruned after the oldest base the store
// keeps (as the journal's pruning does, at a position SharedBases lists),
// a position from that base on is still served, and one before it is
// HistoryTruncated.
func TestAsOfFromBases(t *testing.T) {
	r := newRig(t)
	obj := r.snapshotStore()
	r.cfg = snapConfig(t)
	r.cfg.SnapshotCompact = 0.2 // bases often
	epoch := r.create("Snap")
	h := newHistory(r, "Snap", epoch, uint64(time.Now().UnixNano()))
	cfg := r.cfg
	cfg.SnapshotStore = obj
	writer := r.startViews(cfg, nil)
	const maxRecords = 40
	// Bases and deltas, shared as they are written. Which positions get
	// one depends on how the view's batches fall: records are written
	// until the store has dropped the bases of the first records (it
	// keeps the newest), so that the oldest it keeps is well past
	// maxRecords.
	wtb, _ := writer.v.Table("Snap")
	for written := 0; ; {
		h.write(200)
		written += 200
		if _, err := wtb.WaitSeq(r.ctx, uint64(written)); err != nil {
			t.Fatal(err)
		}
		bases, err := writer.v.SharedBases(r.ctx, "Snap", epoch)
		if err != nil {
			t.Fatal(err)
		}
		if written >= 600 && len(bases) >= 2 && bases[0] > maxRecords+10 {
			break
		}
		if written >= 3000 {
			t.Fatalf("after %d records the store keeps the bases %v, want two or more, the oldest past %d", written, bases, maxRecords+10)
		}
	}
	writer.stop()

	// Views that read the store and write nothing, on an empty directory.
	cfg.SnapshotDir, cfg.AsOfMaxRecords, cfg.AsOfCache, cfg.HistoryCheck = t.TempDir(), maxRecords, 1, time.Hour
	cfg.SnapshotEvery, cfg.NoSnapshotOnStop = 1<<30, true
	log := &logSink{}
	run := r.startViews(cfg, log)
	bases, err := run.v.SharedBases(r.ctx, "Snap", epoch)
	if err != nil {
		t.Fatal(err)
	}
	if len(bases) < 2 {
		t.Fatalf("the store keeps the bases %v, want the newest two at least (a base put as the views stopped may not have had its older ones removed)", bases)
	}
	b := bases[0]
	if b <= maxRecords+10 {
		t.Fatalf("the oldest base kept is at %d: too early for this test", b)
	}
	tb, _ := run.v.Table("Snap")

	fullCfg := r.cfg
	fullCfg.SnapshotDir, fullCfg.AsOfMaxRecords = "", 1<<20
	full := r.startViews(fullCfg, nil)
	ftb, _ := full.v.Table("Snap")
	want := map[uint64]*projections.Snapshot{}
	for _, seq := range []uint64{30, b, b + 5, b + 10} {
		s, err := full.v.AsOf(r.ctx, ftb, seq)
		if err != nil {
			t.Fatal(err)
		}
		want[seq] = s
	}

	asOf := func(seq uint64) *projections.Snapshot {
		t.Helper()
		s, err := run.v.AsOf(r.ctx, tb, seq)
		if err != nil {
			t.Fatalf("as of %d: %v\n%s", seq, err, log)
		}
		sameView(t, fmt.Sprintf("as of %d", seq), s, want[seq])
		return s
	}
	asOf(b + 10)
	if lines := log.find("as-of view replayed", fmt.Sprintf("seq=%d ", b+10)); len(lines) != 1 || !fromSnapshotAtLeast(lines[0], b) {
		t.Fatalf("the view as of %d did not start from a snapshot at or after the base at %d:\n%s", b+10, b, log)
	}
	asOf(30)
	if len(log.find("as-of view replayed", "seq=30 ", "from_snapshot=0 ", "records=30 ")) != 1 {
		t.Fatalf("the view as of 30 was not replayed from the first record:\n%s", log)
	}
	if _, err := run.v.AsOf(r.ctx, tb, b-1); engine.ErrorCode(err) != engine.CodeAsOfTooFar {
		t.Fatalf("as of %d, with no snapshot before it and more than %d records: %v", b-1, maxRecords, err)
	}

	// The journal pruned after the base at b.
	if err := r.stream("Snap", epoch).Purge(r.ctx, jetstream.WithPurgeSequence(b+1)); err != nil {
		t.Fatal(err)
	}
	asOf(b + 5)
	asOf(b)
	if len(log.find("as-of view replayed", fmt.Sprintf("seq=%d ", b), fmt.Sprintf("from_snapshot=%d ", b), "records=0 ")) != 1 {
		t.Fatalf("the view as of the base at %d was not the base:\n%s", b, log)
	}
	if _, err := run.v.AsOf(r.ctx, tb, b-1); engine.ErrorCode(err) != engine.CodeHistoryTruncated {
		t.Fatalf("as of %d, before the oldest base of a pruned journal: %v", b-1, err)
	}
}

// fromSnapshotAtLeast reports whether an as-of line started from a
// snapshot at or after seq.
func fromSnapshotAtLeast(line string, seq uint64) bool {
	_, rest, ok := strings.Cut(line, "from_snapshot=")
	if !ok {
		return false
	}
	from, err := strconv.ParseUint(strings.Fields(rest)[0], 10, 64)
	return err == nil && from >= seq
}
