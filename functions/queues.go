package functions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/outbox"
)

// MaxMessage bounds a queue message's body (Azure's queue message limit is
// 64 KiB; JetStream's default message limit is 1 MiB).
const MaxMessage = 1 << 20

// maxStoredMessage bounds a message as the queue stream stores it: the
// largest body and room for its headers (a poison message's carry its
// error, cut to 2 KiB, and its times; the relay's its position and id).
const maxStoredMessage = MaxMessage + 64<<10

// DefaultQueueMaxMessages is the most messages one queue holds when the
// node sets no cap (-queue-max-messages).
const DefaultQueueMaxMessages = 1_000_000

// DefaultQueueMaxBytes is the most bytes the queue stream holds, every
// queue together, when the node sets no bound (-queue-max-bytes): 1 GiB.
// The cap per queue does not bound the stream, since nothing bounds the
// number of queues a client may publish to, and the stream shares the
// node's disk with the journal. 1 GiB is a million messages of 1 KiB, or
// a thousand of the largest, waiting at once: a backlog no function on a
// single machine is meant to hold, and a small part of its disk.
const DefaultQueueMaxBytes = 1 << 30

// MinQueueMaxBytes is the least -queue-max-bytes a node takes: one
// message of the largest size, which a smaller bound would refuse even in
// an empty stream.
const MinQueueMaxBytes = maxStoredMessage

// QueueConfig configures OpenQueues.
type QueueConfig struct {
	// Replicas of the stream; 0 only opens an existing one and leaves its
	// settings alone (the command-line tools do so).
	Replicas int
	// MaxMessages caps every queue (0: DefaultQueueMaxMessages).
	MaxMessages int64
	// MaxBytes bounds the stream, every queue together (0:
	// DefaultQueueMaxBytes).
	MaxBytes int64
	// Log receives what opening the stream changed, and the refusals of a
	// full stream (slog.Default() when nil).
	Log *slog.Logger
}

// Queues is the work-queue stream that holds every queue: one subject per
// queue, <prefix>.queue.<name>, with work-queue retention (a message is
// removed when it is acknowledged). A poison queue <name>-poison is an
// ordinary queue of the same stream. The stream captures one token after
// <prefix>.queue. (a queue name has no dot): a message to a longer
// subject is stored nowhere.
//
// The stream caps every queue (poison queues included) at the same number
// of messages with JetStream's own per-subject limit, and all of them
// together at a number of bytes, discarding new messages: the server
// refuses a publish to a full queue, or to any queue of a full stream,
// whoever sends it, and stores nothing (a publisher that asked for an
// acknowledgement gets the error; Cairn's own publishes turn it into
// QueueBacklogExceeded).
type Queues struct {
	js     jetstream.JetStream
	prefix string
	stream jetstream.Stream
	// max is the stream's cap per queue (0: none, a stream made before
	// the cap); maxBytes its bound of all queues (0: none, a stream made
	// before the bound).
	max, maxBytes int64
	log           *slog.Logger
	// fullLogged is when a full stream was last logged (UnixNano).
	fullLogged atomic.Int64
}

// StreamName is the name of the queue stream for a subject prefix.
func StreamName(prefix string) string { return bucketName(prefix, "QUEUES") }

// bucketName is the name of the functions' stream or bucket of a subject
// prefix: the prefix in capitals, "-" as "_", then "_" and what it is.
func bucketName(prefix, what string) string {
	return strings.ToUpper(strings.ReplaceAll(prefix, "-", "_")) + "_" + what
}

// QueueSubject is the subject clients publish a queue's messages to; the
// outbox relay publishes there too, and owns the layout.
func QueueSubject(prefix, queue string) string { return outbox.QueueSubject(prefix, queue) }

// queuesSubject is the stream's subject: every queue's, one token each.
func queuesSubject(prefix string) string { return QueueSubject(prefix, "*") }

// straySubjects are the subjects under <prefix>.queue. of more than one
// token, which name no queue: a stream made before it captured only
// queues took them.
func straySubjects(prefix string) string { return QueueSubject(prefix, "*.>") }

// OpenQueues creates the queue stream if it does not exist, or updates an
// existing one to the node's settings: a cap of cfg.MaxMessages per
// queue, a bound of cfg.MaxBytes on the stream, and the subjects of
// queues only. With cfg.Replicas 0 it only opens an existing one.
//
// The server deletes a queue's oldest messages when the cap is set below
// what the queue holds, so the cap is never lowered below the deepest
// queue: Max then says what the stream got, and a later start lowers it
// once the queue has drained. A bound of bytes below what the stream
// holds deletes nothing (new messages are refused until it drains). A
// stream made when it captured <prefix>.queue.> keeps the messages on
// longer subjects, which no queue's consumer reads: they are purged,
// and the log says how many.
func OpenQueues(ctx context.Context, js jetstream.JetStream, prefix string, qc QueueConfig) (*Queues, error) {
	q := &Queues{js: js, prefix: prefix, log: qc.Log}
	if q.log == nil {
		q.log = slog.Default()
	}
	if qc.Replicas == 0 {
		s, err := js.Stream(ctx, StreamName(prefix))
		if err != nil {
			return nil, fmt.Errorf("functions: queue stream %s: %w (has a Cairn node with prefix %q started on this NATS server?)", StreamName(prefix), err, prefix)
		}
		q.stream, q.max, q.maxBytes = s, max(s.CachedInfo().Config.MaxMsgsPerSubject, 0), max(s.CachedInfo().Config.MaxBytes, 0)
		return q, nil
	}
	maxMessages, maxBytes := qc.MaxMessages, qc.MaxBytes
	if maxMessages <= 0 {
		maxMessages = DefaultQueueMaxMessages
	}
	if maxBytes <= 0 {
		maxBytes = DefaultQueueMaxBytes
	}
	cfg := jetstream.StreamConfig{
		Name:        StreamName(prefix),
		Description: "Cairn queues: one subject per queue",
		Subjects:    []string{queuesSubject(prefix)},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    qc.Replicas,
		// Messages sent by functions carry ids derived from their trigger:
		// a retried invocation's messages are dropped as duplicates.
		Duplicates:  10 * time.Minute,
		MaxMsgSize:  maxStoredMessage,
		AllowDirect: true,
		// The cap of every queue and the bound of them all: the server
		// refuses a message to a full queue, or to a full stream, rather
		// than drop an old one.
		MaxMsgsPerSubject:    maxMessages,
		MaxBytes:             maxBytes,
		Discard:              jetstream.DiscardNew,
		DiscardNewPerSubject: true,
	}
	old, err := js.Stream(ctx, cfg.Name)
	strays := false
	switch {
	case err == nil:
		was := old.CachedInfo().Config
		if was.MaxMsgsPerSubject <= 0 || maxMessages < was.MaxMsgsPerSubject {
			deepest, err := deepestQueue(ctx, old, prefix)
			if err != nil {
				return nil, fmt.Errorf("functions: queue stream: the queues' lengths: %w", err)
			}
			cfg.MaxMsgsPerSubject = max(maxMessages, deepest)
		}
		strays = !slices.Equal(was.Subjects, cfg.Subjects)
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("functions: queue stream: %w", err)
	}
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		if storageRefused(err) {
			return nil, fmt.Errorf("functions: queue stream: %w (the server reserves -queue-max-bytes, %d bytes, for it: lower it or give JetStream more storage)", err, maxBytes)
		}
		return nil, fmt.Errorf("functions: queue stream: %w", err)
	}
	q.stream, q.max, q.maxBytes = s, cfg.MaxMsgsPerSubject, cfg.MaxBytes
	if strays {
		// The stream takes no new ones now: what it holds is all.
		n, err := q.PurgeSubject(ctx, straySubjects(prefix))
		if err != nil {
			return nil, fmt.Errorf("functions: queue stream: purge the subjects that name no queue: %w", err)
		}
		if n > 0 {
			q.log.Warn("functions: the queue stream captured subjects that name no queue; their messages, which no function reads, are purged",
				"stream", cfg.Name, "subjects", straySubjects(prefix), "purged", n)
		}
	}
	return q, nil
}

// The JetStream errors of a stream whose MaxBytes the server's or the
// account's storage cannot reserve.
const (
	errCodeStorageExceeded     jetstream.ErrorCode = 10047 // JSStorageResourcesExceededErr
	errCodeStreamBytesExceeded jetstream.ErrorCode = 10122 // JSStreamMaxStreamBytesExceeded
)

// storageRefused reports whether err is the server's refusal to reserve
// the stream's MaxBytes.
func storageRefused(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == errCodeStorageExceeded || apiErr.ErrorCode == errCodeStreamBytesExceeded)
}

// deepestQueue returns the most messages one queue of the stream holds.
func deepestQueue(ctx context.Context, s jetstream.Stream, prefix string) (int64, error) {
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(queuesSubject(prefix)))
	if err != nil {
		return 0, err
	}
	var deepest uint64
	for _, n := range info.State.Subjects {
		deepest = max(deepest, n)
	}
	return int64(deepest), nil
}

// Stream returns the stream's handle, for the operators' verbs
// (functions/queueadmin: reading messages, deleting them, the stream's
// information). A message sent to a queue goes through Publish, which
// turns the caps' refusals into QueueBacklogExceeded.
func (q *Queues) Stream() jetstream.Stream { return q.stream }

// Prefix returns the subject prefix the stream's queues live under
// (QueueSubject, StreamName).
func (q *Queues) Prefix() string { return q.prefix }

// Max is the most messages a queue holds: the stream's cap (0: none).
func (q *Queues) Max() int64 { return q.max }

// MaxBytes is the most bytes the queues hold together: the stream's bound
// (0: none).
func (q *Queues) MaxBytes() int64 { return q.maxBytes }

// errCodeStoreFailed is the JetStream error of a message the stream did
// not store (JSStreamStoreFailedF): its description says why.
const errCodeStoreFailed jetstream.ErrorCode = 10077

// storeRefused reports whether err is the server's refusal to store a
// message for the reason its description holds.
func storeRefused(err error, reason string) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeStoreFailed && strings.Contains(apiErr.Description, reason)
}

// queueFull reports whether err is the server's refusal of a message to a
// queue that holds the stream's cap.
func queueFull(err error) bool { return storeRefused(err, "maximum messages per subject") }

// streamFull reports whether err is the server's refusal of a message to
// a stream that holds its bound of bytes.
func streamFull(err error) bool { return storeRefused(err, "maximum bytes") }

// fullLogEvery is the least time between two log lines saying that the
// queue stream is full.
const fullLogEvery = 10 * time.Second

// Publish sends a message to a queue as the runner does: id (if not
// empty) de-duplicates it within the stream's window of 10 minutes, hdr
// is added to its headers. A full queue or stream is QueueBacklogExceeded
// (a full stream is also logged, at most every fullLogEvery); anything
// else is the stream's failure. It checks neither the name nor the body:
// Enqueue does, for messages from outside.
func (q *Queues) Publish(ctx context.Context, queue string, body []byte, id string, hdr nats.Header) error {
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
	switch {
	case queueFull(err):
		return engine.Errorf(CodeQueueBacklogExceeded, "queue %q holds its maximum of %d messages (the node's -queue-max-messages): the message is refused; it takes more once its function has consumed some", queue, q.max)
	case streamFull(err):
		now := time.Now().UnixNano()
		if last := q.fullLogged.Load(); now-last >= int64(fullLogEvery) && q.fullLogged.CompareAndSwap(last, now) {
			q.log.Warn("functions: the queue stream is full; every queue refuses new messages until functions consume some (or raise -queue-max-bytes)",
				"stream", StreamName(q.prefix), "maxBytes", q.maxBytes, "queue", queue)
		}
		return engine.Errorf(CodeQueueBacklogExceeded, "the queues hold the queue stream's maximum of %d bytes in all (the node's -queue-max-bytes): the message to queue %q is refused; they take more once functions have consumed some", q.maxBytes, queue)
	}
	return err
}

// Enqueue sends a message to a queue (as a client publishing to
// <prefix>.queue.<name> does). A bad name or body is InvalidInput; a full
// queue or stream, QueueBacklogExceeded; anything else is the queue
// stream's failure.
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
	return q.Publish(ctx, queue, body, "", hdr)
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

// PurgeSubject removes every message of the stream on subject (a
// wildcard takes all it matches), those being delivered included, and
// returns how many the server removed. It asks the server directly
// because jetstream.Stream.Purge does not return the count. It checks
// nothing: opening the stream purges the subjects that name no queue
// with it, and functions/queueadmin a queue it has checked.
func (q *Queues) PurgeSubject(ctx context.Context, subject string) (uint64, error) {
	req, err := json.Marshal(jetstream.StreamPurgeRequest{Subject: subject})
	if err != nil {
		return 0, err
	}
	msg, err := q.js.Conn().RequestWithContext(ctx, q.apiPrefix()+"STREAM.PURGE."+StreamName(q.prefix), req)
	if err != nil {
		return 0, err
	}
	var resp struct {
		Error *jetstream.APIError `json:"error,omitempty"`
		// Success and Purged are the server's answer.
		Success bool   `json:"success"`
		Purged  uint64 `json:"purged"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, fmt.Errorf("the server's answer: %w", err)
	}
	if resp.Error != nil {
		return 0, resp.Error
	}
	if !resp.Success {
		return 0, fmt.Errorf("the server did not purge")
	}
	return resp.Purged, nil
}

// apiPrefix is the JetStream API prefix of the runner's JetStream context
// (jetstream.New's default).
func (q *Queues) apiPrefix() string { return jetstream.DefaultAPIPrefix }
