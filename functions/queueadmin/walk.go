package queueadmin

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/functions"
)

// walk hands visit the messages of queue, oldest first, from sequence
// from (1 if 0), until visit returns false or an error, or the queue has
// no more. It returns visit's error or the stream's. Cost: one direct get
// per message visited.
func (a *Admin) walk(ctx context.Context, queue string, from uint64, visit func(*jetstream.RawStreamMsg) (bool, error)) error {
	subject := functions.QueueSubject(a.prefix, queue)
	for seq := max(from, 1); ; {
		m, err := a.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		seq = m.Sequence + 1
		if more, err := visit(m); !more || err != nil {
			return err
		}
	}
}
