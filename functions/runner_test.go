package functions

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/journal/jstest"
)

// TestStartFailsWhenTheFirstWatchFails makes the registry's watch fail on
// a real server: the account allows one consumer per stream and the
// registry's bucket already has one, so the watch's ordered consumer is
// refused. Start must return that error, not wait for a watch that never
// delivers.
func TestStartFailsWhenTheFirstWatchFails(t *testing.T) {
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

	rn, err := NewRunner(nc, nil, nil, nil, Config{NoBuiltins: true, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	err = rn.Start(rctx)
	stop()
	rn.Wait()
	if err == nil || !strings.Contains(err.Error(), "registry watch") {
		t.Fatalf("Start = %v, want the registry watch's error", err)
	}
	t.Log(err)
}
