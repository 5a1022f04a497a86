// Package nodetest starts nodes for tests: in the test's process (Start),
// or in a child process that a test can kill with SIGKILL (StartChild,
// with Main in the test binary's TestMain). Every node gets its own
// temporary data directory and free loopback ports unless the test names
// them, so no test writes into the source tree or collides with another.
// SelfSigned makes a certificate for a node started with TLS. Connect
// connects to a node's NATS server as its node user; a plain
// nats.Connect(h.ClientURL()) is a development client, which may only
// send commands. Records reads a table's journal records, to see what a
// write stored.
// A node that does not become ready in time (60 s in-process, 90 s in a
// child) fails the test with its log; a node that stops with an error
// fails it too. An in-process node costs an embedded server and a replay
// of its data directory's journal (nothing, for a new one); a child
// process costs a fork and exec of the test binary on top.
package nodetest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
	"github.com/cairn-dev/cairn/cmd/internal/node"
)

// QuietLog is the hosts' log: discarded, or on stderr when the environment
// has CAIRN_TEST_LOG set.
func QuietLog() *slog.Logger {
	if os.Getenv("CAIRN_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Start runs a host until the test ends and returns it once it is ready.
// Zero fields of cfg get test defaults: a new temporary data directory,
// free loopback ports for NATS and HTTP, QuietLog. stop shuts the host down
// earlier (it may be called more than once); an error the host stops with
// fails the test.
func Start(t testing.TB, cfg node.Config) (h *node.Node, stop func()) {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.NATSListen == "" {
		cfg.NATSListen = "127.0.0.1:0"
	}
	if cfg.HTTP == "" {
		cfg.HTTP = "127.0.0.1:0"
	}
	if cfg.Log == nil {
		cfg.Log = QuietLog()
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *node.Node, 1)
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx, cfg, func(h *node.Node) { ready <- h }) }()
	select {
	case h = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("host did not start: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("host did not become ready within 60s")
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("host stopped with error: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("host did not stop within 30s")
			}
		})
	}
	t.Cleanup(stop)
	return h, stop
}

// Connect connects to a node's NATS server as the node user (its
// credentials file), with opts; the connection closes when the test ends.
// Tests that use JetStream, the function registry or the journal's
// subjects need it; a test that only sends commands may connect without
// credentials, as a development client does.
func Connect(t testing.TB, h *node.Node, opts ...nats.Option) *nats.Conn {
	t.Helper()
	if f := h.NATSCredsFile(); f != "" {
		c, err := natsauth.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(c.Options(), opts...)
	}
	nc, err := nats.Connect(h.ClientURL(), opts...)
	if err != nil {
		t.Fatalf("connect to %s as the node user: %v", h.ClientURL(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}
