// Package jstest starts embedded NATS servers with JetStream for tests.
package jstest

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/journal"
)

// Server starts an embedded server on a free port with its store in a
// temporary directory and returns it with a connection; both are shut down
// when the test ends.
func Server(t testing.TB) (*server.Server, *nats.Conn) {
	t.Helper()
	ns, err := journal.StartEmbedded(journal.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		ns.Shutdown()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		nc.Close()
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	return ns, nc
}
