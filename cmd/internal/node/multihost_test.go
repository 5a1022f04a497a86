package node_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/projections"
)

// startSecondHost starts another host on the NATS server of first.
func startSecondHost(t *testing.T, first *testHost) *node.Node {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *node.Node, 1)
	done := make(chan error, 1)
	go func() {
		done <- node.Run(ctx, node.Config{DataDir: t.TempDir(), NATSURL: first.h.ClientURL(), NATSCreds: first.h.NATSCredsFile(), HTTP: "127.0.0.1:0", Log: quietLog()},
			func(h *node.Node) { ready <- h })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("second host: %v", err)
		}
	})
	select {
	case h := <-ready:
		return h
	case err := <-done:
		t.Fatalf("second host: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("second host not ready")
	}
	return nil
}

// TestTwoHosts runs two hosts on one NATS server. Requests are shared
// between them by the queue group, so both append to the same partitions:
// the expected-sequence check makes the loser of each race decide again,
// and no increment is lost. Tables created through one host appear in the
// other's catalog.
func TestTwoHosts(t *testing.T) {
	a := startHost(t, "")
	b := startSecondHost(t, a)
	ctx := ctxT(t)
	// Each host sees both live (their heartbeats in the hosts' bucket).
	for _, h := range []*node.Node{a.h, b} {
		eventually(t, 30*time.Second, "both hosts live", func() bool { return len(h.Members().Live()) == 2 })
	}
	const tb, workers, perWorker = "Shared", 6, 30
	if _, err := a.c.CreateTable(ctx, tb); err != nil {
		t.Fatal(err)
	}
	rep, err := a.c.Insert(ctx, tb, engine.NewEntity("c", "1", engine.Property{Name: "N", Value: engine.Int64(0)}))
	if err != nil {
		t.Fatal(err)
	}
	// A reply promises visibility on the replying host only; let the other
	// host's view reach the counter before reads may go there.
	for _, h := range []*node.Node{a.h, b} {
		tv, ok, err := h.Views().Lookup(ctx, tb)
		if err != nil || !ok {
			t.Fatalf("table on a host: %v %v", ok, err)
		}
		if _, err := tv.WaitSeq(ctx, rep.Seq); err != nil {
			t.Fatal(err)
		}
	}
	// Blind inserts on other rows of the partition race with the
	// counter's writes on the other host.
	_, err = incrementConcurrently(ctx, a.c, tb, workers, perWorker, func(w, done int) error {
		_, err := a.c.InsertOrReplace(ctx, tb, engine.NewEntity("c", fmt.Sprintf("w%d-%d", w, done)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A table created through one host is found at once by the other,
	// which catches up with the catalog on a miss.
	if _, err := a.c.CreateTable(ctx, "Fresh"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.Views().Lookup(ctx, "fresh"); !ok || err != nil {
		t.Fatalf("new table not found on the other host: %v %v", ok, err)
	}
	sa, sb := a.h.CommitStats(), b.CommitStats()
	t.Logf("host a: %+v; host b: %+v", sa, sb)
	if sa.Commands == 0 || sb.Commands == 0 {
		t.Errorf("one host committed nothing: the queue group did not share the work")
	}
	// Both hosts' views converge on the same state.
	for _, h := range []*node.Node{a.h, b} {
		tv, ok := h.Views().Table(tb)
		if !ok {
			t.Fatal("table missing from a host's catalog")
		}
		// The other host's last write may still be on its way to this
		// view: wait for it (a lost update would never arrive).
		counter := func(s *projections.Snapshot) int64 {
			e, ok := s.Get("c", "1")
			if !ok {
				return -1
			}
			n, _ := e.Get("N")
			return n.Int()
		}
		snap := tv.Snapshot()
		deadline := time.Now().Add(10 * time.Second)
		for (snap.Len() != 1+workers*perWorker || counter(snap) != workers*perWorker) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			snap = tv.Snapshot()
		}
		e, ok := snap.Get("c", "1")
		if !ok {
			t.Fatal("counter missing")
		}
		if n, _ := e.Get("N"); n.Int() != workers*perWorker || snap.Len() != 1+workers*perWorker {
			t.Fatalf("counter %d (want %d), %d entities (want %d)", n.Int(), workers*perWorker, snap.Len(), 1+workers*perWorker)
		}
	}
}

// TestGroupCommit sends many inserts to one partition at once: they must
// share journal records (fewer records than commands) and each still gets
// its own ETag.
func TestGroupCommit(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	const tb, n = "Hot", 300
	if _, err := th.c.CreateTable(ctx, tb); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	etags := make([]string, n)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := th.c.Insert(ctx, tb, engine.NewEntity("hot", fmt.Sprintf("r%04d", i)))
			if err != nil {
				errs <- err
				return
			}
			etags[i] = rep.ETag
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range etags {
		if seen[e] {
			t.Fatalf("ETag %s given twice", e)
		}
		seen[e] = true
	}
	tv, _ := th.h.Views().Table(tb)
	snap := tv.Snapshot()
	records := snap.Partition("hot").Records
	if snap.Len() != n || records >= n {
		t.Fatalf("%d entities in %d records: want %d entities in fewer records", snap.Len(), records, n)
	}
	t.Logf("%d commands in %d records", n, records)
}

// TestDeleteTableDropsStream checks that DeleteTable removes the table's
// journal stream whole instead of deleting entities one by one.
func TestDeleteTableDropsStream(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	info, err := th.c.CreateTable(ctx, "Day20261122")
	if err != nil {
		t.Fatal(err)
	}
	var ops []engine.Operation
	for i := 0; i < 100; i++ {
		ops = append(ops, engine.Operation{Op: engine.OpInsert, Entity: engine.NewEntity("log", fmt.Sprintf("%03d", i))})
	}
	if _, err := th.c.Batch(ctx, "Day20261122", ops); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(th.nc)
	name := journal.StreamName("cairn", "Day20261122", info.Epoch)
	if _, err := js.Stream(ctx, name); err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	if err := th.c.DeleteTable(ctx, "Day20261122"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(ctx, name); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream of the deleted table: %v", err)
	}
}
