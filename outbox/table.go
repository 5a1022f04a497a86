package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// item is one message waiting in its partition.
type item struct {
	pk    string
	seq   uint64
	index int
	time  int64 // the record's time in ticks
	msg   engine.Message
}

// partition is the queue of one partition's messages, oldest first: only
// the head is ever in flight.
type partition struct {
	pk       string
	queue    []item
	inflight bool
	// blocked: the head's last attempt failed.
	err      string
	reason   Reason
	remedy   string
	since    time.Time // the first failure of the head
	attempts int
	retryAt  time.Time
}

// delivery is the outcome of publishing a partition's head.
type delivery struct {
	p   *partition
	err error
}

// worker relays one table incarnation's messages. Its state belongs to
// its run goroutine.
type worker struct {
	r      *Relay
	table  string
	epoch  uint64
	shards uint32
	stream string

	pos     *positioner // stores the position: every message of records ≤ it is delivered
	read    uint64      // the last record read
	head    uint64      // the journal's last record, as last seen
	pending int
	parts   map[string]*partition
	// ready holds the partitions whose head may be published now: queued
	// when a head appears or its previous one is delivered, so that a
	// dispatch costs what it publishes, not the number of partitions.
	ready        []*partition
	waiting      map[*partition]bool // blocked, until their retryAt
	blockedShown string              // the blocked list last stored, to store changes only
	lagLogged    time.Time           // when the relay last logged that it is behind
	blockLogged  time.Time           // when the relay last logged a blocked partition
	blockQuiet   int                 // partitions blocked since, not logged

	status *tableStatus
}

type record struct {
	seq, head uint64
	rec       *engine.Record
}

// run relays until ctx ends (nil) or reading the table's journal fails
// (that error; wrapping engine.ErrTableGone when its stream is not there:
// not yet created, or dropped).
func (w *worker) run(ctx context.Context) error {
	r := w.r
	w.parts, w.pending, w.ready, w.waiting = map[string]*partition{}, 0, nil, map[*partition]bool{}
	if err := w.loadPos(ctx); err != nil {
		return err
	}
	from := w.pos.stored.Load()
	w.read, w.head = from, from
	r.cfg.Log.Debug("outbox: relaying a table", "table", w.table, "epoch", w.epoch, "from", from+1)
	recs := make(chan record, 1024)
	readErr := make(chan error, 1)
	rctx, stopRead := context.WithCancel(ctx)
	defer stopRead()
	go func() {
		readErr <- r.j.Consume(rctx, w.table, w.epoch, w.shards, from+1, func(seq uint64, rec *engine.Record, pending uint64) error {
			select {
			case recs <- record{seq: seq, head: seq + pending, rec: rec}:
				return nil
			case <-rctx.Done():
				return rctx.Err()
			}
		})
	}()
	done := make(chan delivery, 256)
	tick := time.NewTicker(r.cfg.CheckpointEvery)
	defer tick.Stop()
	pctx, stopPos := context.WithCancel(ctx)
	go w.pos.run(pctx)
	// No store of this run after it ends.
	defer func() { stopPos(); <-w.pos.done }()
	delivered := 0 // since the position was last asked for
	inflight := 0
	defer func() {
		// Let the publishes in flight end before the worker is gone: a
		// stopped worker must not publish behind its successor's back.
		for ; inflight > 0; inflight-- {
			<-done
		}
	}()
	for {
		in := recs
		if w.pending >= r.cfg.MaxPending {
			in = nil // back-pressure: drain before reading more
		}
		select {
		case <-ctx.Done():
			// The last position, once the positioner has stopped (so
			// that no older one overwrites it).
			<-w.pos.done
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalStoreWait)
			w.pos.store(cctx, w.low())
			cancel()
			return nil
		case err := <-readErr:
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				err = errors.New("journal consumer ended")
			}
			return err
		case rc := <-in:
			w.add(rc)
		case d := <-done:
			inflight--
			w.delivered(ctx, d)
			if delivered++; delivered >= checkpointMessages {
				w.pos.ask(w.low())
				delivered = 0
			}
		case <-tick.C:
			w.pos.ask(w.low())
			w.publishStatus(ctx)
			w.due(time.Now())
		}
		inflight += w.dispatch(ctx, done)
	}
}

// loadPos reads the table's stored position (0 when none).
func (w *worker) loadPos(ctx context.Context) error {
	pos, _, err := StoredPosition(ctx, w.r.kv, w.stream)
	w.pos = newPositioner(w, pos)
	return err
}

// finalStoreWait bounds the store of the position when a worker stops.
const finalStoreWait = 2 * time.Second

// StoredPosition returns the position the relay stored for a table
// incarnation's journal (its stream): every outbox message of a record up
// to it is delivered. ok is false while none is stored (the relay has not
// read the table yet).
func StoredPosition(ctx context.Context, kv jetstream.KeyValue, stream string) (pos uint64, ok bool, err error) {
	e, err := kv.Get(ctx, posKey(stream))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("outbox: position of %s: %w", stream, err)
	}
	n, err := strconv.ParseUint(string(e.Value()), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("outbox: position of %s: %q is not a sequence", stream, e.Value())
	}
	return n, true, nil
}

// add queues a record's messages on their partition.
func (w *worker) add(rc record) {
	w.read, w.head = rc.seq, max(w.head, rc.head)
	if len(rc.rec.Messages) == 0 {
		return
	}
	p := w.parts[rc.rec.PartitionKey]
	if p == nil {
		p = &partition{pk: rc.rec.PartitionKey}
		w.parts[p.pk] = p
	}
	if len(p.queue) == 0 && !p.inflight {
		w.ready = append(w.ready, p)
	}
	for i, m := range rc.rec.Messages {
		p.queue = append(p.queue, item{pk: p.pk, seq: rc.seq, index: i, time: rc.rec.Time, msg: m})
		w.pending++
	}
}

// dispatch publishes the head of every ready partition, and of every
// blocked one whose back-off is over; it returns how many it started.
func (w *worker) dispatch(ctx context.Context, done chan<- delivery) int {
	n := 0
	for _, p := range w.ready {
		if p.inflight || len(p.queue) == 0 {
			continue
		}
		p.inflight = true
		n++
		w.r.publish(ctx, w, p.queue[0], func(err error) { done <- delivery{p: p, err: err} })
	}
	clear(w.ready)
	w.ready = w.ready[:0]
	return n
}

// due makes the blocked partitions whose back-off is over ready.
func (w *worker) due(now time.Time) {
	for p := range w.waiting {
		if !now.Before(p.retryAt) {
			delete(w.waiting, p)
			w.ready = append(w.ready, p)
		}
	}
}

// delivered records the outcome of a partition head's publish.
func (w *worker) delivered(ctx context.Context, d delivery) {
	p := d.p
	w.r.cfg.Log.Debug("outbox: delivery", "table", w.table, "partition", p.pk, "seq", p.queue[0].seq, "err", d.err)
	p.inflight = false
	if d.err == nil {
		if p.err != "" {
			w.r.cfg.Log.Info("outbox: partition unblocked", "table", w.table, "partition", p.pk, "seq", p.queue[0].seq, "attempts", p.attempts)
		}
		w.pop(p)
		w.r.stats.delivered.Add(1)
		if len(p.queue) > 0 {
			w.ready = append(w.ready, p)
		}
		return
	}
	w.r.stats.failed.Add(1)
	it := p.queue[0]
	p.reason, p.remedy = classify(d.err, it.msg.Subject == "")
	if p.err == "" {
		p.since = time.Now()
		w.logBlocked(p, it, d.err)
	}
	p.err = d.err.Error()
	p.attempts++
	backoff := min(w.r.cfg.MaxBackoff, 100*time.Millisecond<<min(p.attempts, 16))
	p.retryAt = time.Now().Add(backoff)
	// The operators' requests: skip the head, or retry it now.
	if w.skipRequested(ctx, it) {
		w.r.cfg.Log.Warn("outbox: message skipped by an operator", "table", w.table, "partition", p.pk, "seq", it.seq, "index", it.index)
		w.r.stats.skipped.Add(1)
		_ = w.r.kv.Delete(ctx, skipKey(w.stream, it.seq, it.index)) // done with
		w.pop(p)
		if len(p.queue) > 0 {
			w.ready = append(w.ready, p)
		}
		return
	}
	w.waiting[p] = true
}

// logBlocked logs that a partition's head cannot be delivered, with why
// and what to do (p.reason, p.remedy): at most once per blockLogEvery per table, so that a
// subject no stream captures, blocking a thousand partitions, is a line
// and a count rather than a thousand lines.
func (w *worker) logBlocked(p *partition, it item, err error) {
	now := time.Now()
	if now.Sub(w.blockLogged) < blockLogEvery {
		w.blockQuiet++
		return
	}
	w.r.cfg.Log.Warn("outbox: a message cannot be delivered; its partition waits and it is tried again", "table", w.table, "partition", p.pk,
		"record", it.seq, "index", it.index, "destination", destination(w.r.cfg.Prefix, it.msg), "reason", p.reason, "err", err,
		"remedy", p.remedy, "more_blocked_since_last_line", w.blockQuiet)
	w.blockLogged, w.blockQuiet = now, 0
}

// blockLogEvery is the least time between two lines about blocked
// partitions of one table: the status lists every one of them.
const blockLogEvery = 10 * time.Second

// pop removes a partition's head.
func (w *worker) pop(p *partition) {
	p.queue[0] = item{}
	p.queue = p.queue[1:]
	w.pending--
	p.err, p.reason, p.remedy, p.attempts, p.since, p.retryAt = "", "", "", 0, time.Time{}, time.Time{}
	if len(p.queue) == 0 {
		delete(w.parts, p.pk)
	}
}

// skipRequested reports whether an operator asked to skip it.
func (w *worker) skipRequested(ctx context.Context, it item) bool {
	_, err := w.r.kv.Get(ctx, skipKey(w.stream, it.seq, it.index))
	return err == nil
}

// low is the position every message up to which is delivered.
func (w *worker) low() uint64 {
	low := w.read
	for _, p := range w.parts {
		if len(p.queue) > 0 && p.queue[0].seq-1 < low {
			low = p.queue[0].seq - 1
		}
	}
	return low
}

// Blocked is a partition whose oldest message cannot be delivered.
type Blocked struct {
	Partition   string `json:"partition"`
	Seq         uint64 `json:"seq"`
	Index       int    `json:"index"`
	Destination string `json:"destination"`
	Error       string `json:"error"`
	// Reason classifies Error (ReasonNoStream, …) and Remedy says what
	// an operator can do about it.
	Reason   Reason    `json:"reason,omitempty"`
	Remedy   string    `json:"remedy,omitempty"`
	Since    time.Time `json:"since"`
	Attempts int       `json:"attempts"`
	Waiting  int       `json:"waiting"` // messages of the partition waiting behind it, itself included
}

// publishStatus updates what Status and /metrics show, and the blocked
// list in the bucket (for the CLI on any node) when it changed. A retry
// request of an operator makes every blocked head due now.
func (w *worker) publishStatus(ctx context.Context) {
	st := TableStatus{Table: w.table, Epoch: w.epoch, Position: w.pos.stored.Load(), Read: w.read, Head: w.head, Pending: w.pending}
	var oldest int64
	for _, p := range w.parts {
		if len(p.queue) > 0 && (oldest == 0 || p.queue[0].time < oldest) {
			oldest = p.queue[0].time
		}
		if p.err != "" {
			it := p.queue[0]
			st.Blocked = append(st.Blocked, Blocked{Partition: p.pk, Seq: it.seq, Index: it.index, Destination: destination(w.r.cfg.Prefix, it.msg),
				Error: p.err, Reason: p.reason, Remedy: p.remedy, Since: p.since, Attempts: p.attempts, Waiting: len(p.queue)})
		}
	}
	if oldest != 0 {
		st.OldestPending = engine.TicksToTime(oldest)
	}
	w.status.set(st)
	if now := time.Now(); st.LagSeconds(now) >= lagWarn.Seconds() && now.Sub(w.lagLogged) >= lagLogEvery {
		w.lagLogged = now
		w.r.cfg.Log.Warn("outbox: the relay is behind", "table", w.table, "lag_records", st.LagRecords(),
			"lag_seconds", int(st.LagSeconds(now)), "pending", st.Pending, "blocked_partitions", len(st.Blocked))
	}
	if len(st.Blocked) == 0 && w.blockedShown == "" {
		return
	}
	b, _ := json.Marshal(st.Blocked)
	if len(st.Blocked) == 0 {
		b = nil
	}
	if string(b) != w.blockedShown {
		var err error
		if b == nil {
			err = w.r.kv.Delete(ctx, blockedKey(w.stream))
		} else {
			_, err = w.r.kv.Put(ctx, blockedKey(w.stream), b)
		}
		if err == nil {
			w.blockedShown = string(b)
		}
	}
	if len(st.Blocked) > 0 {
		if e, err := w.r.kv.Get(ctx, retryKey(w.stream)); err == nil && e.Created().After(w.status.retrySeen()) {
			w.status.sawRetry(e.Created())
			for p := range w.waiting {
				p.retryAt = time.Time{}
			}
		}
	}
}

// A table whose oldest undelivered message is lagWarn old is logged, at
// most every lagLogEvery.
const (
	lagWarn     = 10 * time.Second
	lagLogEvery = 30 * time.Second
)

// journalReader is what a worker reads of the journal.
type journalReader interface {
	Consume(ctx context.Context, table string, epoch uint64, shards uint32, from uint64, fn func(seq uint64, rec *engine.Record, pending uint64) error) error
}
