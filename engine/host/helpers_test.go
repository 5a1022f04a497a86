package host_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/host"
)

// testHost is a host running in-process on a fresh or given data directory,
// with a client connected to it.
type testHost struct {
	h      *host.Host
	nc     *nats.Conn
	c      *client.Client
	dir    string
	cancel context.CancelFunc
	done   chan error
}

func quietLog() *slog.Logger {
	if os.Getenv("CAIRN_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startHost starts a host on dir (a new temporary directory when empty).
func startHost(t testing.TB, dir string) *testHost {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	ctx, cancel := context.WithCancel(context.Background())
	th := &testHost{dir: dir, cancel: cancel, done: make(chan error, 1)}
	ready := make(chan *host.Host, 1)
	go func() {
		th.done <- host.Run(ctx, host.Config{
			DataDir:    dir,
			NATSListen: "127.0.0.1:0",
			HTTP:       "127.0.0.1:0",
			Log:        quietLog(),
		}, func(h *host.Host) { ready <- h })
	}()
	select {
	case th.h = <-ready:
	case err := <-th.done:
		cancel()
		t.Fatalf("host did not start: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("host did not become ready within 60s")
	}
	nc, err := nats.Connect(th.h.ClientURL())
	if err != nil {
		th.stop(t)
		t.Fatalf("connect: %v", err)
	}
	th.nc = nc
	th.c = client.New(nc, client.WithTimeout(20*time.Second))
	t.Cleanup(func() { th.stop(t) })
	return th
}

// stop shuts the host down cleanly (idempotent).
func (th *testHost) stop(t testing.TB) {
	t.Helper()
	if th.cancel == nil {
		return
	}
	if th.nc != nil {
		th.nc.Close()
	}
	th.cancel()
	th.cancel = nil
	select {
	case err := <-th.done:
		if err != nil {
			t.Errorf("host stopped with error: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("host did not stop within 30s")
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
