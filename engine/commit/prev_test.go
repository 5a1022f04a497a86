package commit_test

import (
	"context"
	"testing"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/commit"
)

// gateJournal is the real journal, except that the first append waits
// until the test opens the gate: commands submitted meanwhile queue up and
// are decided together, as one group commit.
type gateJournal struct {
	commit.Journal
	entered, open chan struct{}
	first         bool
}

func (j *gateJournal) Append(ctx context.Context, table string, epoch uint64, shards uint32, rec *engine.Record, expectLast uint64) (uint64, error) {
	if !j.first {
		j.first = true // appends of one partition come from one goroutine
		close(j.entered)
		<-j.open
	}
	return j.Journal.Append(ctx, table, epoch, shards, rec, expectLast)
}

// TestRecordsCarryPreviousVersions: every event of a record names the
// version its entity had before it: none for an insert, the committed
// version for a write to an entity of an earlier record, and the earlier
// event of the same record for writes of one entity in one group commit
// (chained), none again after a delete.
func TestRecordsCarryPreviousVersions(t *testing.T) {
	r := newRig(t)
	j := &gateJournal{Journal: r.j, entered: make(chan struct{}), open: make(chan struct{})}
	c := r.committer(t, j)
	if _, err := c.CreateTable(r.ctx, "Prev"); err != nil {
		t.Fatal(err)
	}
	op := func(o engine.Op, rk string, props ...engine.Property) *engine.Command {
		return &engine.Command{Table: "Prev", Ops: []engine.Operation{{Op: o, Entity: engine.NewEntity("p", rk, props...)}}}
	}
	replies := make(chan *engine.Reply, 8)
	send := func(cmd *engine.Command) { c.Submit(cmd, func(rep *engine.Reply) { replies <- rep }) }
	send(op(engine.OpInsert, "a", engine.Property{Name: "N", Value: engine.Int32(1)}))
	<-j.entered
	// Queued while the first record is being appended: one group.
	send(op(engine.OpReplace, "a", engine.Property{Name: "N", Value: engine.Int32(2)}))
	send(op(engine.OpMerge, "a", engine.Property{Name: "M", Value: engine.Int32(3)}))
	send(op(engine.OpInsert, "b"))
	send(op(engine.OpDelete, "a"))
	send(op(engine.OpInsert, "a"))
	close(j.open)
	for range 6 {
		if rep := <-replies; rep.Error != nil {
			t.Fatal(rep.Error)
		}
	}
	// A record of its own, on entities committed earlier.
	rep := submit(c, &engine.Command{Table: "Prev", Batch: true, Ops: []engine.Operation{
		{Op: engine.OpMerge, Entity: engine.NewEntity("p", "a")},
		{Op: engine.OpDelete, Entity: engine.NewEntity("p", "b")},
		{Op: engine.OpInsert, Entity: engine.NewEntity("p", "c")},
	}})
	if rep.Error != nil {
		t.Fatal(rep.Error)
	}

	tv, _ := r.views.Table("Prev")
	type rec struct {
		seq uint64
		r   *engine.Record
	}
	var recs []rec
	ctx, cancel := context.WithCancel(r.ctx)
	err := r.j.Consume(ctx, "Prev", tv.Epoch(), tv.Shards(), 1, func(seq uint64, rc *engine.Record, pending uint64) error {
		recs = append(recs, rec{seq, rc})
		if pending == 0 {
			cancel()
		}
		return nil
	})
	cancel()
	if err != nil || len(recs) != 3 {
		t.Fatalf("%d records (%v), want 3: the insert, the group, the batch", len(recs), err)
	}
	none := engine.Version{}
	want := [][]engine.Version{
		{none},
		{{Seq: recs[0].seq, Index: 0}, {Seq: recs[1].seq, Index: 0}, none, {Seq: recs[1].seq, Index: 1}, none},
		{{Seq: recs[1].seq, Index: 4}, {Seq: recs[1].seq, Index: 2}, none},
	}
	for i, rc := range recs {
		if !rc.r.HasPrev || len(rc.r.Events) != len(want[i]) {
			t.Fatalf("record %d: HasPrev %v, %d events, want %d", i, rc.r.HasPrev, len(rc.r.Events), len(want[i]))
		}
		for k, w := range want[i] {
			v, exists, known := rc.r.PrevVersion(rc.seq, k)
			if !known || exists != (w != none) || v != w {
				t.Errorf("record %d event %d (%v %s): previous %v exists %v known %v, want %v", i, k, rc.r.Events[k].Kind, rc.r.Events[k].RowKey, v, exists, known, w)
			}
		}
	}
	// Within the group, the chain is written as references into the record.
	if p := recs[1].r.Events[1].Prev; p == nil || p.Seq != 0 {
		t.Errorf("a chained write's previous version is written as %v, not as event 0 of its record", p)
	}
}
