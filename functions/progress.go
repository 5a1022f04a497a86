package functions

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ackWait is how long a delivery may stay unanswered before JetStream
// delivers it again. A delivery being worked on tells JetStream so every
// ackWait/3 (keepAlive), however long the function's timeout: only a node
// that died, or lost its connection, lets the wait pass, and its message
// goes to another node after at most ackWait. (It was the function's
// timeout plus 5 s, 35 s by default, before another node took a dead
// node's messages.) A variable for the tests.
var ackWait = 5 * time.Second

// keepAlive tells JetStream every ackWait/3 that msg is still being worked
// on, until stop is called.
func keepAlive(msg jetstream.Msg) (stop func()) {
	every := ackWait / 3
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		_ = msg.InProgress() // a failure: the connection is gone, and so is the delivery
		t.Reset(every)
	})
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}
