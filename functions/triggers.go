package functions

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/abi"
	"github.com/cairn-dev/cairn/journal"
)

// TimerQueue is the queue that carries a timer function's ticks.
func TimerQueue(function string) string { return "timer-" + function }

// runTimer publishes a tick at each time of the schedule (each multiple of
// the interval, or each time of the cron schedule) to the function's timer
// queue, from every node, with an id naming the tick:
// JetStream keeps one of each. The ticks are then delivered like any
// queue message (dequeue counts, back-off, poison).
func (f *function) runTimer(ctx context.Context, m Manifest) error {
	queue := TimerQueue(f.name)
	next, err := m.Trigger.schedule()
	if err != nil {
		return err
	}
	go func() {
		for {
			now := f.rn.now()
			next := next(now)
			select {
			case <-ctx.Done():
				return
			case <-time.After(next.Sub(now)):
			}
			tick := next.UTC()
			id := "t:" + f.name + ":" + tick.Format(time.RFC3339Nano)
			hdr := nats.Header{HeaderTrigger: []string{id}}
			body := []byte(tick.Format(time.RFC3339Nano))
			if err := f.rn.queues.publish(ctx, queue, body, id, hdr); err != nil && ctx.Err() == nil {
				f.rn.log.Warn("function: timer tick not published", "function", f.name, "tick", tick, "err", err)
			}
		}
	}()
	return f.consumeQueue(ctx, queue)
}

// followTable feeds the function with the committed changes of a table,
// in journal order (so in order within each partition), through a durable
// consumer of the table's journal shared by every node, one record at a
// time. A record whose function fails is delivered again after a back-off
// (the changes after it wait); when its dequeue count reaches the maximum
// it is recorded in the poison queue <function>-changes-poison and
// skipped. A table deleted and created again is followed in its new
// incarnation from its start.
func (f *function) followTable(ctx context.Context, table string) error {
	rn := f.rn
	for ctx.Err() == nil {
		t, ok, err := rn.views.Lookup(ctx, table)
		if err != nil || !ok {
			if err != nil {
				rn.log.Warn("function: table lookup failed", "function", f.name, "table", table, "err", err)
			}
			if !retryWait(ctx, 2*time.Second) {
				return nil
			}
			continue
		}
		epoch := t.Epoch()
		tctx, cancel := context.WithCancel(ctx)
		go func() { // stop when the table is deleted or recreated
			for retryWait(tctx, 2*time.Second) {
				if cur, ok := rn.views.Table(table); !ok || cur.Epoch() != epoch {
					cancel()
					return
				}
			}
		}()
		err = f.consumeTable(tctx, t.Name(), epoch)
		cancel()
		if err != nil && ctx.Err() == nil {
			rn.log.Warn("function: table feed failed; starting again", "function", f.name, "table", table, "err", err)
			retryWait(ctx, 2*time.Second)
		}
	}
	return nil
}

func (f *function) consumeTable(ctx context.Context, table string, epoch uint64) error {
	rn := f.rn
	m := f.cur.Load().m
	stream := journal.StreamName(rn.cfg.Prefix, table, epoch)
	cons, err := rn.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable:       "fn-" + f.name,
		Description:   "function " + f.name + " on the changes of " + table,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       m.AckWait(),
		MaxDeliver:    -1,
		MaxAckPending: 1, // one record at a time: journal order
		Replicas:      rn.cfg.Replicas,
	})
	if err != nil {
		return fmt.Errorf("consumer on %s: %w", stream, err)
	}
	return f.pull(ctx, cons, 1, "table feed", func(msg jetstream.Msg) { f.handleRecord(ctx, table, epoch, msg) })
}

// handleRecord runs the function on each change of one journal record.
func (f *function) handleRecord(ctx context.Context, table string, epoch uint64, msg jetstream.Msg) {
	rn := f.rn
	md, err := msg.Metadata()
	if err != nil {
		_ = msg.Term()
		return
	}
	v := f.take()
	defer v.release()
	m := v.m
	n := int(md.NumDelivered)
	seq := md.Sequence.Stream
	rec, err := journal.DecodeRecord(msg.Data())
	if err != nil {
		f.poisonChange(ctx, table, seq, n, fmt.Sprintf("undecodable record: %v", err))
		_ = msg.Term()
		return
	}
	if n > m.MaxDequeueCount {
		f.poisonChange(ctx, table, seq, n-1, fmt.Sprintf("delivered %d times without finishing; not run again", n-1))
		_ = msg.Term()
		return
	}
	for i, ev := range rec.Events {
		e := &engine.Entity{PartitionKey: rec.PartitionKey, RowKey: ev.RowKey, Timestamp: rec.Time, Version: engine.Version{Seq: seq, Index: uint32(i)}}
		ch := &abi.Change{Table: table, Seq: seq, Index: i, Deleted: ev.Kind == engine.EventDelete, ETag: engine.ETag(epoch, e.Version)}
		if !ch.Deleted {
			e.Properties = ev.Properties
		}
		ch.Entity = abi.Entity{Entity: e, ETag: ch.ETag}
		trig := abi.Trigger{
			ID:           "c:" + table + ":" + strconv.FormatUint(epoch, 10) + ":" + strconv.FormatUint(seq, 10) + ":" + strconv.Itoa(i),
			Kind:         abi.KindChange,
			Function:     f.name,
			Version:      m.Version,
			DequeueCount: n,
			Time:         rec.Time,
			Change:       ch,
		}
		if _, err := rn.run(ctx, v, trig); err != nil {
			if ctx.Err() != nil {
				_ = msg.Nak()
				return
			}
			if n >= m.MaxDequeueCount {
				f.poisonChange(ctx, table, seq, n, fmt.Sprintf("change %d: %v", i, err))
				_ = msg.Term()
				return
			}
			rn.log.Info("function failed on a change; retrying after back-off", "function", f.name, "trigger", trig.ID, "dequeueCount", n, "err", err)
			_ = msg.NakWithDelay(m.Backoff(n))
			return
		}
	}
	_ = msg.DoubleAck(ctx)
}

// poisonChange records a skipped journal record in <function>-changes-poison.
func (f *function) poisonChange(ctx context.Context, table string, seq uint64, attempts int, reason string) {
	queue := f.name + "-changes"
	hdr := f.poisonHeader(reason, attempts, seq)
	body := fmt.Appendf(nil, `{"table":%q,"seq":%d}`, table, seq)
	id := "poison:" + queue + ":" + table + ":" + strconv.FormatUint(seq, 10)
	if err := f.rn.queues.publish(context.WithoutCancel(ctx), queue+PoisonSuffix, body, id, hdr); err != nil {
		f.rn.log.Error("function: could not record a poisoned change", "function", f.name, "seq", seq, "err", err)
	}
	f.rn.stats.Poisoned.Add(1)
	f.rn.log.Warn("change skipped and recorded in the poison queue", "function", f.name, "table", table, "seq", seq, "attempts", attempts, "err", reason)
}

// DirectSubject is the subject a function is invoked on directly.
func DirectSubject(prefix, function string) string { return prefix + ".fn." + function }

// Headers of a direct invocation's reply.
const (
	HeaderReplyError = "Cairn-Error" // set when the invocation failed
)

// serveDirect answers requests on <prefix>.fn.<name>: one invocation each,
// not retried (the caller decides), replied with the function's output or
// its error. A request with a Nats-Msg-Id header uses it as the trigger id,
// so that a caller retrying with the same id does not apply writes twice.
func (rn *Runner) serveDirect() error {
	_, err := rn.nc.QueueSubscribe(DirectSubject(rn.cfg.Prefix, "*"), "cairn-fn", func(msg *nats.Msg) {
		name := msg.Subject[len(DirectSubject(rn.cfg.Prefix, "")):]
		rn.mu.Lock()
		f := rn.fns[name]
		rn.mu.Unlock()
		if f == nil {
			replyError(msg, fmt.Sprintf("function %q is not deployed", name))
			return
		}
		go f.direct(msg)
	})
	return err
}

func replyError(msg *nats.Msg, text string) {
	r := nats.NewMsg(msg.Reply)
	r.Header.Set(HeaderReplyError, text)
	_ = msg.RespondMsg(r)
}

func (f *function) direct(msg *nats.Msg) {
	v := f.take()
	defer v.release()
	id := msg.Header.Get(nats.MsgIdHdr)
	if id == "" {
		id = nats.NewInbox()[len(nats.InboxPrefix):]
	}
	trig := abi.Trigger{
		ID:           "i:" + id,
		Kind:         abi.KindInvoke,
		Function:     f.name,
		Version:      v.m.Version,
		Body:         msg.Data,
		DequeueCount: 1,
		Time:         engine.TimeToTicks(f.rn.now()),
	}
	inv, err := f.rn.run(f.rn.ctx, v, trig)
	if err != nil {
		replyError(msg, err.Error())
		return
	}
	r := nats.NewMsg(msg.Reply)
	r.Data = inv.Output()
	_ = msg.RespondMsg(r)
}
