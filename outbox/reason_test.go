package outbox

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestClassify(t *testing.T) {
	full := &jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "maximum messages exceeded"}
	for _, c := range []struct {
		err    error
		queue  bool
		reason Reason
		remedy string
	}{
		{fmt.Errorf("%w orders.x (%w)", errNoStream, jetstream.ErrNoStreamResponse), false, ReasonNoStream, "-outbox-core"},
		{fmt.Errorf("%w orders.x (%w)", errNoStream, jetstream.ErrAsyncPublishTimeout), false, ReasonNoStream, "create a stream"},
		{fmt.Errorf("%w cairn.queue.x", errNoStream), true, ReasonNoStream, "queues' stream"},
		{fmt.Errorf("%w: stream S: %w", errNoAnswer, jetstream.ErrAsyncPublishTimeout), false, ReasonNoAck, "leader election"},
		{jetstream.ErrNoStreamResponse, false, ReasonNoAck, "tried again"},
		{jetstream.ErrAsyncPublishTimeout, true, ReasonNoAck, "nats stream info"},
		{full, false, ReasonRefused, "maximum messages exceeded"},
		{fmt.Errorf("x: %w", full), true, ReasonRefused, "make room"},
		{nats.ErrConnectionClosed, false, ReasonError, "connection"},
		{errors.New("anything"), false, ReasonError, "host outbox skip"},
	} {
		reason, remedy := classify(c.err, c.queue)
		if reason != c.reason || !strings.Contains(remedy, c.remedy) || !strings.Contains(remedy, "host outbox skip") {
			t.Errorf("%v (queue %v): %s %q", c.err, c.queue, reason, remedy)
		}
		if c.queue && strings.Contains(remedy, "-outbox-core") {
			t.Errorf("%v: a queue's remedy offers -outbox-core", c.err)
		}
	}
}
