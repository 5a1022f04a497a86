package outbox

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Reason says why a partition's head was not delivered, in the words an
// operator acts on (Blocked.Reason).
type Reason string

const (
	// ReasonNoStream: no stream captures the subject.
	ReasonNoStream Reason = "no-stream"
	// ReasonNoAck: no stream acknowledged the message in time, or none
	// answered, though one captures the subject: it is electing a
	// leader, lost its quorum or is overloaded.
	ReasonNoAck Reason = "no-ack"
	// ReasonRefused: a stream answered and did not store the message (a
	// full stream, a message larger than it takes, a permission refused).
	ReasonRefused Reason = "refused"
	// ReasonError: the publish itself failed (the connection is down).
	ReasonError Reason = "error"
)

// classify returns the reason of a failed publish (as Relay.explain
// wrapped it) and what the operator can do about it. A message to a Cairn
// queue cannot go to core NATS, so its remedy does not offer -outbox-core.
func classify(err error, queue bool) (Reason, string) {
	skip := "or skip the message (host outbox skip <table> <record> <index>: it is then never sent)"
	var api *jetstream.APIError
	switch {
	case errors.Is(err, errNoStream):
		if queue {
			return ReasonNoStream, "the queues' stream is not there: a node that runs functions makes it again, " + skip
		}
		return ReasonNoStream, "create a stream that captures the subject, " +
			"list it in -outbox-core to publish it on core NATS (at most once, to whoever listens), " + skip
	case errors.Is(err, errNoAnswer), errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, jetstream.ErrAsyncPublishTimeout), errors.Is(err, nats.ErrTimeout):
		return ReasonNoAck, "the stream did not acknowledge it (a leader election, a lost quorum, an overloaded server): " +
			"it is tried again until it does; if it lasts, check the stream (nats stream info), " + skip
	case errors.As(err, &api):
		return ReasonRefused, fmt.Sprintf("the stream refused it (%s): make room (raise its limits, purge it, add consumers that remove what they read), ", api.Description) + skip
	default:
		return ReasonError, "the node could not publish it (its connection to NATS?): it is tried again, " + skip
	}
}
