package functions

import (
	"context"
	"errors"
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
}

// QueueMessage is a message waiting on a queue, as a peek shows it.
type QueueMessage struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"` // when it was stored
	Body []byte    `json:"body"`
}

// List returns every queue that holds messages, with its depth, by name.
// Cost: one stream info request (paged by the server for many queues).
func (q *Queues) List(ctx context.Context) ([]QueueInfo, error) {
	prefix := q.prefix + ".queue."
	info, err := q.stream.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return nil, err
	}
	out := make([]QueueInfo, 0, len(info.State.Subjects))
	for subj, n := range info.State.Subjects {
		name := strings.TrimPrefix(subj, prefix)
		out = append(out, QueueInfo{Name: name, Depth: n, Poison: strings.HasSuffix(name, PoisonSuffix)})
	}
	slices.SortFunc(out, func(a, b QueueInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Peek returns up to limit messages waiting on a queue, oldest first, from
// stream sequence from, without taking them: a delivered message not yet
// acknowledged is shown too. Cost: one direct get per message.
func (q *Queues) Peek(ctx context.Context, queue string, from uint64, limit int) ([]QueueMessage, error) {
	if err := ValidateName("queue", queue); err != nil {
		return nil, err
	}
	out := []QueueMessage{}
	seq := max(from, 1)
	for len(out) < limit {
		m, err := q.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(QueueSubject(q.prefix, queue)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return out, err
		}
		out = append(out, QueueMessage{Seq: m.Sequence, Time: m.Time, Body: m.Data})
		seq = m.Sequence + 1
	}
	return out, nil
}

// listQueues is GET /$cairn/queues: the queues holding messages and the
// queues of the functions (empty ones too), with their depths.
func (rn *Runner) listQueues(ctx context.Context) ([]QueueInfo, error) {
	qs, err := rn.queues.List(ctx)
	if err != nil {
		return nil, err
	}
	ms, err := rn.registry.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range append(ms, rn.unregistered(ms)...) {
		if m.Trigger.Queue == "" {
			continue
		}
		i, found := slices.BinarySearchFunc(qs, m.Trigger.Queue, func(a QueueInfo, name string) int { return strings.Compare(a.Name, name) })
		if !found {
			qs = slices.Insert(qs, i, QueueInfo{Name: m.Trigger.Queue})
		}
		qs[i].Function = m.Name
	}
	return qs, nil
}
