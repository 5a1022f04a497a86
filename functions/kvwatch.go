package functions

import (
	"context"
	"errors"

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
