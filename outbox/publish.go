package outbox

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

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
// in it. ok is false when v is not of that form.
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
// subject no stream captures, once published).
func (r *Relay) publish(ctx context.Context, w *worker, it item, done func(error)) {
	m := nats.NewMsg(destination(r.cfg.Prefix, it.msg))
	m.Data = it.msg.Body
	m.Header.Set(nats.MsgIdHdr, MessageID(r.cfg.IDKey, w.table, w.epoch, it.seq, it.index, it.msg))
	m.Header.Set(PositionHeader, position(w.table, w.epoch, it.seq, it.index))
	m.Header.Set(PartitionHeader, it.pk)
	if it.msg.ID != "" {
		m.Header.Set(IDHeader, it.msg.ID)
	}
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

// captured reports whether a JetStream stream captures subject, from the
// subjects of all streams, read again when the list is older than
// captureTTL (one request for up to 256 streams, whatever the number of
// destination subjects). A stream created for a destination is seen within
// captureTTL: until then its subject's messages go to core NATS.
func (r *Relay) captured(ctx context.Context, subject string) (bool, error) {
	r.capMu.Lock()
	defer r.capMu.Unlock()
	if time.Since(r.capAt) >= captureTTL {
		var subjects []string
		list := r.js.ListStreams(ctx)
		for info := range list.Info() {
			subjects = append(subjects, info.Config.Subjects...)
		}
		if err := list.Err(); err != nil {
			return false, fmt.Errorf("outbox: list the streams: %w", err)
		}
		r.capSubjects, r.capAt = subjects, time.Now()
	}
	for _, pattern := range r.capSubjects {
		if engine.SubjectMatch(pattern, subject) {
			return true, nil
		}
	}
	return false, nil
}

// captureTTL is how long the streams' subjects are trusted.
const captureTTL = 2 * time.Second
