package functions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/outbox"
)

// MaxMessage bounds a queue message's body (Azure's queue message limit is
// 64 KiB; JetStream's default message limit is 1 MiB).
const MaxMessage = 1 << 20

// DefaultQueueMaxMessages is the most messages one queue holds when the
// node sets no cap (-queue-max-messages).
const DefaultQueueMaxMessages = 1_000_000

// Queues is the work-queue stream that holds every queue: one subject per
// queue, <prefix>.queue.<name>, with work-queue retention (a message is
// removed when it is acknowledged). A poison queue <name>-poison is an
// ordinary queue of the same stream.
//
// The stream caps every queue (poison queues included) at the same number
// of messages with JetStream's own per-subject limit, discarding new
// messages: the server refuses a publish to a full queue, whoever sends
// it, and stores nothing (a publisher that asked for an acknowledgement
// gets the error; Cairn's own publishes turn it into
// QueueBacklogExceeded).
type Queues struct {
	js     jetstream.JetStream
	prefix string
	stream jetstream.Stream
	// max is the stream's cap per queue (0: none, a stream made before
	// the cap).
	max int64
}

// StreamName is the name of the queue stream for a subject prefix.
func StreamName(prefix string) string {
	return strings.ToUpper(strings.ReplaceAll(prefix, "-", "_")) + "_QUEUES"
}

// QueueSubject is the subject clients publish a queue's messages to; the
// outbox relay publishes there too, and owns the layout.
func QueueSubject(prefix, queue string) string { return outbox.QueueSubject(prefix, queue) }

// OpenQueues creates the queue stream if it does not exist, or updates an
// existing one to the node's settings, with a cap of maxMessages per queue
// (0: DefaultQueueMaxMessages). With replicas 0 it only opens an existing
// one (the command-line tools do so, to leave the stream's settings
// alone).
//
// The server deletes a queue's oldest messages when the cap is set below
// what the queue holds, so the cap is never lowered below the deepest
// queue: Max then says what the stream got, and a later start lowers it
// once the queue has drained.
func OpenQueues(ctx context.Context, js jetstream.JetStream, prefix string, replicas int, maxMessages int64) (*Queues, error) {
	q := &Queues{js: js, prefix: prefix}
	if replicas == 0 {
		s, err := js.Stream(ctx, StreamName(prefix))
		if err != nil {
			return nil, fmt.Errorf("functions: queue stream %s: %w (has a Cairn node with prefix %q started on this NATS server?)", StreamName(prefix), err, prefix)
		}
		q.stream, q.max = s, max(s.CachedInfo().Config.MaxMsgsPerSubject, 0)
		return q, nil
	}
	if maxMessages <= 0 {
		maxMessages = DefaultQueueMaxMessages
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
		// The cap of every queue: the server refuses a message to a full
		// queue rather than drop an old one.
		MaxMsgsPerSubject:    maxMessages,
		Discard:              jetstream.DiscardNew,
		DiscardNewPerSubject: true,
	}
	old, err := js.Stream(ctx, cfg.Name)
	switch {
	case err == nil:
		if was := old.CachedInfo().Config.MaxMsgsPerSubject; was <= 0 || maxMessages < was {
			deepest, err := deepestQueue(ctx, old, prefix)
			if err != nil {
				return nil, fmt.Errorf("functions: queue stream: the queues' lengths: %w", err)
			}
			cfg.MaxMsgsPerSubject = max(maxMessages, deepest)
		}
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("functions: queue stream: %w", err)
	}
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("functions: queue stream: %w", err)
	}
	q.stream, q.max = s, cfg.MaxMsgsPerSubject
	return q, nil
}

// deepestQueue returns the most messages one queue of the stream holds.
func deepestQueue(ctx context.Context, s jetstream.Stream, prefix string) (int64, error) {
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(prefix+".queue.>"))
	if err != nil {
		return 0, err
	}
	var deepest uint64
	for _, n := range info.State.Subjects {
		deepest = max(deepest, n)
	}
	return int64(deepest), nil
}

// Max is the most messages a queue holds: the stream's cap (0: none).
func (q *Queues) Max() int64 { return q.max }

// errCodeStoreFailed is the JetStream error of a message the stream did
// not store (JSStreamStoreFailedF): its description says why.
const errCodeStoreFailed jetstream.ErrorCode = 10077

// queueFull reports whether err is the server's refusal of a message to a
// queue that holds the stream's cap.
func queueFull(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeStoreFailed &&
		strings.Contains(apiErr.Description, "maximum messages per subject")
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
	if queueFull(err) {
		return engine.Errorf(CodeQueueBacklogExceeded, "queue %q holds its maximum of %d messages (the node's -queue-max-messages): the message is refused; it takes more once its function has consumed some", queue, q.max)
	}
	return err
}

// Enqueue sends a message to a queue (as a client publishing to
// <prefix>.queue.<name> does). A bad name or body is InvalidInput; a full
// queue, QueueBacklogExceeded; anything else is the queue stream's failure.
func (q *Queues) Enqueue(ctx context.Context, queue string, body []byte) error {
	return q.EnqueueAfter(ctx, queue, body, "")
}

// EnqueueAfter is Enqueue with positions ("<table>/<seq>,…", as
// HeaderPosition) that the function's reads must reflect; "" for none.
// Malformed positions are InvalidInput.
func (q *Queues) EnqueueAfter(ctx context.Context, queue string, body []byte, positions string) error {
	if err := ValidateName("queue", queue); err != nil {
		return engine.Errorf(engine.CodeInvalidInput, "%v", err)
	}
	if len(body) > MaxMessage {
		return engine.Errorf(engine.CodeInvalidInput, "a message is at most %d bytes, got %d", MaxMessage, len(body))
	}
	var hdr nats.Header
	if positions != "" {
		hdr = nats.Header{HeaderPosition: {positions}}
		if _, err := parseFloors(hdr); err != nil {
			return engine.Errorf(engine.CodeInvalidInput, "%v", err)
		}
	}
	return q.publish(ctx, queue, body, "", hdr)
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
