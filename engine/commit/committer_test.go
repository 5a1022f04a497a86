package commit_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	return newRigWith(t, projections.Config{})
}

// newRigWith is newRig with views configured by vcfg.
func newRigWith(t *testing.T, vcfg projections.Config) *rig {
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
	views := projections.NewViews(j, log, vcfg)
	vctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- views.Run(vctx) }()
	t.Cleanup(func() { stop(); <-done })
	if err := views.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return &rig{nc: nc, j: j, views: views, log: log, ctx: ctx}
}

// committer runs a committer on j until the test ends, creating tables
// with shards as a node does by default.
func (r *rig) committer(t *testing.T, j commit.Journal) *commit.Committer {
	t.Helper()
	return r.committerWith(t, j, commit.Config{TableShards: engine.DefaultShards})
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

// TestTableLayouts: a table is created with the committer's shard count
// (none: the layout before shards) and keeps it; its records land on its
// partitions' subjects in that layout, and writes that depend on the
// journal's per-partition check (a second write of a partition, a stale
// ETag) work in both.
func TestTableLayouts(t *testing.T) {
	r := newRig(t)
	js, err := jetstream.New(r.nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		table  string
		shards uint32
	}{{"Before", 0}, {"Sharded", 8}} {
		cm := r.committerWith(t, r.j, commit.Config{TableShards: c.shards})
		info, err := cm.CreateTable(r.ctx, c.table)
		if err != nil || info.Shards != c.shards {
			t.Fatalf("%s: created %+v, %v", c.table, info, err)
		}
		tv, _ := r.views.Table(c.table)
		if tv.Shards() != c.shards {
			t.Fatalf("%s: the view has %d shards, want %d", c.table, tv.Shards(), c.shards)
		}
		var etags []string
		for i := range 6 {
			rep := submit(cm, &engine.Command{Table: c.table, Ops: []engine.Operation{
				{Op: engine.OpInsert, Entity: engine.NewEntity(fmt.Sprintf("p%d", i%3), fmt.Sprint(i))}}})
			if rep.Error != nil {
				t.Fatalf("%s: insert %d: %v", c.table, i, rep.Error)
			}
			etags = append(etags, rep.ETag)
		}
		rep := submit(cm, &engine.Command{Table: c.table, Ops: []engine.Operation{
			{Op: engine.OpReplace, IfMatch: etags[0], Entity: engine.NewEntity("p0", "0")}}})
		if rep.Error != nil {
			t.Fatalf("%s: replace: %v", c.table, rep.Error)
		}
		rep = submit(cm, &engine.Command{Table: c.table, Ops: []engine.Operation{
			{Op: engine.OpReplace, IfMatch: etags[0], Entity: engine.NewEntity("p0", "0")}}})
		if engine.ErrorCode(rep.Error) != engine.CodeUpdateConditionNotSatisfied {
			t.Fatalf("%s: replace with a stale ETag: %v", c.table, rep.Error)
		}
		s, err := js.Stream(r.ctx, journal.StreamName("cairn", c.table, info.Epoch))
		if err != nil {
			t.Fatal(err)
		}
		si, err := s.Info(r.ctx, jetstream.WithSubjectFilter(">"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			pk := fmt.Sprintf("p%d", i)
			want := uint64(2 + map[int]uint64{0: 1}[i])
			if got := si.State.Subjects[r.j.PartitionSubject(c.table, info.Epoch, c.shards, pk)]; got != want {
				t.Errorf("%s: partition %s has %d records on its subject, want %d (subjects %v)", c.table, pk, got, want, si.State.Subjects)
			}
		}
	}
}

// TestHeldShards: a host whose view holds only some shards of a table
// decides the commands of their partitions only; the others are refused
// with ServerBusy (another host holds them) and nothing is appended.
func TestHeldShards(t *testing.T) {
	held := func(_ string, _ uint64, shards uint32) []bool {
		h := make([]bool, shards)
		h[engine.Shard("mine", int(shards))] = true
		return h
	}
	r := newRigWith(t, projections.Config{Placement: held})
	c := r.committer(t, r.j)
	info, err := c.CreateTable(r.ctx, "Held")
	if err != nil {
		t.Fatal(err)
	}
	other := "theirs"
	for engine.Shard(other, int(info.Shards)) == engine.Shard("mine", int(info.Shards)) {
		other += "s"
	}
	insert := func(pk string) *engine.Reply {
		return submit(c, &engine.Command{Table: "Held", Ops: []engine.Operation{{Op: engine.OpInsert, Entity: engine.NewEntity(pk, "1")}}})
	}
	if rep := insert("mine"); rep.Error != nil {
		t.Fatal(rep.Error)
	}
	if rep := insert(other); engine.ErrorCode(rep.Error) != engine.CodeServerBusy {
		t.Fatalf("a partition of a shard not held: %v", rep.Error)
	}
	if last, err := r.j.LastStreamSeq(r.ctx, "Held", info.Epoch); err != nil || last != 1 {
		t.Fatalf("the journal holds %d records, %v; want the held partition's one", last, err)
	}
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
