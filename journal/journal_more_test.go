package journal_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/journal/jstest"
)

// TestConsumeDecodesEverything: every field of a record, outbox and
// unknown fields included, comes back from the journal as it was appended.
func TestConsumeDecodesEverything(t *testing.T) {
	j, ctx := newJournal(t)
	if err := j.EnsureTableStream(ctx, "Emp", 3); err != nil {
		t.Fatal(err)
	}
	var want []*engine.Record
	var last uint64
	for i := 0; i < 5; i++ {
		r := journal.SampleRecord()
		r.Nonce = fmt.Sprint("nonce-", i)
		seq, err := j.Append(ctx, "Emp", 3, 0, r, last)
		if err != nil {
			t.Fatal(err)
		}
		last = seq
		want = append(want, r)
	}
	cctx, cancel := context.WithCancel(ctx)
	i := 0
	err := j.Consume(cctx, "Emp", 3, 0, 1, func(seq uint64, rec *engine.Record, pending uint64) error {
		if seq != uint64(i+1) || pending != uint64(len(want)-i-1) {
			t.Errorf("record %d: seq %d, pending %d", i, seq, pending)
		}
		journal.EqualRecords(t, rec, want[i])
		if i++; pending == 0 {
			cancel()
		}
		return nil
	})
	if err != nil || i != len(want) {
		t.Fatalf("consumed %d of %d: %v", i, len(want), err)
	}
}

// TestConsumeStopsOnCallbackError: fn's error ends Consume and is returned.
func TestConsumeStopsOnCallbackError(t *testing.T) {
	j, ctx := newJournal(t)
	if err := j.EnsureTableStream(ctx, "T", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, "T", 1, 0, put("p", "r", 1), 0); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := j.Consume(ctx, "T", 1, 0, 1, func(uint64, *engine.Record, uint64) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Consume returned %v", err)
	}
}

// TestConcurrentAppends: appends to different partitions from many
// goroutines share one connection; on one partition, of several appends
// on the same expectation exactly one wins.
func TestConcurrentAppends(t *testing.T) {
	j, ctx := newJournal(t)
	if err := j.EnsureTableStream(ctx, "Hot", 1); err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 50
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			pk := fmt.Sprint("p", w)
			var last uint64
			for i := 0; i < each; i++ {
				seq, err := j.Append(ctx, "Hot", 1, 0, put(pk, fmt.Sprint(i), int32(i)), last)
				if err != nil {
					errs <- fmt.Errorf("%s #%d: %w", pk, i, err)
					return
				}
				last = seq
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if last, err := j.LastStreamSeq(ctx, "Hot", 1); err != nil || last != writers*each {
		t.Fatalf("LastStreamSeq = %d, %v; want %d", last, err, writers*each)
	}

	var won, lost int
	var mu sync.Mutex
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			_, err := j.Append(ctx, "Hot", 1, 0, put("race", fmt.Sprint(w), 1), 0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, engine.ErrConflict):
				lost++
			default:
				t.Error(err)
			}
		}(w)
	}
	wg.Wait()
	if won != 1 || lost != 7 {
		t.Fatalf("%d appends won and %d lost; want 1 and 7", won, lost)
	}
}

// TestTableGone: a table whose stream does not exist refuses appends and
// reads with ErrTableGone.
func TestTableGone(t *testing.T) {
	j, ctx := newJournal(t)
	if _, err := j.Append(ctx, "Never", 1, 0, put("p", "r", 1), 0); !errors.Is(err, engine.ErrTableGone) {
		t.Fatalf("append: %v", err)
	}
	if _, err := j.LastSeq(ctx, "Never", 1, 0, "p"); !errors.Is(err, engine.ErrTableGone) {
		t.Fatalf("LastSeq: %v", err)
	}
	if _, err := j.LastStreamSeq(ctx, "Never", 1); !errors.Is(err, engine.ErrTableGone) {
		t.Fatalf("LastStreamSeq: %v", err)
	}
	if _, _, err := j.NextRecord(ctx, "Never", 1, 0, "p", 0); !errors.Is(err, engine.ErrTableGone) {
		t.Fatalf("NextRecord: %v", err)
	}
	// Another incarnation of the same name is another stream.
	if err := j.EnsureTableStream(ctx, "Never", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, "Never", 1, 0, put("p", "r", 1), 0); !errors.Is(err, engine.ErrTableGone) {
		t.Fatalf("append to epoch 1 beside epoch 2: %v", err)
	}
	if _, err := j.Append(ctx, "never", 2, 0, put("p", "r", 1), 0); err != nil {
		t.Fatalf("append in another case of the name: %v", err)
	}
}

// TestCatalogGone: a catalog stream deleted behind Cairn's back is
// ErrCatalogGone to LastCatalogSeq and to a catalog watcher, whether it
// was gone when the watch began or went while it followed.
func TestCatalogGone(t *testing.T) {
	j, ctx := newJournal(t)
	watched := make(chan error, 1)
	go func() {
		watched <- j.WatchCatalog(ctx, 1, func(uint64, *engine.CatalogRecord, uint64, error) error { return nil })
	}()
	if _, err := j.AppendCatalog(ctx, journal.SampleCatalog(engine.CatalogTableCreated), 0); err != nil {
		t.Fatal(err)
	}
	if err := j.JetStream().DeleteStream(ctx, journal.CatalogStreamName("cairn")); err != nil {
		t.Fatal(err)
	}
	if err := <-watched; !errors.Is(err, journal.ErrCatalogGone) {
		t.Fatalf("a watch when the catalog went: %v", err)
	}
	if _, err := j.LastCatalogSeq(ctx); !errors.Is(err, journal.ErrCatalogGone) {
		t.Fatalf("LastCatalogSeq: %v", err)
	}
	if err := j.WatchCatalog(ctx, 1, func(uint64, *engine.CatalogRecord, uint64, error) error { return nil }); !errors.Is(err, journal.ErrCatalogGone) {
		t.Fatalf("a watch of no catalog: %v", err)
	}
}

// TestRestart: what was acknowledged is there after the server restarts
// on its store, and the concurrency check goes on from it.
func TestRestart(t *testing.T) {
	ns, nc := jstest.Server(t)
	ctx := context.Background()
	j, err := journal.New(nc, journal.Config{Prefix: "rt"})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if err := j.Init(ctx); err != nil {
		t.Fatalf("Init is not idempotent: %v", err)
	}
	if _, err := j.AppendCatalog(ctx, journal.SampleCatalog(engine.CatalogTableCreated), 0); err != nil {
		t.Fatal(err)
	}
	if err := j.EnsureTableStream(ctx, "Employees", 1); err != nil {
		t.Fatal(err)
	}
	seq, err := j.Append(ctx, "Employees", 1, 0, journal.SampleRecord(), 0)
	if err != nil {
		t.Fatal(err)
	}

	_, nc = jstest.Restart(t, ns)
	if j, err = journal.New(nc, journal.Config{Prefix: "rt"}); err != nil {
		t.Fatal(err)
	}
	if err := j.Init(ctx); err != nil {
		t.Fatal(err)
	}
	pk := journal.SampleRecord().PartitionKey
	if last, err := j.LastSeq(ctx, "Employees", 1, 0, pk); err != nil || last != seq {
		t.Fatalf("LastSeq after restart = %d, %v; want %d", last, err, seq)
	}
	if _, err := j.Append(ctx, "Employees", 1, 0, journal.SampleRecord(), 0); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("stale append after restart: %v", err)
	}
	if last, err := j.LastCatalogSeq(ctx); err != nil || last != 1 {
		t.Fatalf("LastCatalogSeq after restart = %d, %v", last, err)
	}
}

func TestConfig(t *testing.T) {
	c := journal.Config{}
	if err := c.Validate(); err != nil || c.Prefix != "cairn" || c.Replicas != 1 || c.AppendTimeout != time.Second || c.CatalogTimeout != 10*time.Second {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	for _, bad := range []journal.Config{{Prefix: "Cairn"}, {Prefix: "a.b"}, {Prefix: "a b"}, {Prefix: "*"}, {Replicas: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
	if got := journal.StreamName("cairn", "Employees", 42); got != "CAIRN_T_employees_42" {
		t.Errorf("StreamName = %q", got)
	}
	if got := journal.CatalogStreamName("cairn"); got != "CAIRN_CATALOG" {
		t.Errorf("CatalogStreamName = %q", got)
	}
	if _, err := journal.New(nil, journal.Config{}); err == nil {
		t.Error("New without a connection succeeded")
	}
	_, nc := jstest.Server(t)
	j, err := journal.New(nc, journal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := j.PartitionSubject("Employees", 42, 0, ""); got != "cairn.j.employees.42.k" {
		t.Errorf("PartitionSubject = %q", got)
	}
	if got := j.PartitionSubject("Employees", 42, 0, "a.b"); got != "cairn.j.employees.42.kYS5i" {
		t.Errorf("PartitionSubject = %q", got)
	}
	// A table with shards: the shard's token before the partition's
	// (engine.Shard("Sales", 64) is 23, TestShardGolden).
	if got := j.PartitionSubject("Employees", 42, 64, "Sales"); got != "cairn.j.employees.42.s23.kU2FsZXM" {
		t.Errorf("PartitionSubject = %q", got)
	}
	if got := j.PartitionSubject("acme.Employees", 42, 1, ""); got != "cairn.j.acme.employees.42.s0.k" {
		t.Errorf("PartitionSubject = %q", got)
	}
	if got := j.ShardSubjects("Employees", 42, 23); got != "cairn.j.employees.42.s23.*" {
		t.Errorf("ShardSubjects = %q", got)
	}
}

func TestDecodePartitionRefuses(t *testing.T) {
	for _, tok := range []string{"", "YWI", "k*", "k.", "kYR", "kYQ=="} {
		if pk, err := journal.DecodePartition(tok); err == nil {
			t.Errorf("token %q decoded to %q", tok, pk)
		}
	}
}
