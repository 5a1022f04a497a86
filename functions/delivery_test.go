package functions

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// The delivery loop, driven by a scripted fetcher: every pull request it
// issues is handed to the test, which answers it with a batch. No NATS, no
// clock: the tests check the order of requests and their sizes.

type fakeMsg struct {
	jetstream.Msg // nil: only Nak is called by the loop
	id            int
	naks          *atomic.Int32
	nakked        chan<- int // the id of each message handed back
}

func (m *fakeMsg) Nak() error {
	m.naks.Add(1)
	m.nakked <- m.id
	return nil
}

type fakeBatch struct {
	msgs    chan jetstream.Msg
	err     error
	reading chan struct{} // if not nil, closed when the loop asks for the messages
}

func (b *fakeBatch) Messages() <-chan jetstream.Msg {
	if b.reading != nil {
		close(b.reading)
	}
	return b.msgs
}
func (b *fakeBatch) Error() error { return b.err }

// batchOf is a finished batch of the given messages.
func batchOf(err error, msgs ...jetstream.Msg) *fakeBatch {
	b := &fakeBatch{msgs: make(chan jetstream.Msg, len(msgs)), err: err}
	for _, m := range msgs {
		b.msgs <- m
	}
	close(b.msgs)
	return b
}

type pullRequest struct {
	n      int
	answer chan<- *fakeBatch
}

// deliveryHarness runs deliver with slots until the test ends; the
// handler keeps every message's release for the test to call.
type deliveryHarness struct {
	t        *testing.T
	reqs     chan pullRequest
	handled  chan func() // one release per message handed to the handler
	failures atomic.Int32
	naks     atomic.Int32
	nakked   chan int // the id of each message handed back, in order
	cancel   context.CancelFunc
	done     chan struct{}
}

func startDeliveries(t *testing.T, slots int) *deliveryHarness {
	h := &deliveryHarness{t: t, reqs: make(chan pullRequest), handled: make(chan func(), 100), nakked: make(chan int, 100), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	fetch := func(ctx context.Context, n int) (jetstream.MessageBatch, error) {
		answer := make(chan *fakeBatch, 1)
		select {
		case h.reqs <- pullRequest{n: n, answer: answer}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case b := <-answer:
			return b, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	go func() {
		defer close(h.done)
		deliver(ctx, slots, fetch, func(_ jetstream.Msg, release func()) { h.handled <- release },
			func(error) bool { h.failures.Add(1); return ctx.Err() == nil })
	}()
	t.Cleanup(func() { cancel(); <-h.done })
	return h
}

// next is the next pull request; its size must be want.
func (h *deliveryHarness) next(want int) pullRequest {
	h.t.Helper()
	r := <-h.reqs
	if r.n != want {
		h.t.Fatalf("pull request for %d messages, want %d", r.n, want)
	}
	return r
}

func (h *deliveryHarness) msgs(n int) []jetstream.Msg {
	out := make([]jetstream.Msg, n)
	for i := range out {
		out[i] = &fakeMsg{id: i, naks: &h.naks, nakked: h.nakked}
	}
	return out
}

// A pull request that ends empty (it expired on an empty queue) is
// followed by the next one at once, for every free slot, with no pause:
// the stall this loop replaced was a wait of 5 s before pulling again.
func TestDeliveryPullsAgainAtOnceAfterAnEmptyPull(t *testing.T) {
	h := startDeliveries(t, 4)
	for range 5 {
		h.next(4).answer <- batchOf(nil)
	}
	// An expiry the client noticed itself (its deadline) is no failure
	// either, nor missed heartbeats should a fetch ask for them.
	h.next(4).answer <- batchOf(context.DeadlineExceeded)
	h.next(4).answer <- batchOf(jetstream.ErrNoHeartbeat)
	h.next(4)
	if n := h.failures.Load(); n != 0 {
		t.Fatalf("the loop paused %d times after empty pulls", n)
	}
}

// The loop never asks for more messages than it has free slots, and asks
// for a slot as soon as a handler gives it back.
func TestDeliveryAsksForFreeSlotsOnly(t *testing.T) {
	h := startDeliveries(t, 4)
	h.next(4).answer <- batchOf(nil, h.msgs(4)...)
	var releases []func()
	for range 4 {
		releases = append(releases, <-h.handled)
	}
	// All four slots are busy: no request until one is given back.
	releases[0]()
	r := h.next(1)
	// Two more come back while that request waits; it ends empty: the
	// next request is for all three.
	releases[1]()
	releases[2]()
	r.answer <- batchOf(nil)
	r = h.next(3)
	// Part of a request filled: the slots it did not use come back.
	r.answer <- batchOf(nil, h.msgs(1)...)
	releases = append(releases[3:], <-h.handled)
	r = h.next(2)
	for _, release := range releases {
		release()
	}
	r.answer <- batchOf(nil)
	h.next(4)
}

// A failed request (the consumer is gone) gives its slots back and pauses
// before the next one; more messages than asked for are handed back.
func TestDeliveryFailedPullAndSurplus(t *testing.T) {
	h := startDeliveries(t, 2)
	h.next(2).answer <- batchOf(jetstream.ErrConsumerDeleted)
	r := h.next(2)
	if n := h.failures.Load(); n != 1 {
		t.Fatalf("failures reported: %d, want 1", n)
	}
	r.answer <- batchOf(nil, h.msgs(3)...)
	<-h.handled
	<-h.handled
	// The loop hands the surplus back after it has handed out the two
	// it asked for: wait for that, not just for the two.
	if id := <-h.nakked; id != 2 || h.naks.Load() != 1 {
		t.Fatalf("handed back message %d (%d in all), want the one past the request's size", id, h.naks.Load())
	}
}

// Messages that arrive once the loop is stopping are handed back, not
// run, and the loop returns.
func TestDeliveryStoppingHandsBackMessages(t *testing.T) {
	h := startDeliveries(t, 3)
	r := h.next(3)
	b := &fakeBatch{msgs: make(chan jetstream.Msg), reading: make(chan struct{})}
	r.answer <- b
	<-b.reading // the loop has the batch: stop it now
	h.cancel()
	for _, m := range h.msgs(3) {
		b.msgs <- m
	}
	close(b.msgs)
	<-h.done
	if n, ran := h.naks.Load(), len(h.handled); n != 3 || ran != 0 {
		t.Fatalf("after stop: %d naks, %d run; want 3 naks, none run", n, ran)
	}
}
