package node_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine/client"
)

// testHost is a host running in-process on a fresh or given data directory,
// with a client connected to it.
type testHost struct {
	h        *node.Node
	nc       *nats.Conn
	c        *client.Client
	dir      string
	stopHost func()
}

func quietLog() *slog.Logger { return nodetest.QuietLog() }

// startHost starts a host with an embedded server on dir (a new temporary
// directory when empty).
func startHost(t testing.TB, dir string) *testHost {
	t.Helper()
	return startNode(t, node.Config{DataDir: dir})
}

// startHostOn starts a host on a new data directory, connected to the
// embedded NATS server of another host with that host's credentials.
func startHostOn(t testing.TB, other *testHost) *testHost {
	t.Helper()
	return startNode(t, node.Config{NATSURL: other.h.ClientURL(), NATSCreds: other.h.NATSCredsFile()})
}

// nodeCreds returns the options that connect as the node user of the
// embedded server whose data directory is dir (a child's, for example).
func nodeCreds(t testing.TB, dir string) []nats.Option {
	t.Helper()
	c, err := natsauth.Read(natsauth.Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	return c.Options()
}

func startNode(t testing.TB, cfg node.Config) *testHost {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	th := &testHost{dir: cfg.DataDir}
	th.h, th.stopHost = nodetest.Start(t, cfg)
	// As the node user: tests look into the streams and the registry.
	// (security_test.go connects without credentials, as a development
	// client does.)
	th.nc = nodetest.Connect(t, th.h)
	th.c = client.New(th.nc, client.WithTimeout(20*time.Second))
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
