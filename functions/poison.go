package functions

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
