// Package jstest starts embedded NATS servers with JetStream for tests,
// each on a free loopback port with its store in the test's temporary
// directory, shut down when the test ends. A server that does not start
// fails the test (t.Fatal). Starting one costs some tens of milliseconds,
// so every journal test runs against the real server rather than a fake.
package jstest

import (
	"net"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/journal"
)

// configs remembers each server's configuration for Restart.
var configs sync.Map // *server.Server → journal.EmbeddedConfig

// Server starts an embedded server on a free port with its store in a
// temporary directory and returns it with a connection; both are shut down
// when the test ends. A server that does not start fails the test.
func Server(t testing.TB) (*server.Server, *nats.Conn) {
	t.Helper()
	return start(t, journal.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1, NoLog: true})
}

// Restart shuts ns (started by Server or Restart) down and starts a new
// server on the same store directory and port, as a host restart would;
// it returns the new server with a new connection. Connections to the old
// server reconnect to the new one on their own (after the client's
// reconnect wait).
func Restart(t testing.TB, ns *server.Server) (*server.Server, *nats.Conn) {
	t.Helper()
	v, ok := configs.Load(ns)
	if !ok {
		t.Fatal("jstest: Restart of a server not started by jstest")
	}
	cfg := v.(journal.EmbeddedConfig)
	if addr, ok := ns.Addr().(*net.TCPAddr); ok {
		cfg.Port = addr.Port
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	configs.Delete(ns)
	return start(t, cfg)
}

func start(t testing.TB, cfg journal.EmbeddedConfig) (*server.Server, *nats.Conn) {
	t.Helper()
	ns, err := journal.StartEmbedded(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		ns.Shutdown()
		t.Fatal(err)
	}
	configs.Store(ns, cfg)
	t.Cleanup(func() {
		nc.Close()
		ns.Shutdown()
		ns.WaitForShutdown()
		configs.Delete(ns)
	})
	return ns, nc
}
