package commit_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/commit"
)

// TestMarkBeforeMessages: a table that marks its messages is marked before
// its first record with messages is appended, once per record with
// messages; while the mark cannot be stored, a write with messages is
// refused (ServerBusy) and nothing is appended, and writes without
// messages go on. A table of the layout without marks is never marked.
func TestMarkBeforeMessages(t *testing.T) {
	r := newRig(t)
	var fail atomic.Bool
	var marks atomic.Int32
	cfg := commit.Config{TableShards: engine.DefaultShards, MaxAttempts: 3}
	cfg.MarkMessages = func(ctx context.Context, table string, epoch uint64) error {
		marks.Add(1)
		if fail.Load() {
			return errors.New("the bucket is not there")
		}
		return nil
	}
	c := r.committerWith(t, r.j, cfg)
	info, err := c.CreateTable(r.ctx, "Marked")
	if err != nil || !info.MarksMessages {
		t.Fatalf("created %+v, %v: want a table that marks its messages", info, err)
	}
	withMessage := func(table, rk string) *engine.Command {
		return &engine.Command{Table: table, Ops: []engine.Operation{{Op: engine.OpInsert, Entity: engine.NewEntity("p", rk)}},
			Messages: []engine.Message{{Queue: "mail", Body: []byte(rk)}}}
	}
	last := func() uint64 {
		seq, err := r.j.LastStreamSeq(r.ctx, "Marked", info.Epoch)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}

	fail.Store(true)
	if rep := submit(c, withMessage("Marked", "1")); engine.ErrorCode(rep.Error) != engine.CodeServerBusy {
		t.Fatalf("a write with a message while the mark fails: %v, want ServerBusy", rep.Error)
	}
	if n := last(); n != 0 {
		t.Fatalf("the journal holds %d records after a refused write", n)
	}
	if rep := submit(c, insert("Marked", "p", "plain")); rep.Error != nil {
		t.Fatalf("a write without messages while the mark fails: %v", rep.Error)
	}
	tried := marks.Load()
	if tried != int32(cfg.MaxAttempts) {
		t.Fatalf("the mark was tried %d times, want %d (a write without messages needs none)", tried, cfg.MaxAttempts)
	}

	fail.Store(false)
	if rep := submit(c, withMessage("Marked", "2")); rep.Error != nil {
		t.Fatal(rep.Error)
	}
	if n := last(); n != 2 {
		t.Fatalf("the journal holds %d records, want 2", n)
	}

	// The layout without marks (a node creating tables older hosts read).
	legacy := r.committerWith(t, r.j, commit.Config{MarkMessages: cfg.MarkMessages})
	if info, err := legacy.CreateTable(r.ctx, "Legacy"); err != nil || info.MarksMessages {
		t.Fatalf("created %+v, %v: want a table without marks", info, err)
	}
	before := marks.Load()
	if rep := submit(legacy, withMessage("Legacy", "1")); rep.Error != nil {
		t.Fatal(rep.Error)
	}
	if marks.Load() != before {
		t.Fatal("a table of the layout without marks was marked")
	}
}
