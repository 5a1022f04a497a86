package host_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/host"
	"github.com/cairn-dev/cairn/engine/host/hosttest"
)

// testHost is a host running in-process on a fresh or given data directory,
// with a client connected to it.
type testHost struct {
	h        *host.Host
	nc       *nats.Conn
	c        *client.Client
	dir      string
	stopHost func()
}

func quietLog() *slog.Logger { return hosttest.QuietLog() }

// startHost starts a host on dir (a new temporary directory when empty).
func startHost(t testing.TB, dir string) *testHost {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	th := &testHost{dir: dir}
	th.h, th.stopHost = hosttest.Start(t, host.Config{DataDir: dir})
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
	if th.nc != nil {
		th.nc.Close()
	}
	th.stopHost()
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
