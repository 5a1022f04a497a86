package projections_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/projections"
)

// TestViewsFaultedTables: a table whose journal holds a record that cannot
// be applied — junk, a record with a key Cairn forbids, a record on another
// partition's subject — or whose records were purged is faulted: its view
// stops at the last good record with nothing of the bad one applied, its
// readers and the committer get TableFaulted, the fault names the record,
// and the other tables serve and the views become ready all the same.
func TestViewsFaultedTables(t *testing.T) {
	r := newRig(t)
	js, err := jetstream.New(r.nc)
	if err != nil {
		t.Fatal(err)
	}
	raw := func(table string, pk string, data []byte) {
		t.Helper()
		if _, err := js.Publish(r.ctx, r.j.PartitionSubject(table, r.catalog[table], rigShards, pk), data); err != nil {
			t.Fatal(err)
		}
	}
	encode := func(rec *engine.Record) []byte {
		t.Helper()
		b, err := journal.EncodeRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	appendN := func(table string, from, to int) {
		t.Helper()
		for i := from; i <= to; i++ {
			if err := r.append(r.ctx, table, r.catalog[table], i); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range []string{"Good", "Junk", "Purged", "Forged", "Mismatch"} {
		r.create(name)
	}
	appendN("Good", 1, 3)
	appendN("Junk", 1, 2)
	raw("Junk", "3", []byte("nineteen junk bytes")) // record 3
	appendN("Junk", 4, 4)
	appendN("Purged", 1, 3)
	if err := r.stream("Purged", r.catalog["Purged"]).Purge(r.ctx); err != nil {
		t.Fatal(err)
	}
	appendN("Forged", 1, 1)
	appendN("Mismatch", 1, 1)

	vctx, stop := context.WithCancel(r.ctx)
	defer stop()
	v, done := r.start(vctx)
	if err := v.WaitReady(r.ctx); err != nil {
		t.Fatal(err)
	}
	table := func(name string) *projections.Table {
		t.Helper()
		tb, ok := v.Table(name)
		if !ok {
			t.Fatalf("table %s is not known", name)
		}
		return tb
	}
	if tb := table("Good"); tb.Fault() != nil || tb.Snapshot().Seq != 3 || tb.Snapshot().Len() != 3 {
		t.Fatalf("Good: fault %+v, at %d with %d entities", tb.Fault(), tb.Snapshot().Seq, tb.Snapshot().Len())
	}
	// checkFault checks a faulted table: where it stopped, what it holds,
	// and that every way in answers TableFaulted.
	checkFault := func(name string, seq uint64, held int) {
		t.Helper()
		tb := table(name)
		f := tb.Fault()
		if f == nil || f.Table != name || f.Seq != seq || f.Error == "" || f.Time.IsZero() {
			t.Fatalf("%s: fault %+v, want one at record %d", name, f, seq)
		}
		if s := tb.Snapshot(); s.Seq != seq-1 || s.Len() != held {
			t.Errorf("%s: view at %d with %d entities, want %d with %d", name, s.Seq, s.Len(), seq-1, held)
		}
		if code := engine.ErrorCode(tb.Err()); code != engine.CodeTableFaulted {
			t.Errorf("%s: Err %v, want TableFaulted", name, tb.Err())
		}
		if _, err := tb.WaitSeq(r.ctx, seq); engine.ErrorCode(err) != engine.CodeTableFaulted {
			t.Errorf("%s: WaitSeq %v, want TableFaulted", name, err)
		}
		if err := v.WaitTableReady(r.ctx, name, r.catalog[name]); engine.ErrorCode(err) != engine.CodeTableFaulted {
			t.Errorf("%s: WaitTableReady %v, want TableFaulted", name, err)
		}
		if l := tb.Load(1); l.Fault == nil || l.Fault.Seq != seq {
			t.Errorf("%s: load shows fault %+v", name, l.Fault)
		}
	}
	checkFault("Junk", 3, 2)
	checkFault("Purged", 1, 0)

	// While the views run: a record with a key Cairn forbids, and a good
	// record of partition "x" on partition "y"'s subject.
	forged := &engine.Record{Time: 2, PartitionKey: "p", Nonce: "forged",
		Events: []engine.Event{{Kind: engine.EventPut, RowKey: "ok"}, {Kind: engine.EventPut, RowKey: "a/b"}}}
	raw("Forged", "p", encode(forged))
	moved := &engine.Record{Time: 2, PartitionKey: "x", Nonce: "moved", Events: []engine.Event{{Kind: engine.EventPut, RowKey: "r"}}}
	raw("Mismatch", "y", encode(moved))
	for _, name := range []string{"Forged", "Mismatch"} {
		if _, err := table(name).WaitSeq(r.ctx, 2); engine.ErrorCode(err) != engine.CodeTableFaulted {
			t.Fatalf("%s: WaitSeq after a forged record: %v", name, err)
		}
		checkFault(name, 2, 1)
	}
	if _, ok := table("Forged").Snapshot().Get("p", "ok"); ok {
		t.Error("the forged record was applied in part")
	}

	// A table created after the fault serves (the catalog goes on).
	r.create("Later")
	appendN("Later", 1, 1)
	if err := v.WaitCatalog(r.ctx, r.catalog["Later"]); err != nil {
		t.Fatal(err)
	}
	if _, err := table("Later").WaitSeq(r.ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("Run stopped: %v", err)
	default:
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestViewsStreamDeleted: a table's stream deleted behind Cairn's back
// faults the table, whether it goes while the views run or before they
// start (long after the table's creation: an empty stream would hide the
// loss); a table that is dropped properly is not faulted.
func TestViewsStreamDeleted(t *testing.T) {
	r := newRig(t)
	js, err := jetstream.New(r.nc)
	if err != nil {
		t.Fatal(err)
	}
	del := func(name string) {
		t.Helper()
		// The views delete a dropped table's stream too: either may be first.
		if err := js.DeleteStream(r.ctx, journal.StreamName("cairn", name, r.catalog[name])); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"Before", "During", "Dropped", "Kept"} {
		r.create(name)
		if err := r.append(r.ctx, name, r.catalog[name], 1); err != nil {
			t.Fatal(err)
		}
	}
	del("Before")
	vctx, stop := context.WithCancel(r.ctx)
	defer stop()
	v, done := r.start(vctx)
	if err := v.WaitReady(r.ctx); err != nil {
		t.Fatal(err)
	}
	if tb, _ := v.Table("Before"); tb.Fault() == nil || tb.Fault().Seq != 1 {
		t.Fatalf("Before: fault %+v, want one at record 1", tb.Fault())
	}
	during, _ := v.Table("During")
	del("During")
	if _, err := during.WaitSeq(r.ctx, 2); engine.ErrorCode(err) != engine.CodeTableFaulted {
		t.Fatalf("During: WaitSeq after its stream was deleted: %v", err)
	}
	// The front doors' wait answers the same.
	if _, err := during.WaitPosition(r.ctx, 2, time.Minute); engine.ErrorCode(err) != engine.CodeTableFaulted {
		t.Fatalf("During: WaitPosition after its stream was deleted: %v", err)
	}
	if f := during.Fault(); f == nil || f.Seq != 2 || during.Snapshot().Len() != 1 {
		t.Fatalf("During: fault %+v with %d entities", f, during.Snapshot().Len())
	}
	dropped, _ := v.Table("Dropped")
	droppedEpoch := r.catalog["Dropped"]
	seq := r.drop("Dropped")
	r.catalog["Dropped"] = droppedEpoch
	del("Dropped")
	if err := v.WaitCatalog(r.ctx, seq); err != nil {
		t.Fatal(err)
	}
	if _, err := dropped.WaitSeq(r.ctx, 2); engine.ErrorCode(err) != engine.CodeTableNotFound || dropped.Fault() != nil {
		t.Fatalf("Dropped: %v, fault %+v", err, dropped.Fault())
	}
	if _, err := dropped.WaitPosition(r.ctx, 2, time.Minute); engine.ErrorCode(err) != engine.CodeTableNotFound {
		t.Fatalf("Dropped: WaitPosition: %v", err)
	}
	if tb, _ := v.Table("Kept"); tb.Fault() != nil || tb.Snapshot().Len() != 1 {
		t.Fatalf("Kept: fault %+v", tb.Fault())
	} else if _, err := tb.WaitPosition(r.ctx, 2, 10*time.Millisecond); engine.ErrorCode(err) != engine.CodePositionNotReached {
		t.Fatalf("Kept: WaitPosition for a record not written: %v", err)
	}
	// What readiness reports: the two live tables without their stream,
	// not the dropped one.
	if catalog, tables := v.Missing(); catalog || !slices.Equal(tables, []string{"Before", "During"}) {
		t.Fatalf("missing: catalog %v, tables %v", catalog, tables)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestViewsFaultRemovedHistory: records removed from a journal while its
// view follows it (a purge, one deleted message) fault the table then, not
// only at the next start; another account's table and an untouched one go
// on serving.
func TestViewsFaultRemovedHistory(t *testing.T) {
	r := newRig(t)
	r.cfg.HistoryCheck = 20 * time.Millisecond
	names := []string{"Purged", "Holed", "Kept", engine.FullTableName("contoso", "Kept")}
	for _, name := range names {
		r.create(name)
		for i := 1; i <= 3; i++ {
			if err := r.append(r.ctx, name, r.catalog[name], i); err != nil {
				t.Fatal(err)
			}
		}
	}
	vctx, stop := context.WithCancel(r.ctx)
	defer stop()
	v, done := r.start(vctx)
	if err := v.WaitReady(r.ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.stream("Purged", r.catalog["Purged"]).Purge(r.ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.stream("Holed", r.catalog["Holed"]).DeleteMsg(r.ctx, 2); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Purged", "Holed"} {
		tb, ok := v.Table(name)
		if !ok {
			t.Fatalf("%s unknown", name)
		}
		// Record 4 never comes: the wait ends with the fault.
		if _, err := tb.WaitSeq(r.ctx, 4); engine.ErrorCode(err) != engine.CodeTableFaulted {
			t.Fatalf("%s: WaitSeq after records were removed: %v", name, err)
		}
		if f := tb.Fault(); f == nil || f.Seq != 1 || !strings.Contains(f.Error, "removed from the journal") {
			t.Fatalf("%s: fault %+v", name, f)
		}
		if s := tb.Snapshot(); s.Seq != 3 || s.Len() != 3 {
			t.Errorf("%s: view at %d with %d entities, want what it had applied", name, s.Seq, s.Len())
		}
	}
	for _, name := range names[2:] {
		if err := r.append(r.ctx, name, r.catalog[name], 4); err != nil {
			t.Fatal(err)
		}
		tb, _ := v.Table(name)
		if _, err := tb.WaitSeq(r.ctx, 4); err != nil || tb.Fault() != nil {
			t.Fatalf("%s: %v, fault %+v", name, err, tb.Fault())
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
