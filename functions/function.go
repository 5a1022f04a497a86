package functions

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/abi"
	"github.com/cairn-dev/cairn/journal"
)

// function is a deployed function on this node: its current version and
// the goroutine that feeds it from its trigger.
type function struct {
	rn   *Runner
	name string
	cur  atomic.Pointer[version]

	cancel context.CancelFunc
	done   chan struct{}
}

// version is one loaded version of a function.
type version struct {
	m       Manifest
	handler Handler
	// inflight counts the invocations using the handler; retire closes
	// it once they are done.
	inflight sync.WaitGroup
	retired  atomic.Bool
}

// acquire marks an invocation starting on v.
func (v *version) acquire() { v.inflight.Add(1) }
func (v *version) release() { v.inflight.Done() }

// retire closes v's handler once its invocations have finished.
func (v *version) retire() {
	if v.retired.Swap(true) {
		return
	}
	go func() {
		v.inflight.Wait()
		v.handler.Close(context.Background())
	}()
}

// sameFeed reports whether m can run on f's trigger goroutine as it is.
func (f *function) sameFeed(m *Manifest) bool {
	c := f.cur.Load().m
	return c.Trigger == m.Trigger && c.Concurrency == m.Concurrency && c.AckWait() == m.AckWait()
}

// take returns the current version, marked in use; release it.
func (f *function) take() *version {
	for {
		v := f.cur.Load()
		v.acquire()
		if f.cur.Load() == v {
			return v
		}
		v.release() // swapped meanwhile: use the new one
	}
}

func (f *function) start() {
	ctx, cancel := context.WithCancel(f.rn.ctx)
	f.cancel, f.done = cancel, make(chan struct{})
	m := f.cur.Load().m
	f.rn.wg.Add(1)
	go func() {
		defer f.rn.wg.Done()
		defer close(f.done)
		var err error
		switch m.Trigger.Kind() {
		case "queue":
			err = f.consumeQueue(ctx, m.Trigger.Queue)
		case "timer":
			err = f.runTimer(ctx, m)
		case "table":
			err = f.followTable(ctx, m.Trigger.Table)
		default:
			<-ctx.Done() // direct invocations only
		}
		if err != nil && ctx.Err() == nil {
			f.rn.log.Error("function stopped", "function", f.name, "err", err)
		}
	}()
}

// consumerOf names the stream of the durable consumer "fn-<name>" that a
// manifest's trigger uses ("" for none).
func (rn *Runner) consumerOf(m Manifest) (stream string) {
	switch m.Trigger.Kind() {
	case "queue", "timer":
		return StreamName(rn.cfg.Prefix)
	case "table":
		if t, ok := rn.views.Table(m.Trigger.Table); ok {
			return journal.StreamName(rn.cfg.Prefix, t.Name(), t.Epoch())
		}
	}
	return ""
}

// dropConsumer deletes the durable consumer of a function that no longer
// uses it (undeployed, or moved to another trigger), so that its queue can
// be given to another function. Every node tries; the first succeeds.
func (rn *Runner) dropConsumer(m Manifest) {
	stream := rn.consumerOf(m)
	if stream == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := rn.js.DeleteConsumer(ctx, stream, "fn-"+m.Name)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		rn.log.Warn("function: could not delete its consumer", "function", m.Name, "stream", stream, "err", err)
	}
}

// stop stops the trigger goroutine and retires the current version.
func (f *function) stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	<-f.done
	f.cur.Load().retire()
}

// retryWait pauses after a failure of the trigger machinery itself (not
// of the function), so that a lost connection does not spin.
func retryWait(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// consumeQueue feeds the function from a queue: a durable consumer shared by
// every node, at most Concurrency invocations at once on this node.
func (f *function) consumeQueue(ctx context.Context, queue string) error {
	rn := f.rn
	m := f.cur.Load().m
	subject := QueueSubject(rn.cfg.Prefix, queue)
	var cons jetstream.Consumer
	for {
		var err error
		cons, err = rn.js.CreateOrUpdateConsumer(ctx, StreamName(rn.cfg.Prefix), jetstream.ConsumerConfig{
			Durable:       "fn-" + f.name,
			Description:   "function " + f.name + " on queue " + queue,
			FilterSubject: subject,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       m.AckWait(),
			MaxDeliver:    -1, // the runner poisons; see handle
			MaxAckPending: 4096,
			Replicas:      rn.cfg.Replicas,
		})
		if err == nil {
			break
		}
		rn.log.Error("function: cannot consume its queue", "function", f.name, "queue", queue, "err", err)
		if !retryWait(ctx, 5*time.Second) {
			return nil
		}
	}
	slots := make(chan struct{}, m.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	return f.pull(ctx, cons, m.Concurrency, "queue", func(msg jetstream.Msg) {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			// A delivery taken is finished even when the function is
			// stopping (its timeout bounds it): cutting it short would
			// cost the message a delivery.
			f.handle(context.WithoutCancel(ctx), queue, msg)
		}()
	})
}

// pull feeds a consumer's messages to handle until ctx ends, with at most
// ahead messages pulled and not yet handled.
func (f *function) pull(ctx context.Context, cons jetstream.Consumer, ahead int, what string, handle func(jetstream.Msg)) error {
	iter, err := cons.Messages(jetstream.PullMaxMessages(ahead), jetstream.PullExpiry(5*time.Second))
	if err != nil {
		return err
	}
	defer iter.Stop()
	go func() { <-ctx.Done(); iter.Stop() }()
	for {
		msg, err := iter.Next()
		switch {
		case errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil:
			if msg != nil {
				_ = msg.Nak()
			}
			return nil
		case errors.Is(err, jetstream.ErrNoHeartbeat):
			// A busy moment: the iterator pulls again.
		case err != nil:
			f.rn.log.Warn("function: "+what+" read failed", "function", f.name, "err", err)
		default:
			handle(msg)
		}
	}
}

// handle runs one delivery of a queue message and settles it: ack on
// success; on failure, delivered again after a back-off, or moved to the
// poison queue once its dequeue count reaches the maximum.
func (f *function) handle(ctx context.Context, queue string, msg jetstream.Msg) {
	rn := f.rn
	md, err := msg.Metadata()
	if err != nil {
		rn.log.Error("function: message without metadata", "function", f.name, "err", err)
		_ = msg.Term()
		return
	}
	v := f.take()
	defer v.release()
	m := v.m
	n := int(md.NumDelivered)
	if n > m.MaxDequeueCount {
		// Earlier deliveries never settled: the node running them died
		// or lost its connection. Do not run it again.
		f.poison(ctx, queue, msg, md, n-1, fmt.Sprintf("delivered %d times without finishing (the node running it stopped, or the invocation never returned); not run again", n-1))
		return
	}
	trig := abi.Trigger{
		ID:           "q:" + queue + ":" + strconv.FormatUint(md.Sequence.Stream, 10),
		Kind:         abi.KindQueue,
		Function:     f.name,
		Version:      m.Version,
		Queue:        queue,
		Body:         msg.Data(),
		DequeueCount: n,
		Time:         engine.TimeToTicks(md.Timestamp),
	}
	if id := msg.Headers().Get(HeaderTrigger); id != "" {
		trig.ID, trig.Kind = id, abi.KindTimer
	}
	_, err = rn.run(ctx, v, trig)
	if err == nil {
		if aerr := msg.DoubleAck(ctx); aerr != nil {
			// Delivered again later; the writes are answered as duplicates.
			rn.log.Warn("function: ack failed", "function", f.name, "trigger", trig.ID, "err", aerr)
		}
		return
	}
	if n >= m.MaxDequeueCount {
		f.poison(ctx, queue, msg, md, n, err.Error())
		return
	}
	delay := m.Backoff(n)
	rn.log.Info("function failed; retrying after back-off", "function", f.name, "trigger", trig.ID, "dequeueCount", n, "backoff", delay, "err", err)
	_ = msg.NakWithDelay(delay)
}

// poisonHeader is the header of a poison message: why, after how many
// deliveries, when, by which function, from which stream sequence.
func (f *function) poisonHeader(reason string, attempts int, source uint64) nats.Header {
	hdr := nats.Header{}
	hdr.Set(HeaderError, reason)
	hdr.Set(HeaderAttempts, strconv.Itoa(attempts))
	hdr.Set(HeaderFunction, f.name)
	hdr.Set(HeaderPoisoned, f.rn.now().UTC().Format(time.RFC3339Nano))
	hdr.Set(HeaderSource, strconv.FormatUint(source, 10))
	return hdr
}

// poison moves a message to <queue>-poison with its error, attempts and
// times, then removes it from its queue. The move carries an id derived
// from the message's sequence, so doing it twice stores it once.
func (f *function) poison(ctx context.Context, queue string, msg jetstream.Msg, md *jetstream.MsgMetadata, attempts int, reason string) {
	rn := f.rn
	if len(reason) > 2048 {
		reason = reason[:2048] + "…"
	}
	hdr := f.poisonHeader(reason, attempts, md.Sequence.Stream)
	hdr.Set(HeaderQueue, queue)
	hdr.Set(HeaderEnqueued, md.Timestamp.UTC().Format(time.RFC3339Nano))
	if id := msg.Headers().Get(HeaderTrigger); id != "" {
		hdr.Set(HeaderTrigger, id)
	}
	id := "poison:" + queue + ":" + strconv.FormatUint(md.Sequence.Stream, 10)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := rn.queues.publish(pctx, queue+PoisonSuffix, msg.Data(), id, hdr); err != nil {
		rn.log.Error("function: could not move a message to its poison queue; it will be delivered again", "function", f.name, "queue", queue, "err", err)
		_ = msg.NakWithDelay(f.cur.Load().m.BackoffMax.D())
		return
	}
	if err := msg.TermWithReason("poisoned: " + reason); err != nil {
		rn.log.Warn("function: term failed", "function", f.name, "err", err)
	}
	rn.stats.Poisoned.Add(1)
	rn.log.Warn("message moved to the poison queue", "function", f.name, "queue", queue+PoisonSuffix, "attempts", attempts, "err", reason)
}
