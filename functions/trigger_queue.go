package functions

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/abi"
)

// consumeQueue feeds the function from a queue: a durable consumer shared by
// every node, at most Concurrency invocations at once on this node.
func (f *function) consumeQueue(ctx context.Context, queue string) error {
	for {
		err := f.consumeQueueOnce(ctx, queue)
		if err == nil || ctx.Err() != nil {
			return nil
		}
		// The consumer is gone (deleted from outside, or JetStream lost
		// it, or does not answer while it fails over): create it again,
		// which is harmless if it was there.
		f.rn.log.Warn("function: its queue's consumer is gone; creating it again", "function", f.name, "queue", queue, "err", err)
		if !retryWait(ctx, time.Second) {
			return nil
		}
	}
}

// consumeQueueOnce creates the function's consumer and feeds the function
// from it until ctx ends (nil) or the consumer is gone (its error); it
// returns once the invocations it started have finished, so that the next
// call's slots are all free.
func (f *function) consumeQueueOnce(ctx context.Context, queue string) error {
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
	var wg sync.WaitGroup
	defer wg.Wait()
	return f.pull(ctx, cons, m.Concurrency, "queue", func(msg jetstream.Msg, release func()) {
		wg.Add(1)
		go func() {
			defer func() { release(); wg.Done() }()
			// A delivery taken is finished even when the function is
			// stopping (its timeout bounds it): cutting it short would
			// cost the message a delivery.
			f.handle(context.WithoutCancel(ctx), queue, msg)
		}()
	})
}

// handle runs one delivery of a queue message and settles it: ack on
// success; on failure, delivered again after a back-off, or moved to the
// poison queue once its dequeue count reaches the maximum.
func (f *function) handle(ctx context.Context, queue string, msg jetstream.Msg) {
	defer keepAlive(msg)()
	rn := f.rn
	md, err := msg.Metadata()
	if err != nil {
		rn.log.Error("function: message without metadata", "function", f.name, "err", err)
		_ = msg.Term()
		return
	}
	v, ok := f.take()
	if !ok { // stopped: another node, or this one later, runs it
		redeliver(msg, 0)
		return
	}
	defer v.release()
	m := v.m
	n := int(md.NumDelivered)
	policy := m.retryPolicy()
	if d := retryOrPoison(policy, attempt{DequeueCount: n}); d.Action == actPoison {
		// Earlier deliveries never settled: the node running them died
		// or lost its connection. Do not run it again.
		reason, ok := f.unmoved.reason(md.Sequence.Stream)
		if !ok {
			reason = fmt.Sprintf("delivered %d times without finishing (the node running it stopped, or the invocation never returned, or its poison queue was full); not run again", d.Attempts)
		}
		f.poison(ctx, queue, msg, md, d.Attempts, reason)
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
	floors, err := parseFloors(msg.Headers())
	if err != nil { // the message's own fault: running it again cannot help
		f.poison(ctx, queue, msg, md, n, err.Error())
		return
	}
	_, err = rn.run(ctx, v, trig, floors)
	if err == nil {
		if aerr := msg.DoubleAck(ctx); aerr != nil {
			// Delivered again later; the writes are answered as duplicates.
			rn.log.Warn("function: ack failed", "function", f.name, "trigger", trig.ID, "err", aerr)
		}
		return
	}
	d := retryOrPoison(policy, attempt{DequeueCount: n, Failed: true, Stopped: ctx.Err() != nil})
	if d.Action == actPoison {
		f.poison(ctx, queue, msg, md, d.Attempts, err.Error())
		return
	}
	rn.log.Info("function failed; retrying after back-off", "function", f.name, "trigger", trig.ID, "dequeueCount", n, "backoff", d.Delay, "err", err)
	redeliver(msg, d.Delay)
}
