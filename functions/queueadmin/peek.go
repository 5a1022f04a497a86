package queueadmin

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions"
)

// QueueMessage is a message waiting on a queue, as a peek shows it.
type QueueMessage struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"` // when it was stored
	Body []byte    `json:"body"`
}

// Peek returns up to limit messages waiting on a queue, oldest first, from
// stream sequence from, without taking them: a delivered message not yet
// acknowledged is shown too. Cost: one direct get per message.
func (a *Admin) Peek(ctx context.Context, queue string, from uint64, limit int) ([]QueueMessage, error) {
	if err := functions.ValidateName("queue", queue); err != nil {
		return nil, engine.Errorf(engine.CodeInvalidInput, "%v", err)
	}
	out := []QueueMessage{}
	if limit <= 0 {
		return out, nil
	}
	err := a.walk(ctx, queue, from, func(m *jetstream.RawStreamMsg) (bool, error) {
		out = append(out, QueueMessage{Seq: m.Sequence, Time: m.Time, Body: m.Data})
		return len(out) < limit, nil
	})
	return out, err
}
