package node_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
)

// syncBuffer is a log sink the node writes from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runNode runs a node in the background; the channels get it once it is
// ready, and what Run returned.
func runNode(t *testing.T, ctx context.Context, cfg node.Config) (<-chan *node.Node, <-chan error) {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.HTTP == "" {
		cfg.HTTP = "off"
	}
	ready := make(chan *node.Node, 1)
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx, cfg, func(h *node.Node) { ready <- h }) }()
	return ready, done
}

// TestClusterStartBeforeServers starts a node on a three-server cluster
// none of whose servers runs yet; they start one after the other a moment
// later. The node must wait for them, and for their meta leader, and then
// serve.
func TestClusterStartBeforeServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	tc := newCluster(t)
	var logs syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	begin := time.Now()
	ready, done := runNode(t, ctx, node.Config{NATSURL: tc.url(), Replicas: 3,
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	stopped := false
	defer func() {
		cancel()
		if err := <-done; err != nil && !stopped {
			t.Errorf("node: %v", err)
		}
		t.Logf("node log:\n%s", logs.String())
	}()
	time.Sleep(2 * time.Second)
	select {
	case err := <-done:
		stopped = true
		t.Fatalf("the node stopped while no server ran: %v", err)
	default:
	}
	for i := range tc.opts {
		tc.start(t, i)
	}
	up := time.Now()
	var h *node.Node
	select {
	case h = <-ready:
	case err := <-done:
		stopped = true
		t.Fatalf("the node stopped instead of waiting for the cluster: %v", err)
	case <-ctx.Done():
		t.Fatal("the node did not become ready")
	}
	t.Logf("servers started %v after the node, the node ready %v after they were", up.Sub(begin).Round(time.Millisecond), time.Since(up).Round(time.Millisecond))
	if !strings.Contains(logs.String(), "connect to") {
		t.Errorf("the node did not say what it waited for")
	}
	nc, err := nats.Connect(h.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := client.New(nc, client.WithTimeout(30*time.Second))
	if _, err := c.CreateTable(ctx, "Late"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Insert(ctx, "Late", engine.NewEntity("p", "r")); err != nil {
		t.Fatal(err)
	}
}

// TestStartRefused points nodes at servers that will never do: one
// without JetStream, one that refuses the node's password, one that cannot
// have the replicas asked for. Each node must stop with the reason, long
// before its start context ends, instead of waiting.
func TestStartRefused(t *testing.T) {
	start := func(t *testing.T, o *server.Options) *server.Server {
		t.Helper()
		o.Host, o.Port, o.NoLog, o.NoSigs = "127.0.0.1", -1, true, true
		if o.JetStream {
			o.StoreDir = t.TempDir()
		}
		ns, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		go ns.Start()
		if !ns.ReadyForConnections(10 * time.Second) {
			t.Fatal("server not ready")
		}
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		return ns
	}
	for _, tt := range []struct {
		name     string
		opts     server.Options
		url      func(*server.Server) string
		replicas int
		want     string
	}{
		{name: "no JetStream", opts: server.Options{}, want: "no JetStream"},
		{name: "bad password", opts: server.Options{JetStream: true, Username: "cairn", Password: "right"},
			url: func(ns *server.Server) string {
				return strings.Replace(ns.ClientURL(), "nats://", "nats://cairn:wrong@", 1)
			}, want: "authorization violation"},
		{name: "replicas", opts: server.Options{JetStream: true}, replicas: 3, want: "replicas"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns := start(t, &tt.opts)
			url := ns.ClientURL()
			if tt.url != nil {
				url = tt.url(ns)
			}
			const bound = 60 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			begin := time.Now()
			ready, done := runNode(t, ctx, node.Config{NATSURL: url, Replicas: tt.replicas, Log: quietLog()})
			select {
			case <-ready:
				t.Fatal("the node started")
			case err := <-done:
				took := time.Since(begin)
				t.Logf("stopped after %v: %v", took.Round(time.Millisecond), err)
				if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tt.want)) {
					t.Fatalf("Run returned %v, want an error saying %q", err, tt.want)
				}
				if ctx.Err() != nil {
					t.Fatalf("the node waited out its start context (%v)", bound)
				}
			}
		})
	}
}
