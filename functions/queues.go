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

// MaxMessage bounds a queue message's body (Azure's queue message limit is
// 64 KiB; JetStream's default message limit is 1 MiB).
const MaxMessage = 1 << 20

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
	seq := max(from, 1)
	for len(out) < limit {
		m, err := q.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(QueueSubject(q.prefix, queue)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return out, err
		}
		out = append(out, poisonOf(m))
		seq = m.Sequence + 1
	}
	return out, nil
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
