package projections

import (
	"context"
	"sync"
	"sync/atomic"
)

// shareQueue puts a view's deltas in the shared store after they are
// written, one at a time and in the order they were written, in a
// goroutine of its own.
//
// A delta is durable once its file is written: that is what bounds what
// this node replays after a crash, and the next delta may be written as
// soon as it is. The put takes longer than the write (the store writes the
// file again, beside a base of the whole table being put) and, done by
// the delta's writer, held the next delta back: the tail grew seven times
// past its bound while a million-entity base was put. Queued, the puts
// lag instead, and only a new node, which loads the store's chain, starts
// from further back; each put still follows the one before, so the
// store's chain stays whole.
type shareQueue struct {
	mu      sync.Mutex
	items   []shareItem   // the first is being put while running
	running bool          // a goroutine puts them
	drained chan struct{} // closed when the queue empties; a new one each time it runs
	ctx     context.Context
	cancel  context.CancelFunc
	queued  *atomic.Int64 // len(items), for /metrics
}

// shareItem is a delta file to put.
type shareItem struct {
	path string
	link *chainLink
}

func newShareQueue(queued *atomic.Int64) *shareQueue {
	ctx, cancel := context.WithCancel(context.Background())
	drained := make(chan struct{})
	close(drained)
	return &shareQueue{ctx: ctx, cancel: cancel, drained: drained, queued: queued}
}

// share queues a delta file of the view's, and starts the queue's
// goroutine if it is not running.
func (s *snapshotter) share(it shareItem) {
	q := s.shares
	q.mu.Lock()
	q.items = append(q.items, it)
	q.queued.Store(int64(len(q.items)))
	start := !q.running
	if start {
		q.running = true
		q.drained = make(chan struct{})
	}
	q.mu.Unlock()
	if !start {
		return
	}
	s.v.wg.Add(1)
	go func() {
		defer s.v.wg.Done()
		for put := false; ; put = true {
			it, ok := q.next(put)
			if !ok {
				return
			}
			s.v.shareSnapshot(q.ctx, s.t, it.path, it.link)
		}
	}()
}

// next drops the item just put (put), and returns the one to put now, or
// false once the queue is empty or stopped: the goroutine then ends.
func (q *shareQueue) next(put bool) (shareItem, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if put {
		q.items = q.items[1:]
	}
	if len(q.items) == 0 || q.ctx.Err() != nil {
		q.items, q.running = nil, false
		close(q.drained)
		q.queued.Store(0)
		return shareItem{}, false
	}
	q.queued.Store(int64(len(q.items)))
	return q.items[0], true
}

// wait returns once the queued deltas are put (or given up), or ctx ends.
func (q *shareQueue) wait(ctx context.Context) {
	q.mu.Lock()
	drained := q.drained
	q.mu.Unlock()
	select {
	case <-drained:
	case <-ctx.Done():
	}
}

// stop gives up the puts not done: the put under way ends, the rest are
// dropped. The view stopped or its table was dropped; a delta not put
// leaves the store's chain at the one before, and the next base this
// node (or another) shares starts a chain again.
func (q *shareQueue) stop() { q.cancel() }
