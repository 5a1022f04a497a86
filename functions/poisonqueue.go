package functions

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PoisonSuffix ends the name of a queue's poison queue.
const PoisonSuffix = "-poison"

// Headers of a poison message. Its body is the original message's.
const (
	HeaderError    = "Cairn-Error"      // the last attempt's error
	HeaderAttempts = "Cairn-Attempts"   // deliveries, the last one included
	HeaderQueue    = "Cairn-Queue"      // the queue it came from
	HeaderFunction = "Cairn-Function"   // the function that failed on it
	HeaderEnqueued = "Cairn-Enqueued"   // RFC 3339, when it was first enqueued
	HeaderPoisoned = "Cairn-Poisoned"   // RFC 3339, when it was moved
	HeaderSource   = "Cairn-Source"     // stream sequence it had on its queue
	HeaderRequeued = "Cairn-Requeued"   // on a requeued message: its poison sequence
	HeaderTrigger  = "Cairn-Trigger-Id" // on a timer tick: the tick's id
)

// PoisonMessage is a message in a poison queue.
type PoisonMessage struct {
	// Seq identifies it (its sequence in the queue stream).
	Seq      uint64    `json:"seq"`
	Queue    string    `json:"queue"` // the queue it came from
	Function string    `json:"function"`
	Error    string    `json:"error"`
	Attempts int       `json:"attempts"`
	Enqueued time.Time `json:"enqueued"`
	Poisoned time.Time `json:"poisoned"`
	Body     []byte    `json:"body"`
}

func poisonOf(m *jetstream.RawStreamMsg) PoisonMessage {
	p := PoisonMessage{
		Seq:      m.Sequence,
		Queue:    m.Header.Get(HeaderQueue),
		Function: m.Header.Get(HeaderFunction),
		Error:    m.Header.Get(HeaderError),
		Body:     m.Data,
		Poisoned: m.Time,
	}
	p.Attempts, _ = strconv.Atoi(m.Header.Get(HeaderAttempts))
	p.Enqueued, _ = time.Parse(time.RFC3339Nano, m.Header.Get(HeaderEnqueued))
	if t, err := time.Parse(time.RFC3339Nano, m.Header.Get(HeaderPoisoned)); err == nil {
		p.Poisoned = t
	}
	return p
}

// ErrNoMessage is returned for a poison message that does not exist.
var ErrNoMessage = errors.New("no such message")

// poisonQueue checks and completes a poison queue's name: "orders" and
// "orders-poison" both mean "orders-poison".
func poisonQueue(queue string) (string, error) {
	if !strings.HasSuffix(queue, PoisonSuffix) {
		queue += PoisonSuffix
	}
	return queue, ValidateName("queue", queue)
}

// Poison lists up to limit messages of a poison queue, oldest first,
// starting at sequence from.
func (q *Queues) Poison(ctx context.Context, queue string, from uint64, limit int) ([]PoisonMessage, error) {
	queue, err := poisonQueue(queue)
	if err != nil {
		return nil, err
	}
	var out []PoisonMessage
	if limit <= 0 {
		return out, nil
	}
	err = q.walk(ctx, queue, from, func(m *jetstream.RawStreamMsg) (bool, error) {
		out = append(out, poisonOf(m))
		return len(out) < limit, nil
	})
	return out, err
}

// PoisonMessage returns one message of a poison queue.
func (q *Queues) PoisonMessage(ctx context.Context, queue string, seq uint64) (PoisonMessage, error) {
	queue, err := poisonQueue(queue)
	if err != nil {
		return PoisonMessage{}, err
	}
	m, err := q.stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) || (err == nil && m.Subject != QueueSubject(q.prefix, queue)) {
		return PoisonMessage{}, fmt.Errorf("%s: message %d: %w", queue, seq, ErrNoMessage)
	}
	if err != nil {
		return PoisonMessage{}, err
	}
	return poisonOf(m), nil
}

// Requeue puts a poison message back on the queue it came from, as a new
// message (its dequeue count starts again), then removes it from the
// poison queue. A requeue repeated after a crash does not send it twice.
func (q *Queues) Requeue(ctx context.Context, queue string, seq uint64) error {
	p, err := q.PoisonMessage(ctx, queue, seq)
	if err != nil {
		return err
	}
	if p.Queue == "" {
		return fmt.Errorf("message %d does not say which queue it came from", seq)
	}
	hdr := nats.Header{HeaderRequeued: []string{strconv.FormatUint(seq, 10)}}
	if err := q.publish(ctx, p.Queue, p.Body, "requeue:"+StreamName(q.prefix)+":"+strconv.FormatUint(seq, 10), hdr); err != nil {
		return err
	}
	return q.deleteMsg(ctx, seq)
}

// Delete removes a poison message.
func (q *Queues) Delete(ctx context.Context, queue string, seq uint64) error {
	if _, err := q.PoisonMessage(ctx, queue, seq); err != nil {
		return err
	}
	return q.deleteMsg(ctx, seq)
}

func (q *Queues) deleteMsg(ctx context.Context, seq uint64) error {
	err := q.stream.DeleteMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) || errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
		return nil // deleted already
	}
	return err
}
