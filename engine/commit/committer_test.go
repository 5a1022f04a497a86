package commit_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/commit"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/journal/jstest"
	"github.com/cairn-dev/cairn/projections"
)

type rig struct {
	nc    *nats.Conn
	j     *journal.Journal
	views *projections.Views
	log   *slog.Logger
	ctx   context.Context
}

func newRig(t *testing.T) *rig {
	t.Helper()
	_, nc := jstest.Server(t)
	j, err := journal.New(nc, journal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	if err := j.Init(ctx); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	views := projections.NewViews(j, log, projections.Config{})
	vctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- views.Run(vctx) }()
	t.Cleanup(func() { stop(); <-done })
	if err := views.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return &rig{nc: nc, j: j, views: views, log: log, ctx: ctx}
}

// committer runs a committer on j until the test ends.
func (r *rig) committer(t *testing.T, j commit.Journal) *commit.Committer {
	t.Helper()
	return r.committerWith(t, j, commit.Config{})
}

func (r *rig) committerWith(t *testing.T, j commit.Journal, cfg commit.Config) *commit.Committer {
	t.Helper()
	c := commit.New(j, r.views.ForCommitter(), r.log, cfg)
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	<-c.Ready()
	return c
}

func submit(c *commit.Committer, cmd *engine.Command) *engine.Reply {
	ch := make(chan *engine.Reply, 1)
	c.Submit(cmd, func(r *engine.Reply) { ch <- r })
	return <-ch
}

// TestUnknownOutcome makes every append give up waiting for its
// acknowledgement although the server stores the record (an ack lost to a
// timeout). The committer must find its record in the journal by nonce and
// answer from it: each command applied exactly once, with the ETag the view
// shows, whether or not it carries an id.
func TestUnknownOutcome(t *testing.T) {
	r := newRig(t)
	normal := r.committer(t, r.j)
	if _, err := normal.CreateTable(r.ctx, "Lossy"); err != nil {
		t.Fatal(err)
	}
	lossyJ, err := journal.New(r.nc, journal.Config{AppendTimeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	lossy := r.committer(t, lossyJ)
	for i := 0; i < 20; i++ {
		id := ""
		if i%2 == 0 {
			id = fmt.Sprintf("c%d", i)
		}
		rep := submit(lossy, &engine.Command{ID: id, Table: "Lossy", Ops: []engine.Operation{
			{Op: engine.OpInsert, Entity: engine.NewEntity("p", fmt.Sprintf("r%02d", i))}}})
		if rep.Error != nil {
			t.Fatalf("command %d: %v", i, rep.Error)
		}
		tv, _ := r.views.Table("Lossy")
		e, ok := tv.Snapshot().Get("p", fmt.Sprintf("r%02d", i))
		if !ok || engine.ETag(tv.Epoch(), e.Version) != rep.ETag {
			t.Fatalf("command %d: reply ETag %s, view %+v", i, rep.ETag, e)
		}
	}
	st := lossy.Stats()
	if st.Unknown == 0 {
		t.Fatalf("no append had an unknown outcome (%+v): the test did not test anything", st)
	}
	tv, _ := r.views.Table("Lossy")
	if n := tv.Snapshot().Len(); n != 20 {
		t.Fatalf("%d entities, want 20", n)
	}
	if recs := tv.Snapshot().Partition("p").Records; recs != 20 {
		t.Fatalf("%d records for 20 commands: a command was applied twice", recs)
	}
	t.Logf("%+v", st)
}

// TestTableGone answers commands on a table deleted under them.
func TestTableGone(t *testing.T) {
	r := newRig(t)
	c := r.committer(t, r.j)
	if _, err := c.CreateTable(r.ctx, "Gone"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTable(r.ctx, "Gone"); err != nil {
		t.Fatal(err)
	}
	rep := submit(c, &engine.Command{Table: "Gone", Ops: []engine.Operation{{Op: engine.OpInsert, Entity: engine.NewEntity("p", "r")}}})
	if rep.Error == nil || rep.Error.Code != engine.CodeTableNotFound {
		t.Fatalf("reply %+v", rep)
	}
	rep = submit(c, &engine.Command{Table: "Bad-Name", Ops: []engine.Operation{{Op: engine.OpInsert, Entity: engine.NewEntity("p", "r")}}})
	if rep.Error == nil || rep.Error.Code != engine.CodeInvalidInput {
		t.Fatalf("reply %+v", rep)
	}
}
