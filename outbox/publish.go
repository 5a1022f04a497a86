package outbox

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// Headers of a relayed message.
const (
	// PositionHeader carries a message's journal position,
	// "<table>/<epoch>/<seq>/<index>" (the table's full name): unique and
	// increasing per partition, for consumers that de-duplicate beyond
	// JetStream's window.
	PositionHeader = "Cairn-Outbox-Position"
	// PartitionHeader carries the PartitionKey of the write.
	PartitionHeader = "Cairn-Partition"
)

// QueueSubject is the subject of a Cairn queue (the functions' work-queue
// stream captures <prefix>.queue.>).
func QueueSubject(prefix, queue string) string { return prefix + ".queue." + queue }

// destination is the subject a message goes to: its NATS subject, or its
// Cairn queue's.
func destination(prefix string, m engine.Message) string {
	if m.Subject != "" {
		return m.Subject
	}
	return QueueSubject(prefix, m.Queue)
}

// MessageID is the Nats-Msg-Id of a message: the command's own id for it
// when it gave one, otherwise its position.
func MessageID(table string, epoch, seq uint64, index int, m engine.Message) string {
	if m.ID != "" {
		return m.ID
	}
	return "cairn:" + position(table, epoch, seq, index)
}

func position(table string, epoch, seq uint64, index int) string {
	return strings.ToLower(table) + "/" + strconv.FormatUint(epoch, 10) + "/" + strconv.FormatUint(seq, 10) + "/" + strconv.Itoa(index)
}

// publish sends a partition's head and calls done with the outcome, from
// another goroutine: nil once the destination's stream stored it (or, for a
// subject no stream captures, once published).
func (r *Relay) publish(ctx context.Context, w *worker, it item, done func(error)) {
	m := nats.NewMsg(destination(r.cfg.Prefix, it.msg))
	m.Data = it.msg.Body
	m.Header.Set(nats.MsgIdHdr, MessageID(w.table, w.epoch, it.seq, it.index, it.msg))
	m.Header.Set(PositionHeader, position(w.table, w.epoch, it.seq, it.index))
	m.Header.Set(PartitionHeader, it.pk)
	// A subject no stream captures is core NATS: published, it is
	// delivered (there is no one to acknowledge it, and publishing again
	// would only repeat it to its subscribers).
	if it.msg.Subject != "" {
		captured, err := r.captured(ctx, it.msg.Subject)
		if err != nil {
			go done(err)
			return
		}
		if !captured {
			err := r.nc.PublishMsg(m)
			go done(err)
			return
		}
	}
	f, err := r.js.PublishMsgAsync(m)
	if err != nil {
		go done(err)
		return
	}
	go func() {
		select {
		case <-f.Ok():
			done(nil)
		case err := <-f.Err():
			done(err)
		case <-ctx.Done():
			done(ctx.Err())
		}
	}()
}

// captured reports whether a JetStream stream captures subject, from a
// cache of at most captureTTL old: the answer decides whether a message is
// delivered once published or once a stream acknowledges it.
func (r *Relay) captured(ctx context.Context, subject string) (bool, error) {
	r.capMu.Lock()
	c, ok := r.capCache[subject]
	r.capMu.Unlock()
	if ok && time.Since(c.at) < captureTTL {
		return c.captured, nil
	}
	_, err := r.js.StreamNameBySubject(ctx, subject)
	captured := err == nil
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, err
	}
	r.capMu.Lock()
	if len(r.capCache) > 10_000 {
		clear(r.capCache)
	}
	r.capCache[subject] = captureEntry{captured: captured, at: time.Now()}
	r.capMu.Unlock()
	return captured, nil
}

// captureTTL is how long whether a stream captures a subject is trusted.
const captureTTL = 5 * time.Second

type captureEntry struct {
	captured bool
	at       time.Time
}
