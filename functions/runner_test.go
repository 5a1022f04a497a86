package functions

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/journal/jstest"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestRunFailsWhenTheFirstWatchFails makes the registry's watch fail on a
// real server: the account allows one consumer per stream and the
// registry's bucket already has one, so the watch's ordered consumer is
// refused. Run must return that error, not wait for a watch that never
// delivers, and Ready must stay open.
func TestRunFailsWhenTheFirstWatchFails(t *testing.T) {
	ns, nc := jstest.Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRegistry(ctx, js, "cairn", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, "KV_CAIRN_FUNCTIONS", jetstream.ConsumerConfig{Durable: "taken"}); err != nil {
		t.Fatal(err)
	}
	limits := map[string]server.JetStreamAccountLimits{"": {MaxMemory: -1, MaxStore: -1, MaxStreams: -1, MaxConsumers: 1, MaxAckPending: -1}}
	if err := ns.GlobalAccount().UpdateJetStreamLimits(limits); err != nil {
		t.Fatal(err)
	}

	rn, err := NewRunner(nc, nil, nil, Config{NoBuiltins: true, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	err = rn.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "registry watch") {
		t.Fatalf("Run = %v, want the registry watch's error", err)
	}
	select {
	case <-rn.Ready():
		t.Fatal("Ready closed by a runner that did not start")
	default:
	}
}

// TestRunStopsAfterItsDeliveries runs a runner with a native function on a
// queue, stops it while an invocation is running, and checks that Run
// returns nil only after the invocation finished and its message was
// acknowledged.
func TestRunStopsAfterItsDeliveries(t *testing.T) {
	_, nc := jstest.Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rn, rctx, stop, done := startRunner(t, ctx, nc, Config{NoBuiltins: true})

	started := make(chan struct{})
	var finished atomic.Bool
	m := Manifest{Name: "slow", Trigger: Trigger{Queue: "slow"}}
	err := rn.Register(m, NativeFunc(func(_ context.Context, inv *Invocation) error {
		close(started)
		<-rctx.Done() // the runner is stopping: this delivery was taken already
		finished.Store(true)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := rn.Queues().Enqueue(ctx, "slow", []byte("x")); err != nil {
		t.Fatal(err)
	}
	<-started
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v after a normal stop", err)
	}
	if !finished.Load() {
		t.Fatal("Run returned before the delivery it had taken finished")
	}
	if n, err := rn.Queues().Depth(ctx, "slow"); err != nil || n != 0 {
		t.Fatalf("queue depth after the stop: %d, %v; want the message acknowledged", n, err)
	}
}

// startRunner runs a runner on nc with cfg (quiet) until ctx ends or stop
// is called, and returns once it is Ready: the runner, the context it runs
// in, stop, and where Run's result arrives.
func startRunner(t *testing.T, ctx context.Context, nc *nats.Conn, cfg Config) (*Runner, context.Context, context.CancelFunc, chan error) {
	t.Helper()
	cfg.Log = quiet()
	rn, err := NewRunner(nc, nil, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rn.Run(rctx) }()
	select {
	case <-rn.Ready():
	case err := <-done:
		stop()
		t.Fatalf("Run = %v before Ready", err)
	}
	return rn, rctx, stop, done
}

// TestLongInvocationIsNotDeliveredAgain: an invocation that runs longer
// than the ack wait tells JetStream it is in progress, so its message is
// not given to anyone else meanwhile; only a node that stops saying so
// (dead, or disconnected) lets it go after the ack wait.
func TestLongInvocationIsNotDeliveredAgain(t *testing.T) {
	defer func(d time.Duration) { ackWait = d }(ackWait)
	ackWait = 300 * time.Millisecond
	_, nc := jstest.Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rn, _, stop, done := startRunner(t, ctx, nc, Config{NoBuiltins: true})
	defer func() { stop(); <-done }()

	var runs atomic.Int32
	finished := make(chan struct{})
	m := Manifest{Name: "long", Trigger: Trigger{Queue: "long"}, Concurrency: 4}
	err := rn.Register(m, NativeFunc(func(ctx context.Context, inv *Invocation) error {
		if runs.Add(1) == 1 {
			time.Sleep(5 * ackWait) // five ack waits: delivered again without the heartbeat
			close(finished)
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := rn.Queues().Enqueue(ctx, "long", []byte("x")); err != nil {
		t.Fatal(err)
	}
	<-finished
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, err := rn.Queues().Depth(ctx, "long"); err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the message was not acknowledged")
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the function ran %d times, want once", n)
	}
}
