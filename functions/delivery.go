package functions

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// retryWait pauses after a failure of the trigger machinery itself (not
// of the function), so that a lost connection does not spin.
func retryWait(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// pull feeds a consumer's messages to handle until ctx ends, with at most
// ahead messages pulled and not yet handled.
func (f *function) pull(ctx context.Context, cons jetstream.Consumer, ahead int, what string, handle func(jetstream.Msg)) error {
	iter, err := cons.Messages(jetstream.PullMaxMessages(ahead), jetstream.PullExpiry(5*time.Second))
	if err != nil {
		return err
	}
	defer iter.Stop()
	// Next blocks: stop the iterator when ctx ends, and wait for the
	// goroutine that does so before returning.
	returned, stopper := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopper)
		select {
		case <-ctx.Done():
			iter.Stop()
		case <-returned:
		}
	}()
	defer func() { close(returned); <-stopper }()
	for {
		msg, err := iter.Next()
		switch {
		case errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil:
			if msg != nil {
				_ = msg.Nak()
			}
			return nil
		case errors.Is(err, jetstream.ErrNoHeartbeat):
			// A busy moment: the iterator pulls again.
		case err != nil:
			f.rn.log.Warn("function: "+what+" read failed", "function", f.name, "err", err)
		default:
			handle(msg)
		}
	}
}

// redeliver hands a delivery back to JetStream, to be delivered again after
// delay (at once when 0), to this node or another.
func redeliver(msg jetstream.Msg, delay time.Duration) {
	if delay == 0 {
		_ = msg.Nak()
		return
	}
	_ = msg.NakWithDelay(delay)
}
