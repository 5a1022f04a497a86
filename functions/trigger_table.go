package functions

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/abi"
	"github.com/cairn-dev/cairn/journal"
)

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
		watched := make(chan struct{})
		go func() { // stop when the table is deleted or recreated
			defer close(watched)
			for retryWait(tctx, 2*time.Second) {
				if cur, ok := rn.views.Table(table); !ok || cur.Epoch() != epoch {
					cancel()
					return
				}
			}
		}()
		err = f.consumeTable(tctx, t.Name(), epoch)
		cancel()
		<-watched
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
	return f.pull(ctx, cons, 1, "table feed", func(msg jetstream.Msg, release func()) {
		f.handleRecord(ctx, table, epoch, msg)
		release()
	})
}

// handleRecord runs the function on each change of one journal record.
func (f *function) handleRecord(ctx context.Context, table string, epoch uint64, msg jetstream.Msg) {
	defer keepAlive(msg)()
	rn := f.rn
	md, err := msg.Metadata()
	if err != nil {
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
	seq := md.Sequence.Stream
	rec, err := journal.DecodeRecord(msg.Data())
	if err != nil {
		if !f.poisonChange(ctx, table, seq, n, fmt.Sprintf("undecodable record: %v", err)) {
			redeliver(msg, v.m.BackoffMax.D())
			return
		}
		_ = msg.Term()
		return
	}
	policy := m.retryPolicy()
	if d := retryOrPoison(policy, attempt{DequeueCount: n}); d.Action == actPoison {
		if !f.poisonChange(ctx, table, seq, d.Attempts, fmt.Sprintf("delivered %d times without finishing; not run again", d.Attempts)) {
			redeliver(msg, m.BackoffMax.D())
			return
		}
		_ = msg.Term()
		return
	}
	prevs := previous{rn: rn, table: table, epoch: epoch, seq: seq, rec: rec}
	for i, ev := range rec.Events {
		e := &engine.Entity{PartitionKey: rec.PartitionKey, RowKey: ev.RowKey, Timestamp: rec.Time, Version: engine.Version{Seq: seq, Index: uint32(i)}}
		ch := &abi.Change{Table: table, Seq: seq, Index: i, Deleted: ev.Kind == engine.EventDelete, ETag: engine.ETag(epoch, e.Version)}
		if !ch.Deleted {
			e.Properties = ev.Properties
		}
		ch.Entity = abi.Entity{Entity: e, ETag: ch.ETag}
		perr := prevs.set(ctx, i, ch)
		trig := abi.Trigger{
			ID:           "c:" + table + ":" + strconv.FormatUint(epoch, 10) + ":" + strconv.FormatUint(seq, 10) + ":" + strconv.Itoa(i),
			Kind:         abi.KindChange,
			Function:     f.name,
			Version:      m.Version,
			DequeueCount: n,
			Time:         rec.Time,
			Change:       ch,
		}
		err := perr
		if err == nil {
			_, err = rn.run(ctx, v, trig, []floor{{table: table, epoch: epoch, seq: seq}})
		}
		if err != nil {
			stopped := ctx.Err() != nil
			d := retryOrPoison(policy, attempt{DequeueCount: n, Failed: true, Stopped: stopped})
			if d.Action == actPoison {
				if !f.poisonChange(ctx, table, seq, d.Attempts, fmt.Sprintf("change %d: %v", i, err)) {
					redeliver(msg, m.BackoffMax.D())
					return
				}
				_ = msg.Term()
				return
			}
			if !stopped {
				rn.log.Info("function failed on a change; retrying after back-off", "function", f.name, "trigger", trig.ID, "dequeueCount", n, "err", err)
			}
			redeliver(msg, d.Delay)
			return
		}
	}
	_ = msg.DoubleAck(ctx)
}

// previous finds the previous state of the changes of one record: the
// record at the previous version's sequence (read with a direct get, once
// per sequence) and its event at the previous version's index.
type previous struct {
	rn     *Runner
	table  string
	epoch  uint64
	seq    uint64 // the record's
	rec    *engine.Record
	stream jetstream.Stream
	read   map[uint64]*engine.Record
}

// set fills in ch's PrevETag and Prev, or PrevUnknown, for event i. An
// error (the journal unreachable, or a previous version that is not a put
// of the same row) fails the change, which is then retried like a failed
// invocation.
func (p *previous) set(ctx context.Context, i int, ch *abi.Change) error {
	v, exists, known := p.rec.PrevVersion(p.seq, i)
	if !known {
		ch.PrevUnknown = true
		return nil
	}
	if !exists {
		return nil
	}
	ch.PrevETag = engine.ETag(p.epoch, v)
	rec := p.rec
	if v.Seq != p.seq {
		var err error
		if rec, err = p.record(ctx, v.Seq); err != nil {
			return fmt.Errorf("previous version %s: %w", ch.PrevETag, err)
		}
	}
	rk := p.rec.Events[i].RowKey
	if int(v.Index) >= len(rec.Events) || rec.Events[v.Index].Kind != engine.EventPut || rec.Events[v.Index].RowKey != rk || rec.PartitionKey != p.rec.PartitionKey {
		return fmt.Errorf("previous version %s is not a put of (%q, %q)", ch.PrevETag, p.rec.PartitionKey, rk)
	}
	ch.Prev = &abi.Entity{Entity: &engine.Entity{PartitionKey: rec.PartitionKey, RowKey: rk, Timestamp: rec.Time, Version: v,
		Properties: rec.Events[v.Index].Properties}, ETag: ch.PrevETag}
	return nil
}

// record reads and decodes the table's record at seq.
func (p *previous) record(ctx context.Context, seq uint64) (*engine.Record, error) {
	if r, ok := p.read[seq]; ok {
		return r, nil
	}
	if p.stream == nil {
		s, err := p.rn.js.Stream(ctx, journal.StreamName(p.rn.cfg.Prefix, p.table, p.epoch))
		if err != nil {
			return nil, err
		}
		p.stream = s
	}
	m, err := p.stream.GetMsg(ctx, seq)
	if err != nil {
		return nil, err
	}
	r, err := journal.DecodeRecord(m.Data)
	if err != nil {
		return nil, err
	}
	if p.read == nil {
		p.read = map[uint64]*engine.Record{}
	}
	p.read[seq] = r
	return r, nil
}
