package functions

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// Purge removes every message of a queue (a poison queue too), those
// being delivered included, and returns how many the server removed. A bad
// name is InvalidInput and purges nothing. Cost: one JetStream API request
// (the stream's purge with the queue's subject as filter).
func (q *Queues) Purge(ctx context.Context, queue string) (uint64, error) {
	if err := ValidateName("queue", queue); err != nil {
		return 0, engine.Errorf(engine.CodeInvalidInput, "%v", err)
	}
	n, err := q.purgeSubject(ctx, QueueSubject(q.prefix, queue))
	if err != nil {
		return 0, fmt.Errorf("purge queue %q: %w", queue, err)
	}
	return n, nil
}

// purgeSubject removes every message of the stream on subject (a
// wildcard takes all it matches) and returns how many the server removed.
// It asks the server directly because jetstream.Stream.Purge does not
// return the count.
func (q *Queues) purgeSubject(ctx context.Context, subject string) (uint64, error) {
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
