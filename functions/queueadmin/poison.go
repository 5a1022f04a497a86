package queueadmin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions"
)

// HeaderRequeued is on a message Requeue or BulkPoison put back on its
// queue: its sequence in the poison queue.
const HeaderRequeued = "Cairn-Requeued"

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
		Queue:    m.Header.Get(functions.HeaderQueue),
		Function: m.Header.Get(functions.HeaderFunction),
		Error:    m.Header.Get(functions.HeaderError),
		Body:     m.Data,
		Poisoned: m.Time,
	}
	p.Attempts, _ = strconv.Atoi(m.Header.Get(functions.HeaderAttempts))
	p.Enqueued, _ = time.Parse(time.RFC3339Nano, m.Header.Get(functions.HeaderEnqueued))
	if t, err := time.Parse(time.RFC3339Nano, m.Header.Get(functions.HeaderPoisoned)); err == nil {
		p.Poisoned = t
	}
	return p
}

// ErrNoMessage is returned for a poison message that does not exist.
var ErrNoMessage = errors.New("no such message")

// poisonQueue checks and completes a poison queue's name: "orders" and
// "orders-poison" both mean "orders-poison".
func poisonQueue(queue string) (string, error) {
	if !strings.HasSuffix(queue, functions.PoisonSuffix) {
		queue += functions.PoisonSuffix
	}
	if err := functions.ValidateName("queue", queue); err != nil {
		return "", engine.Errorf(engine.CodeInvalidInput, "%v", err)
	}
	return queue, nil
}

// Poison lists up to limit messages of a poison queue, oldest first,
// starting at sequence from.
func (a *Admin) Poison(ctx context.Context, queue string, from uint64, limit int) ([]PoisonMessage, error) {
	queue, err := poisonQueue(queue)
	if err != nil {
		return nil, err
	}
	var out []PoisonMessage
	if limit <= 0 {
		return out, nil
	}
	err = a.walk(ctx, queue, from, func(m *jetstream.RawStreamMsg) (bool, error) {
		out = append(out, poisonOf(m))
		return len(out) < limit, nil
	})
	return out, err
}

// PoisonMessage returns one message of a poison queue.
func (a *Admin) PoisonMessage(ctx context.Context, queue string, seq uint64) (PoisonMessage, error) {
	queue, err := poisonQueue(queue)
	if err != nil {
		return PoisonMessage{}, err
	}
	m, err := a.stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) || (err == nil && m.Subject != functions.QueueSubject(a.prefix, queue)) {
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
func (a *Admin) Requeue(ctx context.Context, queue string, seq uint64) error {
	p, err := a.PoisonMessage(ctx, queue, seq)
	if err != nil {
		return err
	}
	if p.Queue == "" {
		return engine.Errorf(engine.CodeInvalidInput, "message %d does not say which queue it came from", seq)
	}
	hdr := nats.Header{HeaderRequeued: []string{strconv.FormatUint(seq, 10)}}
	if err := a.q.Publish(ctx, p.Queue, p.Body, "requeue:"+functions.StreamName(a.prefix)+":"+strconv.FormatUint(seq, 10), hdr); err != nil {
		return err
	}
	return a.deleteMsg(ctx, seq)
}

// Delete removes a poison message.
func (a *Admin) Delete(ctx context.Context, queue string, seq uint64) error {
	if _, err := a.PoisonMessage(ctx, queue, seq); err != nil {
		return err
	}
	return a.deleteMsg(ctx, seq)
}

func (a *Admin) deleteMsg(ctx context.Context, seq uint64) error {
	err := a.stream.DeleteMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) || errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
		return nil // deleted already
	}
	return err
}
