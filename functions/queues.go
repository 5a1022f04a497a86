package functions

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxMessage bounds a queue message's body (Azure's queue message limit is
// 64 KiB; JetStream's default message limit is 1 MiB).
const MaxMessage = 1 << 20

// Queues is the work-queue stream that holds every queue: one subject per
// queue, <prefix>.queue.<name>, with work-queue retention (a message is
// removed when it is acknowledged). A poison queue <name>-poison is an
// ordinary queue of the same stream.
type Queues struct {
	js     jetstream.JetStream
	prefix string
	stream jetstream.Stream
}

// StreamName is the name of the queue stream for a subject prefix.
func StreamName(prefix string) string {
	return strings.ToUpper(strings.ReplaceAll(prefix, "-", "_")) + "_QUEUES"
}

// QueueSubject is the subject clients publish a queue's messages to.
func QueueSubject(prefix, queue string) string { return prefix + ".queue." + queue }

// OpenQueues creates the queue stream if it does not exist. With replicas
// 0 it only opens an existing one (the command-line tools do so, to leave
// the stream's settings alone).
func OpenQueues(ctx context.Context, js jetstream.JetStream, prefix string, replicas int) (*Queues, error) {
	q := &Queues{js: js, prefix: prefix}
	if replicas == 0 {
		s, err := js.Stream(ctx, StreamName(prefix))
		if err != nil {
			return nil, fmt.Errorf("functions: queue stream %s: %w (has a Cairn node with prefix %q started on this NATS server?)", StreamName(prefix), err, prefix)
		}
		q.stream = s
		return q, nil
	}
	cfg := jetstream.StreamConfig{
		Name:        StreamName(prefix),
		Description: "Cairn queues: one subject per queue",
		Subjects:    []string{prefix + ".queue.>"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		// Messages sent by functions carry ids derived from their trigger:
		// a retried invocation's messages are dropped as duplicates.
		Duplicates:  10 * time.Minute,
		MaxMsgSize:  MaxMessage + 64<<10,
		AllowDirect: true,
	}
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("functions: queue stream: %w", err)
	}
	q.stream = s
	return q, nil
}

// publish sends a message to a queue; id (if not empty) de-duplicates it.
func (q *Queues) publish(ctx context.Context, queue string, body []byte, id string, hdr nats.Header) error {
	m := nats.NewMsg(QueueSubject(q.prefix, queue))
	m.Data = body
	for k, v := range hdr {
		m.Header[k] = v
	}
	var opts []jetstream.PublishOpt
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	_, err := q.js.PublishMsg(ctx, m, opts...)
	return err
}

// Enqueue sends a message to a queue (as a client publishing to
// <prefix>.queue.<name> does).
func (q *Queues) Enqueue(ctx context.Context, queue string, body []byte) error {
	if err := ValidateName("queue", queue); err != nil {
		return err
	}
	if len(body) > MaxMessage {
		return fmt.Errorf("a message is at most %d bytes, got %d", MaxMessage, len(body))
	}
	return q.publish(ctx, queue, body, "", nil)
}

// Depth returns how many messages wait on a queue (delivered but not yet
// acknowledged ones included).
func (q *Queues) Depth(ctx context.Context, queue string) (uint64, error) {
	info, err := q.stream.Info(ctx, jetstream.WithSubjectFilter(QueueSubject(q.prefix, queue)))
	if err != nil {
		return 0, err
	}
	return info.State.Subjects[QueueSubject(q.prefix, queue)], nil
}
