package functions

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// QueueInfo is a queue as GET /$cairn/queues lists it.
type QueueInfo struct {
	Name   string `json:"name"`
	Depth  uint64 `json:"depth"`  // messages waiting, in flight included
	Poison bool   `json:"poison"` // a poison queue (<queue>-poison)
	// Function is the deployed function the queue triggers ("" for none).
	Function string `json:"function,omitempty"`
	// Oldest is when the oldest message waiting was stored, and
	// OldestAgeSeconds its age then (QueueDepth's).
	Oldest           time.Time `json:"oldest,omitzero"`
	OldestAgeSeconds float64   `json:"oldestAgeSeconds"`
}

// QueueMessage is a message waiting on a queue, as a peek shows it.
type QueueMessage struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"` // when it was stored
	Body []byte    `json:"body"`
}

// Peek returns up to limit messages waiting on a queue, oldest first, from
// stream sequence from, without taking them: a delivered message not yet
// acknowledged is shown too. Cost: one direct get per message.
func (q *Queues) Peek(ctx context.Context, queue string, from uint64, limit int) ([]QueueMessage, error) {
	if err := ValidateName("queue", queue); err != nil {
		return nil, err
	}
	out := []QueueMessage{}
	if limit <= 0 {
		return out, nil
	}
	err := q.walk(ctx, queue, from, func(m *jetstream.RawStreamMsg) (bool, error) {
		out = append(out, QueueMessage{Seq: m.Sequence, Time: m.Time, Body: m.Data})
		return len(out) < limit, nil
	})
	return out, err
}

// listQueues is GET /$cairn/queues: the queues holding messages, deepest
// first, with their oldest message's age (Queues.Depths), then the queues
// of the functions that hold none, by name.
func (rn *Runner) listQueues(ctx context.Context) ([]QueueInfo, error) {
	ds, err := rn.queues.Depths(ctx)
	if err != nil {
		return nil, err
	}
	ms, err := rn.registry.List(ctx)
	if err != nil {
		return nil, err
	}
	qs := make([]QueueInfo, len(ds))
	at := make(map[string]int, len(ds))
	for i, d := range ds {
		qs[i] = QueueInfo{Name: d.Queue, Depth: d.Messages, Poison: strings.HasSuffix(d.Queue, PoisonSuffix), Oldest: d.Oldest, OldestAgeSeconds: d.OldestAgeSeconds}
		at[d.Queue] = i
	}
	var idle []QueueInfo
	for _, m := range append(ms, rn.unregistered(ms)...) {
		if m.Trigger.Queue == "" {
			continue
		}
		if i, ok := at[m.Trigger.Queue]; ok {
			qs[i].Function = m.Name
			continue
		}
		idle = append(idle, QueueInfo{Name: m.Trigger.Queue, Function: m.Name})
	}
	slices.SortFunc(idle, func(a, b QueueInfo) int { return strings.Compare(a.Name, b.Name) })
	return append(qs, idle...), nil
}
