package journal_test

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/journal/jstest"
)

// TestConsumeLeaderElected announces a new leader of a table's stream
// while it is consumed: a consumer that still answers is kept, one that
// does not is made again after the last record delivered, and every
// record comes exactly once, in order, before and after.
func TestConsumeLeaderElected(t *testing.T) {
	_, nc := jstest.Server(t)
	j, err := journal.New(nc, journal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := j.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if err := j.EnsureTableStream(ctx, "T", 1); err != nil {
		t.Fatal(err)
	}
	var last uint64
	appendN := func(from, n int) {
		for i := from; i < from+n; i++ {
			rec := put("p", string(rune('a'+i)), int32(i))
			// An announcement makes an append's outcome unknown: it is
			// settled by the first record after last, as the committer
			// does (and a conflict after that proves nothing).
			s, err := j.Append(ctx, "T", 1, 0, rec, last)
			for try := 0; err != nil && try < 50; try++ {
				var nonce string
				s, nonce, err = j.NextRecord(ctx, "T", 1, 0, "p", last)
				switch {
				case err != nil:
				case s != 0 && nonce == rec.Nonce:
				case s != 0:
					t.Fatalf("another record at %d", s)
				default:
					time.Sleep(10 * time.Millisecond)
					s, err = j.Append(ctx, "T", 1, 0, rec, last)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			last = s
		}
	}
	appendN(0, 5)
	seqs := make(chan uint64, 100)
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- j.Consume(cctx, "T", 1, 0, 1, func(seq uint64, _ *engine.Record, _ uint64) error {
			seqs <- seq
			return nil
		})
	}()
	want := uint64(1)
	take := func(n int) {
		t.Helper()
		for range n {
			select {
			case s := <-seqs:
				if s != want {
					t.Fatalf("record %d delivered, want %d", s, want)
				}
				want++
			case <-ctx.Done():
				t.Fatalf("record %d not delivered", want)
			}
		}
	}
	take(5)
	stream := journal.StreamName("cairn", "T", 1)
	consumers := func() []string {
		t.Helper()
		s, err := j.JetStream().Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for n := range s.ConsumerNames(ctx).Name() {
			names = append(names, n)
		}
		return names
	}
	before := consumers()
	if len(before) != 1 {
		t.Fatalf("consumers before: %v", before)
	}
	// A consumer that still answers is kept.
	if err := nc.Publish(journal.LeaderElectedSubject(stream), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	appendN(5, 3)
	take(3)
	if now := consumers(); len(now) != 1 || now[0] != before[0] {
		t.Fatalf("consumers after an announcement: %v, want %v kept", now, before)
	}
	// One that does not (deleted behind the reader's back) is made again
	// after the last record delivered.
	if err := j.JetStream().DeleteConsumer(ctx, stream, before[0]); err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(journal.LeaderElectedSubject(stream), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		now := consumers()
		if len(now) == 1 && now[0] != before[0] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumers after the announcement: %v (before: %v)", now, before)
		}
		time.Sleep(20 * time.Millisecond)
	}
	appendN(8, 5)
	take(5)
	select {
	case s := <-seqs:
		t.Fatalf("record %d delivered again", s)
	case <-time.After(100 * time.Millisecond):
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
