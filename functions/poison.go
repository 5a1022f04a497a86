package functions

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// PoisonSuffix ends the name of a queue's poison queue.
const PoisonSuffix = "-poison"

// Headers of a poison message, as poison and poisonChange write them
// (functions/queueadmin reads them). Its body is the original message's.
const (
	HeaderError    = "Cairn-Error"      // the last attempt's error
	HeaderAttempts = "Cairn-Attempts"   // deliveries, the last one included
	HeaderQueue    = "Cairn-Queue"      // the queue it came from
	HeaderFunction = "Cairn-Function"   // the function that failed on it
	HeaderEnqueued = "Cairn-Enqueued"   // RFC 3339, when it was first enqueued
	HeaderPoisoned = "Cairn-Poisoned"   // RFC 3339, when it was moved
	HeaderSource   = "Cairn-Source"     // stream sequence it had on its queue
	HeaderTrigger  = "Cairn-Trigger-Id" // on a timer tick: the tick's id
)

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
//
// A move that fails leaves the message on its queue, unacknowledged: it
// is delivered again after the function's backoffMax and, its dequeue
// count being past the maximum, moved then without running. A poison
// queue that holds the node's cap, or a full queue stream, refuses the
// move this way until it has room: logged (the refusal says which) (at most every 10 s per function), counted in
// cairn_function_poison_refused_total, and the reason kept for the next
// attempt on this node.
func (f *function) poison(ctx context.Context, queue string, msg jetstream.Msg, md *jetstream.MsgMetadata, attempts int, reason string) {
	rn := f.rn
	if len(reason) > 2048 {
		reason = reason[:2048] + "…"
	}
	seq := md.Sequence.Stream
	hdr := f.poisonHeader(reason, attempts, seq)
	hdr.Set(HeaderQueue, queue)
	hdr.Set(HeaderEnqueued, md.Timestamp.UTC().Format(time.RFC3339Nano))
	if id := msg.Headers().Get(HeaderTrigger); id != "" {
		hdr.Set(HeaderTrigger, id)
	}
	id := "poison:" + queue + ":" + strconv.FormatUint(seq, 10)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := rn.queues.Publish(pctx, queue+PoisonSuffix, msg.Data(), id, hdr); err != nil {
		delay := f.cur.Load().m.BackoffMax.D()
		if engine.ErrorCode(err) == CodeQueueBacklogExceeded {
			rn.stats.PoisonRefused.Add(1)
			f.unmoved.note(seq, reason)
			if f.unmoved.shouldLog(time.Now()) {
				rn.log.Error("function: its poison queue is full; failed messages stay on their queue, unacknowledged, and are moved once it has room (requeue or delete poison messages)",
					"function", f.name, "queue", queue+PoisonSuffix, "source", seq, "retryIn", delay, "err", reason, "refused", engine.AsError(err).Message)
			}
		} else {
			rn.log.Error("function: could not move a message to its poison queue; it will be delivered again", "function", f.name, "queue", queue, "err", err)
		}
		_ = msg.NakWithDelay(delay)
		return
	}
	f.unmoved.forget(seq)
	if err := msg.TermWithReason("poisoned: " + reason); err != nil {
		rn.log.Warn("function: term failed", "function", f.name, "err", err)
	}
	rn.stats.Poisoned.Add(1)
	rn.perFn.poison(f.name)
	rn.log.Warn("message moved to the poison queue", "function", f.name, "queue", queue+PoisonSuffix, "attempts", attempts, "err", reason)
}

// poisonChange records a skipped journal record in
// <function>-changes-poison and reports whether it is recorded. A record
// that could not be recorded (the poison queue is full, or the stream
// failed) must not be skipped: the caller delivers it again.
func (f *function) poisonChange(ctx context.Context, table string, seq uint64, attempts int, reason string) bool {
	queue := f.name + "-changes"
	hdr := f.poisonHeader(reason, attempts, seq)
	body := fmt.Appendf(nil, `{"table":%q,"seq":%d}`, table, seq)
	id := "poison:" + queue + ":" + table + ":" + strconv.FormatUint(seq, 10)
	if err := f.rn.queues.Publish(context.WithoutCancel(ctx), queue+PoisonSuffix, body, id, hdr); err != nil {
		if engine.ErrorCode(err) == CodeQueueBacklogExceeded {
			f.rn.stats.PoisonRefused.Add(1)
			if !f.unmoved.shouldLog(time.Now()) {
				return false
			}
		}
		f.rn.log.Error("function: could not record a failing change in its poison queue; the change is delivered again and the feed waits", "function", f.name, "table", table, "seq", seq, "err", err)
		return false
	}
	f.rn.stats.Poisoned.Add(1)
	f.rn.perFn.poison(f.name)
	f.rn.log.Warn("change skipped and recorded in the poison queue", "function", f.name, "table", table, "seq", seq, "attempts", attempts, "err", reason)
	return true
}

// maxUnmoved bounds the reasons a function keeps for messages its poison
// queue refused.
const maxUnmoved = 1024

// unmoved is what a function remembers of the messages its full poison
// queue refused: the reason each failed (so that the move tried on its
// next delivery carries it), and when it last said so in the log.
type unmoved struct {
	mu      sync.Mutex
	reasons map[uint64]string // by stream sequence
	logged  time.Time
}

func (u *unmoved) note(seq uint64, reason string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.reasons == nil {
		u.reasons = map[uint64]string{}
	}
	if _, ok := u.reasons[seq]; ok || len(u.reasons) < maxUnmoved {
		u.reasons[seq] = reason
	}
}

// reason returns why a message refused by the poison queue had failed.
func (u *unmoved) reason(seq uint64) (string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	r, ok := u.reasons[seq]
	return r, ok
}

func (u *unmoved) forget(seq uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.reasons, seq)
}

// shouldLog reports whether a full poison queue is worth a log line now:
// at most one every throttleLogEvery.
func (u *unmoved) shouldLog(now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if now.Sub(u.logged) < throttleLogEvery {
		return false
	}
	u.logged = now
	return true
}
