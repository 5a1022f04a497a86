package functions

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
)

// TimerQueue is the queue that carries a timer function's ticks.
func TimerQueue(function string) string { return "timer-" + function }

// runTimer publishes a tick at each time of the schedule (each multiple of
// the interval, or each time of the cron schedule) to the function's timer
// queue, from every node, with an id naming the tick:
// JetStream keeps one of each. The ticks are then delivered like any
// queue message (dequeue counts, back-off, poison).
func (f *function) runTimer(ctx context.Context, m Manifest) error {
	queue := TimerQueue(f.name)
	next, err := m.Trigger.schedule()
	if err != nil {
		return err
	}
	// The ticks stop when the queue's consumer does.
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			now := f.rn.now()
			next := next(now)
			select {
			case <-ctx.Done():
				return
			case <-time.After(next.Sub(now)):
			}
			tick := next.UTC()
			id := "t:" + f.name + ":" + tick.Format(time.RFC3339Nano)
			hdr := nats.Header{HeaderTrigger: []string{id}}
			body := []byte(tick.Format(time.RFC3339Nano))
			if err := f.rn.queues.Publish(ctx, queue, body, id, hdr); err != nil && ctx.Err() == nil {
				if engine.ErrorCode(err) == CodeQueueBacklogExceeded {
					f.rn.stats.QueueFull.Add(1)
				}
				f.rn.log.Warn("function: timer tick not published", "function", f.name, "tick", tick, "err", err)
			}
		}
	}()
	return f.consumeQueue(ctx, queue)
}
