package outbox

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
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
	// "<table>/<epoch>/<seq>/<index>": the table's full name in lower
	// case, its incarnation, the journal record's sequence, and the
	// message's place among all the messages of that record, from 0,
	// across every command the record holds (a group commit puts several
	// commands of one partition in one record; their messages are
	// numbered in the order of the commands, then of each command's
	// messages). Unique and increasing per partition, for consumers that
	// de-duplicate beyond JetStream's window; <seq> and <index> are what
	// Skip takes.
	PositionHeader = "Cairn-Outbox-Position"
	// PartitionHeader carries the PartitionKey of the write.
	PartitionHeader = "Cairn-Partition"
	// IDHeader carries the id the command gave the message, if any.
	IDHeader = "Cairn-Message-Id"
)

// QueueSubject is the subject of a Cairn queue (the functions' work-queue
// stream captures <prefix>.queue.*: one token, the queue's name).
func QueueSubject(prefix, queue string) string { return prefix + ".queue." + queue }

// destination is the subject a message goes to: its NATS subject, or its
// Cairn queue's.
func destination(prefix string, m engine.Message) string {
	if m.Subject != "" {
		return m.Subject
	}
	return QueueSubject(prefix, m.Queue)
}

// MessageID is the Nats-Msg-Id of a message: derived from the command's
// own id for it when it gave one (the same id in two commands of the table
// is one message), otherwise from its position. With a key (every node of
// a system shares it: the node user's password) the id is an HMAC of
// those, so a client publishing to the same queue or stream cannot forge
// an id that suppresses the relay's message as a duplicate; without one it
// is "cairn:" and the position, or the command's id.
func MessageID(key []byte, table string, epoch, seq uint64, index int, m engine.Message) string {
	src := "pos:" + position(table, epoch, seq, index)
	if m.ID != "" {
		src = "id:" + strings.ToLower(table) + ":" + m.ID
	}
	if key == nil {
		if m.ID != "" {
			return m.ID
		}
		return "cairn:" + position(table, epoch, seq, index)
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte(src))
	return "cairn:" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:18])
}

func position(table string, epoch, seq uint64, index int) string {
	return strings.ToLower(table) + "/" + strconv.FormatUint(epoch, 10) + "/" + strconv.FormatUint(seq, 10) + "/" + strconv.Itoa(index)
}

// ParsePosition reads a PositionHeader value: the table's full name
// (lower-cased), its epoch, the record's sequence and the message's index
// among all the record's messages. ok is false when v is not of that form.
func ParsePosition(v string) (table string, epoch, seq uint64, index int, ok bool) {
	parts := strings.Split(v, "/")
	if len(parts) != 4 || parts[0] == "" {
		return "", 0, 0, 0, false
	}
	var err1, err2, err3 error
	epoch, err1 = strconv.ParseUint(parts[1], 10, 64)
	seq, err2 = strconv.ParseUint(parts[2], 10, 64)
	index, err3 = strconv.Atoi(parts[3])
	if err1 != nil || err2 != nil || err3 != nil || index < 0 {
		return "", 0, 0, 0, false
	}
	return parts[0], epoch, seq, index, true
}

// publish sends a partition's head and calls done with the outcome, from
// another goroutine: nil once the destination's stream stored it (or, for a
// subject of Config.Core, once published on core NATS).
//
// Every message but those of Config.Core is stream-backed: published
// through JetStream and delivered only when a stream acknowledges it. No
// stream, no leader, a full stream, a refusal: each is a failure, retried
// by the worker with back-off, its partition blocked meanwhile. The
// Nats-Msg-Id makes the retries harmless: a stream that stored an earlier
// attempt whose acknowledgement was lost answers the next one as a
// duplicate, within its duplicate window, and stores nothing.
func (r *Relay) publish(ctx context.Context, w *worker, it item, done func(error)) {
	m := nats.NewMsg(destination(r.cfg.Prefix, it.msg))
	m.Data = it.msg.Body
	m.Header.Set(nats.MsgIdHdr, MessageID(r.cfg.IDKey, w.table, w.epoch, it.seq, it.index, it.msg))
	m.Header.Set(PositionHeader, position(w.table, w.epoch, it.seq, it.index))
	m.Header.Set(PartitionHeader, it.pk)
	if it.msg.ID != "" {
		m.Header.Set(IDHeader, it.msg.ID)
	}
	// A core subject is at most once: published, it is delivered (there
	// is no one to acknowledge it, and publishing again would only repeat
	// it to its subscribers).
	if it.msg.Subject != "" && r.core(it.msg.Subject) {
		err := r.nc.PublishMsg(m)
		go done(err)
		return
	}
	f, err := r.js.PublishMsgAsync(m)
	if err != nil {
		go done(err)
		return
	}
	go func() {
		select {
		case ack := <-f.Ok():
			if ack != nil && ack.Duplicate {
				r.stats.duplicates.Add(1)
			}
			done(nil)
		case err := <-f.Err():
			done(r.explain(ctx, m.Subject, err))
		case <-ctx.Done():
			done(ctx.Err())
		}
	}()
}

// explain says which stream did not answer a publish to subject that no
// stream answered (no responders, or no acknowledgement in time: a core
// subscriber of the subject takes the publish and answers nothing), or
// that none captures it: the server cannot tell these apart, the operator
// must. It asks the server once per failed attempt, never on the way of a
// delivery.
func (r *Relay) explain(ctx context.Context, subject string, err error) error {
	if !errors.Is(err, jetstream.ErrNoStreamResponse) && !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, explainWait)
	defer cancel()
	stream, lerr := r.js.StreamNameBySubject(lctx, subject)
	switch {
	case errors.Is(lerr, jetstream.ErrStreamNotFound):
		return fmt.Errorf("%w %s (%v)", errNoStream, subject, err)
	case lerr == nil:
		return fmt.Errorf("%w: stream %s captures %s and did not answer: %w", errNoAnswer, stream, subject, err)
	}
	return err
}

// explainWait bounds the question explain asks.
const explainWait = 2 * time.Second

// Why a stream-backed publish failed, as explain found out.
var (
	errNoStream = errors.New("no stream captures")
	errNoAnswer = errors.New("no acknowledgement")
)

// core reports whether subject is one the operator opted into core NATS
// (Config.Core).
func (r *Relay) core(subject string) bool { return engine.SubjectMatchAny(r.cfg.Core, subject) }

// publishAckWait bounds the wait for a stream's acknowledgement: without
// it a publish whose request or answer was lost (a leader election, a
// reconnect) would hold its partition for ever. A publish past it is
// retried with the same id, which the stream de-duplicates if the first
// was stored after all. It is far above a healthy acknowledgement (under
// 10 ms, docs/PERFORMANCE.md) and above the 4–6 s an election takes.
// Config.AckWait changes it.
const publishAckWait = 10 * time.Second
