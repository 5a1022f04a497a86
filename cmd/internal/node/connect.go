package node

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/journal"
)

// connect starts the embedded NATS server (locking the data directory
// first) or connects to the configured one.
func (n *Node) connect() error {
	cfg := n.cfg
	opts := []nats.Option{nats.Name("cairn-host"), nats.MaxReconnects(-1)}
	if cfg.NATSURL != "" {
		nc, err := nats.Connect(cfg.NATSURL, opts...)
		if err != nil {
			return fmt.Errorf("node: connect to %s: %w", cfg.NATSURL, err)
		}
		n.nc = nc
		return nil
	}
	hostName, portStr, _ := net.SplitHostPort(cfg.NATSListen)
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("node: nats-listen port %q: %v", portStr, err)
	}
	if port == 0 {
		port = -1 // the server's "pick a free port"
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("node: data directory: %w", err)
	}
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	n.unlock = unlock
	ns, err := journal.StartEmbedded(journal.EmbeddedConfig{
		StoreDir:   filepath.Join(cfg.DataDir, "jetstream"),
		Host:       hostName,
		Port:       port,
		SyncAlways: cfg.SyncAlways,
		TLS:        n.tls,
		NoLog:      true,
	})
	if err != nil {
		unlock()
		return fmt.Errorf("node: embedded NATS server: %w", err)
	}
	n.ns = ns
	// In process, without TLS even when the client port requires it (the
	// server skips it for in-process connections; a tls:// URL would make
	// the client insist).
	inProc := "nats://" + strings.TrimPrefix(strings.TrimPrefix(ns.ClientURL(), "tls://"), "nats://")
	nc, err := nats.Connect(inProc, append(opts, nats.InProcessServer(ns))...)
	if err != nil {
		ns.Shutdown()
		unlock()
		return fmt.Errorf("node: connect to the embedded server: %w", err)
	}
	n.nc = nc
	return nil
}

// close closes the connection, stops the embedded server and releases
// the data directory.
func (n *Node) close() {
	if n.nc != nil {
		_ = n.nc.Drain()
		n.nc.Close()
	}
	if n.ns != nil {
		n.ns.Shutdown()
		n.ns.WaitForShutdown()
	}
	if n.unlock != nil {
		n.unlock()
	}
}
