package functions

import (
	"context"
	"errors"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// watchKV calls fn with every entry of kv as it is now, then with each
// change (a deletion or purge as an entry whose Operation says so), until
// ctx ends (nil) or the watch ends (an error naming what). ready, if not
// nil, is called once the present state has been delivered. The
// registry, the functions' keys and their settings share it.
func watchKV(ctx context.Context, kv jetstream.KeyValue, what string, fn func(jetstream.KeyValueEntry), ready func()) error {
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("functions: " + what + " watch ended")
			}
			if e == nil {
				if ready != nil {
					ready()
					ready = nil
				}
				continue
			}
			fn(e)
		}
	}
}

// revision is the bucket revision a watched copy has reached, for those
// who wait until it holds a change they made. The copy moves it after
// applying an entry, so a waiter it releases reads the entry's effect.
type revision struct {
	mu  sync.Mutex
	rev uint64
	// moved is closed, and replaced, at every move.
	moved chan struct{}
}

func newRevision() *revision { return &revision{moved: make(chan struct{})} }

// move records that the copy holds revision rev (a lower one is kept
// as it is: the watch delivers in order, but a copy may be told twice).
func (r *revision) move(rev uint64) {
	r.mu.Lock()
	r.rev = max(r.rev, rev)
	close(r.moved)
	r.moved = make(chan struct{})
	r.mu.Unlock()
}

// wait returns once the copy holds revision rev or later, or ctx ends.
func (r *revision) wait(ctx context.Context, rev uint64) error {
	for {
		r.mu.Lock()
		done, moved := r.rev >= rev, r.moved
		r.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
