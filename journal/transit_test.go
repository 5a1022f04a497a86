package journal_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/journal/jstest"
)

// transit is a reader of table T whose deliveries the test can lose on
// their way, as a connection that moves to another server loses what was
// in flight.
type transit struct {
	t    *testing.T
	ctx  context.Context
	j    *journal.Journal
	nc   *nats.Conn
	last uint64 // the partition's last sequence

	mu   sync.Mutex
	lose map[uint64]bool // sequences whose next delivery is lost
	lost chan uint64     // each sequence lost

	seqs chan uint64 // delivered to the reader

	pmu     sync.Mutex
	pending map[uint64]uint64 // the pending the reader was handed with each record

	electing atomic.Bool // no consumer can be made meanwhile
	first    []string    // the reader's consumer, once it read records 1 to 3
}

func newTransit(t *testing.T) *transit {
	t.Helper()
	_, nc := jstest.Server(t)
	// The reader's own connection, which the test moves.
	rc, err := nats.Connect(nc.ConnectedUrl(), nats.ReconnectWait(10*time.Millisecond), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	j, err := journal.New(rc, journal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	if err := j.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if err := j.EnsureTableStream(ctx, "T", 1); err != nil {
		t.Fatal(err)
	}
	tr := &transit{t: t, ctx: ctx, j: j, nc: rc, lose: map[uint64]bool{}, lost: make(chan uint64, 100), seqs: make(chan uint64, 1000),
		pending: map[uint64]uint64{}}
	j.LoseInTransit(func(_ string, seq uint64) bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if !tr.lose[seq] {
			return false
		}
		delete(tr.lose, seq) // lost once: a replica still has it
		tr.lost <- seq
		return true
	})
	j.NoConsumerWhile(func(string) bool { return tr.electing.Load() })
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- j.Consume(rctx, "T", 1, 0, 1, func(seq uint64, rec *engine.Record, pending uint64) error {
			tr.pmu.Lock()
			tr.pending[seq] = pending
			tr.pmu.Unlock()
			if want := fmt.Sprintf("r%d", seq); rec.Events[0].RowKey != want {
				return fmt.Errorf("record %d holds %s", seq, rec.Events[0].RowKey)
			}
			tr.seqs <- seq
			return nil
		})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Consume: %v", err)
		}
	})
	tr.append(3)
	tr.take(1, 3)
	tr.first = tr.consumers()
	return tr
}

// sameConsumer checks that the reader's first consumer went on: making a
// new one needs the meta leader.
func (tr *transit) sameConsumer() {
	tr.t.Helper()
	if now := tr.consumers(); !slices.Equal(now, tr.first) {
		tr.t.Errorf("consumers %v, then %v", tr.first, now)
	}
}

// append stores n records, the k-th of the stream holding row "r<k>".
func (tr *transit) append(n int) {
	tr.t.Helper()
	for range n {
		rec := put("p", fmt.Sprintf("r%d", tr.last+1), 1)
		rec.Nonce = fmt.Sprintf("n%d", tr.last+1)
		s, err := tr.j.Append(tr.ctx, "T", 1, 0, rec, tr.last)
		if err != nil {
			tr.t.Fatal(err)
		}
		tr.last = s
	}
}

// consumers returns the names of the stream's consumers.
func (tr *transit) consumers() []string {
	tr.t.Helper()
	s, err := tr.j.JetStream().Stream(tr.ctx, journal.StreamName("cairn", "T", 1))
	if err != nil {
		tr.t.Fatal(err)
	}
	var names []string
	for n := range s.ConsumerNames(tr.ctx).Name() {
		names = append(names, n)
	}
	return names
}

func (tr *transit) loseNext(seqs ...uint64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, s := range seqs {
		tr.lose[s] = true
	}
}

// pendingOf returns the pending the reader was handed with record seq.
func (tr *transit) pendingOf(seq uint64) uint64 {
	tr.pmu.Lock()
	defer tr.pmu.Unlock()
	return tr.pending[seq]
}

// take expects the records from..to, each once, in order.
func (tr *transit) take(from, to uint64) {
	tr.t.Helper()
	for want := from; want <= to; want++ {
		select {
		case s := <-tr.seqs:
			if s != want {
				tr.t.Fatalf("record %d delivered, want %d", s, want)
			}
		case <-tr.ctx.Done():
			tr.t.Fatalf("record %d not delivered", want)
		}
	}
}

// TestConsumeFillsDeliveriesLostInTransit: deliveries lost on their way
// are read from a replica when the next one shows the gap, and every
// record reaches the reader once, in order.
func TestConsumeFillsDeliveriesLostInTransit(t *testing.T) {
	tr := newTransit(t)
	tr.loseNext(4, 5, 7)
	tr.append(5)
	tr.take(4, 8)
	tr.append(2)
	tr.take(9, 10)
	tr.sameConsumer()
}

// TestConsumeAfterReconnectReadsWhatWasLost: the last record written was
// lost on its way while the reader's connection moved; nothing comes
// after it to show the gap, so the reader looks for it once it is
// connected again.
func TestConsumeAfterReconnectReadsWhatWasLost(t *testing.T) {
	tr := newTransit(t)
	tr.loseNext(4)
	tr.append(1)
	select {
	case <-tr.lost:
	case <-tr.ctx.Done():
		t.Fatal("record 4 never delivered")
	}
	if err := tr.nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	tr.take(4, 4)
	tr.append(2)
	tr.take(5, 6)
	tr.sameConsumer()
}

// TestConsumeWhileNoConsumerCanBeMade: the reader's consumer is lost and
// no new one can be made (JetStream's meta leader, which places them, is
// being elected): the records written meanwhile still reach the reader,
// read from a replica, once each and in order, and a consumer takes over
// when one can be made again.
func TestConsumeWhileNoConsumerCanBeMade(t *testing.T) {
	tr := newTransit(t)
	tr.electing.Store(true)
	stream := journal.StreamName("cairn", "T", 1)
	for _, name := range tr.consumers() {
		if err := tr.j.JetStream().DeleteConsumer(tr.ctx, stream, name); err != nil {
			t.Fatal(err)
		}
	}
	tr.append(3)
	tr.take(4, 6)
	if names := tr.consumers(); len(names) != 0 {
		t.Fatalf("consumers %v while none could be made", names)
	}
	tr.electing.Store(false)
	for deadline := time.Now().Add(30 * time.Second); len(tr.consumers()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no consumer made once the meta leader was back")
		}
	}
	tr.append(2)
	tr.take(7, 8)
}

// TestConsumeProbe: a record lost on its way with nothing after it is
// read from a replica when the committer probes for it, and a probe for
// a record already delivered reads nothing twice.
func TestConsumeProbe(t *testing.T) {
	tr := newTransit(t)
	tr.loseNext(4)
	tr.append(1)
	<-tr.lost
	tr.j.Probe("T", 1, 4)
	tr.take(4, 4)
	// Nothing is known to follow it: a view given a pending would hold
	// its publish back for a record that may never come.
	if p := tr.pendingOf(4); p != 0 {
		t.Fatalf("the probed record came with %d pending, want 0", p)
	}
	tr.append(1)
	tr.take(5, 5)
	tr.j.Probe("T", 1, 5) // delivered already
	tr.append(1)
	tr.take(6, 6)
	select {
	case s := <-tr.seqs:
		t.Fatalf("record %d delivered again", s)
	case <-time.After(100 * time.Millisecond):
	}
	tr.sameConsumer()
}
