package commit_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/commit"
)

// heldJournal is the real journal, except that the acknowledgement of the
// first append is lost and the append itself is held back: it reaches the
// server only when the test says, or never. Everything runs on the real
// embedded server; only the order of events is chosen.
type heldJournal struct {
	commit.Journal
	// beforeLook runs before the committer's first look at the journal
	// after the lost append; afterLook right after it.
	beforeLook, afterLook func(ctx context.Context, h *held)

	mu    sync.Mutex
	held  *held
	looks int
}

// held is the append whose acknowledgement was lost.
type held struct {
	table  string
	epoch  uint64
	shards uint32
	rec    *engine.Record
	expect uint64
}

func (j *heldJournal) Append(ctx context.Context, table string, epoch uint64, shards uint32, rec *engine.Record, expectLast uint64) (uint64, error) {
	j.mu.Lock()
	if j.held == nil {
		j.held = &held{table: table, epoch: epoch, shards: shards, rec: rec, expect: expectLast}
		j.mu.Unlock()
		return 0, errors.New("no acknowledgement (lost by the test)")
	}
	j.mu.Unlock()
	return j.Journal.Append(ctx, table, epoch, shards, rec, expectLast)
}

func (j *heldJournal) NextRecord(ctx context.Context, table string, epoch uint64, shards uint32, pk string, after uint64) (uint64, string, error) {
	j.mu.Lock()
	j.looks++
	first, h := j.looks == 1, j.held
	j.mu.Unlock()
	if first && j.beforeLook != nil {
		j.beforeLook(ctx, h)
	}
	seq, nonce, err := j.Journal.NextRecord(ctx, table, epoch, shards, pk, after)
	if first && j.afterLook != nil {
		j.afterLook(ctx, h)
	}
	return seq, nonce, err
}

// TestUnknownOutcomeLandsLate: the append's acknowledgement is lost, the
// committer's first look finds nothing, and only then is the record
// stored. The committer must not decide again (the insert would then fail
// with EntityAlreadyExists although it was applied): it sends the
// identical append, which conflicts with the first copy, looks again and
// answers from the record it finds. With and without a command id.
func TestUnknownOutcomeLandsLate(t *testing.T) {
	for _, id := range []string{"", "client-id"} {
		t.Run("id="+id, func(t *testing.T) {
			r := newRig(t)
			var stored *held
			j := &heldJournal{Journal: r.j}
			j.afterLook = func(ctx context.Context, h *held) {
				if _, err := r.j.Append(ctx, h.table, h.epoch, h.shards, h.rec, h.expect); err != nil {
					t.Errorf("the held append: %v", err)
				}
				stored = h
			}
			c := r.committer(t, j)
			if _, err := c.CreateTable(r.ctx, "Late"); err != nil {
				t.Fatal(err)
			}
			cmd := insert("Late", "p", "r")
			cmd.ID = id
			rep := submit(c, cmd)
			if rep.Error != nil {
				t.Fatalf("answered %v although the record was stored", rep.Error)
			}
			tv, _ := r.views.Table("Late")
			snap, err := tv.WaitSeq(r.ctx, rep.Seq)
			if err != nil {
				t.Fatal(err)
			}
			e, ok := snap.Get("p", "r")
			if !ok || engine.ETag(tv.Epoch(), e.Version) != rep.ETag {
				t.Fatalf("reply ETag %s, view %+v", rep.ETag, e)
			}
			if recs := snap.Partition("p").Records; recs != 1 {
				t.Fatalf("%d records for one command", recs)
			}
			if stored == nil || snap.Partition("p").LastSeq != rep.Seq {
				t.Fatalf("answered from position %d, the held record is at %d", rep.Seq, snap.Partition("p").LastSeq)
			}
			if st := c.Stats(); st.Unknown == 0 || st.Records != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestUnknownOutcomeLosesToAnotherWriter: the append's acknowledgement is
// lost and the append never reaches the server; before the committer
// looks, another writer appends to the partition on the same expected
// sequence. The committer must see that its record can no longer be
// stored, decide again on the new state and commit; the lost append, sent
// late, is refused.
func TestUnknownOutcomeLosesToAnotherWriter(t *testing.T) {
	r := newRig(t)
	j := &heldJournal{Journal: r.j}
	j.beforeLook = func(ctx context.Context, h *held) {
		other := &engine.Record{Time: h.rec.Time, PartitionKey: "p", Nonce: "another-writer",
			Commands: []engine.CommandRef{{Count: 1}},
			Events:   []engine.Event{{Kind: engine.EventPut, RowKey: "other"}}}
		if _, err := r.j.Append(ctx, h.table, h.epoch, h.shards, other, h.expect); err != nil {
			t.Errorf("the other writer's append: %v", err)
		}
	}
	c := r.committer(t, j)
	if _, err := c.CreateTable(r.ctx, "Lost"); err != nil {
		t.Fatal(err)
	}
	rep := submit(c, insert("Lost", "p", "r"))
	if rep.Error != nil {
		t.Fatal(rep.Error)
	}
	tv, _ := r.views.Table("Lost")
	snap, err := tv.WaitSeq(r.ctx, rep.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := snap.Get("p", "other"); !ok {
		t.Fatal("the other writer's entity is missing")
	}
	if e, ok := snap.Get("p", "r"); !ok || engine.ETag(tv.Epoch(), e.Version) != rep.ETag {
		t.Fatalf("reply ETag %s, view %+v", rep.ETag, e)
	}
	if recs := snap.Partition("p").Records; recs != 2 {
		t.Fatalf("%d records, want the other writer's and ours", recs)
	}
	h := j.held
	if _, err := r.j.Append(r.ctx, h.table, h.epoch, h.shards, h.rec, h.expect); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("the lost append, sent late: %v; want a conflict", err)
	}
	if st := c.Stats(); st.Unknown == 0 || st.Conflicts == 0 {
		t.Fatalf("stats %+v", st)
	}
}
