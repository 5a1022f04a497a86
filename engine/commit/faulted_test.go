package commit_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// TestTableFaulted: once a table's view is faulted (its journal holds a
// record it cannot apply), the committer answers the table's commands with
// TableFaulted at once, before any append, and nothing more is written to
// its journal; the other tables commit as before.
func TestTableFaulted(t *testing.T) {
	r := newRig(t)
	c := r.committer(t, r.j)
	info, err := c.CreateTable(r.ctx, "Faulty")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTable(r.ctx, "Sound"); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(r.nc)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(r.ctx, r.j.PartitionSubject("Faulty", info.Epoch, info.Shards, "p"), []byte("nineteen junk bytes"))
	if err != nil {
		t.Fatal(err)
	}
	tv, _ := r.views.Table("Faulty")
	if _, err := tv.WaitSeq(r.ctx, ack.Sequence); engine.ErrorCode(err) != engine.CodeTableFaulted {
		t.Fatalf("the view after junk: %v", err)
	}
	for _, pk := range []string{"p", "q"} {
		rep := submit(c, &engine.Command{Table: "Faulty", Ops: []engine.Operation{{Op: engine.OpInsert, Entity: engine.NewEntity(pk, "r")}}})
		if rep.Error == nil || rep.Error.Code != engine.CodeTableFaulted {
			t.Fatalf("insert into %s: reply %+v", pk, rep)
		}
	}
	if _, last, err := r.j.StreamBounds(r.ctx, "Faulty", info.Epoch); err != nil || last != ack.Sequence {
		t.Fatalf("the faulted table's journal ends at %d (%v), want %d: nothing appended", last, err, ack.Sequence)
	}
	if s := c.Stats(); s.Records != 0 {
		t.Fatalf("%d records appended", s.Records)
	}
	rep := submit(c, &engine.Command{Table: "Sound", Ops: []engine.Operation{{Op: engine.OpInsert, Entity: engine.NewEntity("p", "r")}}})
	if rep.Error != nil {
		t.Fatalf("another table: %v", rep.Error)
	}
}
