package queueadmin

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions"
)

// Purge removes every message of a queue (a poison queue too), those
// being delivered included, and returns how many the server removed. A bad
// name is InvalidInput and purges nothing. Cost: one JetStream API request
// (the stream's purge with the queue's subject as filter).
func (a *Admin) Purge(ctx context.Context, queue string) (uint64, error) {
	if err := functions.ValidateName("queue", queue); err != nil {
		return 0, engine.Errorf(engine.CodeInvalidInput, "%v", err)
	}
	n, err := a.q.PurgeSubject(ctx, functions.QueueSubject(a.prefix, queue))
	if err != nil {
		return 0, fmt.Errorf("purge queue %q: %w", queue, err)
	}
	return n, nil
}
