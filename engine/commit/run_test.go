package commit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/commit"
)

func insert(table, pk, rk string) *engine.Command {
	return &engine.Command{Table: table, Ops: []engine.Operation{{Op: engine.OpInsert, Entity: engine.NewEntity(pk, rk)}}}
}

// startRun runs c until ctx ends, and returns once it takes commands;
// the channel gets what Run returned.
func startRun(ctx context.Context, c *commit.Committer) <-chan error {
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	<-c.Ready()
	return ran
}

// TestRunLifecycle: nothing is taken before Run; commands taken before
// Run's context ends are answered before Run returns; nothing is taken
// after.
func TestRunLifecycle(t *testing.T) {
	r := newRig(t)
	c := commit.New(r.j, r.views.ForCommitter(), r.log, commit.Config{})
	if rep := submit(c, insert("Life", "p", "r0")); rep.Error == nil || rep.Error.Code != engine.CodeServerBusy {
		t.Fatalf("before Run: %+v", rep)
	}
	if _, err := c.CreateTable(r.ctx, "Life"); engine.ErrorCode(err) != engine.CodeServerBusy {
		t.Fatalf("CreateTable before Run: %v", err)
	}

	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	ran := startRun(ctx, c)
	if _, err := c.CreateTable(r.ctx, "Life"); err != nil {
		t.Fatal(err)
	}
	if rep := submit(c, insert("Life", "p", "r1")); rep.Error != nil {
		t.Fatal(rep.Error)
	}

	// Taken, then the context ends at once: the command is still committed.
	replies := make(chan *engine.Reply, 1)
	c.Submit(insert("Life", "p", "r2"), func(rep *engine.Reply) { replies <- rep })
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	select {
	case rep := <-replies:
		if rep.Error != nil {
			t.Fatalf("command taken before the end: %v", rep.Error)
		}
	default:
		t.Fatal("Run returned before it answered a command it had taken")
	}

	if rep := submit(c, insert("Life", "p", "r3")); rep.Error == nil || rep.Error.Code != engine.CodeServerBusy {
		t.Fatalf("after Run: %+v", rep)
	}
	if err := c.Run(r.ctx); err == nil {
		t.Fatal("a second Run ran")
	}
}

// stuckJournal never acknowledges an append: Append returns only when its
// context ends.
type stuckJournal struct {
	commit.Journal
	once    sync.Once
	entered chan struct{}
}

func (j *stuckJournal) Append(ctx context.Context, table string, epoch uint64, _ uint32, rec *engine.Record, expectLast uint64) (uint64, error) {
	j.once.Do(func() { close(j.entered) })
	<-ctx.Done()
	return 0, ctx.Err()
}

// TestRunAbandons: a command still in flight after the drain timeout is
// answered with an error, and Run returns.
func TestRunAbandons(t *testing.T) {
	r := newRig(t)
	j := &stuckJournal{Journal: r.j, entered: make(chan struct{})}
	c := commit.New(j, r.views.ForCommitter(), r.log, commit.Config{DrainTimeout: time.Nanosecond})
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	ran := startRun(ctx, c)
	if _, err := c.CreateTable(r.ctx, "Stuck"); err != nil {
		t.Fatal(err)
	}
	replies := make(chan *engine.Reply, 1)
	c.Submit(insert("Stuck", "p", "r"), func(rep *engine.Reply) { replies <- rep })
	<-j.entered
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	select {
	case rep := <-replies:
		// Abandoned while its append was unanswered: it may have been
		// applied, and the answer must not claim otherwise.
		if rep.Error == nil || rep.Error.Code != engine.CodeOperationTimedOut {
			t.Fatalf("abandoned command answered %+v", rep)
		}
		t.Logf("abandoned: %v", rep.Error)
	default:
		t.Fatal("Run returned before it answered an abandoned command")
	}
}

// TestWorkersReused: commands to one partition after another, each
// answered before the next is sent, are run by the worker that ran the
// one before, not each by a goroutine of its own; and a worker waiting
// for work does not keep Run from returning.
func TestWorkersReused(t *testing.T) {
	defer commit.SetWorkerIdle(time.Hour)()
	r := newRig(t)
	c := commit.New(r.j, r.views.ForCommitter(), r.log, commit.Config{})
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	ran := startRun(ctx, c)
	if _, err := c.CreateTable(r.ctx, "Reuse"); err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		if rep := submit(c, insert("Reuse", fmt.Sprintf("p%03d", i), "r")); rep.Error != nil {
			t.Fatal(rep.Error)
		}
	}
	// A worker may still be on its way back to waiting when the next
	// command comes, so a few start; one per command means none waited.
	if started := c.WorkersStarted(); started > n/2 {
		t.Fatalf("%d workers started for %d commands sent one after another", started, n)
	}
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return while its workers waited for work")
	}
}
