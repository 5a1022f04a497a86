package functions

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
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

// pullExpiry bounds one pull request: on a queue that stays empty the
// server ends it (at 90 % of this) and the loop issues the next one at
// once. No idle heartbeats are asked for: a fetch that gave up on missed
// heartbeats would leave its request on the server, and a message
// delivered to it then would wait out the ack wait and count a delivery.
const pullExpiry = 5 * time.Second

// fetcher issues one pull request for at most n messages. Its batch ends
// when n messages came, when the server ended the request (expired), or
// when ctx ends.
type fetcher func(ctx context.Context, n int) (jetstream.MessageBatch, error)

// pull feeds a consumer's messages to handle until ctx ends (nil), with
// at most slots messages taken and not yet released, or until the
// consumer is gone (deleted, or nothing answers its pull requests): that
// error, for the caller to create it again.
func (f *function) pull(ctx context.Context, cons jetstream.Consumer, slots int, what string, handle func(msg jetstream.Msg, release func())) error {
	fetch := func(ctx context.Context, n int) (jetstream.MessageBatch, error) {
		return cons.Fetch(n, jetstream.FetchContext(ctx))
	}
	var gone error
	deliver(ctx, slots, fetch, handle, func(err error) bool {
		if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, nats.ErrNoResponders) {
			gone = err
			return false
		}
		f.rn.log.Warn("function: "+what+" read failed", "function", f.name, "err", err)
		return retryWait(ctx, time.Second)
	})
	if ctx.Err() != nil {
		return nil
	}
	return gone
}

// deliver is the delivery loop of a pull consumer: it waits for a free
// slot, takes every free one, and issues one pull request for that many
// messages; each message is handed to handle with one slot, which handle
// gives back with release once the message is settled (at once, or from
// another goroutine). A request that ends with fewer messages (it
// expired: the queue was empty) gives the rest back, and the next request
// is issued at once.
//
// The loop keeps its own count of what it asked for: one request at a
// time, never more messages than slots. (The client library's Messages
// iterator, used before, keeps a count of its overlapping requests that a
// race can leave believing a request is out when the server holds none;
// it then waited out two missed heartbeats, 5 s, before pulling again.)
//
// Messages that arrive once ctx has ended are handed back (Nak) at once,
// to be delivered to another node or later. The loop pauses only after a
// failed request (the consumer or the connection is gone): failed reports
// it and waits, false when ctx ended meanwhile.
func deliver(ctx context.Context, slots int, fetch fetcher, handle func(msg jetstream.Msg, release func()), failed func(error) bool) {
	free := make(chan struct{}, slots)
	for range slots {
		free <- struct{}{}
	}
	release := func() { free <- struct{}{} }
	for {
		select {
		case <-ctx.Done():
			return
		case <-free:
		}
		n := 1
	take:
		for n < slots {
			select {
			case <-free:
				n++
			default:
				break take
			}
		}
		fctx, cancel := context.WithTimeout(ctx, pullExpiry)
		batch, err := fetch(fctx, n)
		if err != nil {
			cancel()
			for range n {
				release()
			}
			if ctx.Err() != nil || !failed(err) {
				return
			}
			continue
		}
		got := 0
		for msg := range batch.Messages() {
			if ctx.Err() != nil || got == n {
				_ = msg.Nak()
				continue
			}
			got++
			handle(msg, release)
		}
		cancel()
		for range n - got {
			release()
		}
		if err := batch.Error(); err != nil && ctx.Err() == nil &&
			!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrNoHeartbeat) {
			// The consumer is gone, or the connection: do not spin.
			if !failed(err) {
				return
			}
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
