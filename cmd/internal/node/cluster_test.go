package node_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/journal"
)

func freePort(t *testing.T) int { return nodetest.FreePort(t) }

// testCluster is three NATS servers with JetStream, routed to each other
// on loopback, whose client ports are chosen before any of them starts: a
// test can point a node at a server that is not up yet, and stop one.
type testCluster struct {
	urls    []string
	opts    []*server.Options
	servers []*server.Server // nil: not started, or shut down
}

// newCluster prepares a cluster; nothing runs until start.
func newCluster(t *testing.T) *testCluster {
	t.Helper()
	routePorts := []int{freePort(t), freePort(t), freePort(t)}
	var routes []string
	for _, p := range routePorts {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	tc := &testCluster{servers: make([]*server.Server, len(routePorts))}
	for i := range routePorts {
		o := &server.Options{
			ServerName: fmt.Sprintf("n%d", i),
			Host:       "127.0.0.1",
			Port:       freePort(t),
			JetStream:  true,
			StoreDir:   t.TempDir(),
			MaxPayload: 8 << 20,
			Cluster:    server.ClusterOpts{Name: "cairn-test", Host: "127.0.0.1", Port: routePorts[i]},
			Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
			NoSigs:     true,
			NoLog:      true,
		}
		tc.opts = append(tc.opts, o)
		tc.urls = append(tc.urls, fmt.Sprintf("nats://127.0.0.1:%d", o.Port))
	}
	t.Cleanup(func() {
		for i := range tc.servers {
			tc.stop(i)
		}
	})
	return tc
}

// url is the client URL of every server, comma-separated.
func (tc *testCluster) url() string { return strings.Join(tc.urls, ",") }

// start starts server i and waits until it takes connections.
func (tc *testCluster) start(t *testing.T, i int) {
	t.Helper()
	ns, err := server.NewServer(tc.opts[i])
	if err != nil {
		t.Fatal(err)
	}
	var fatal fatalLog
	ns.SetLoggerV2(&fatal, false, false, false)
	go ns.Start()
	for deadline := time.Now().Add(20 * time.Second); !ns.ReadyForConnections(100 * time.Millisecond); {
		if fatal.any() || time.Now().After(deadline) {
			ns.Shutdown()
			t.Fatalf("cluster server %s not ready: %s", tc.opts[i].ServerName, fatal.String())
		}
	}
	tc.servers[i] = ns
}

// fatalLog keeps what a server logs as fatal (a listener it could not
// open, for one) and drops everything else.
type fatalLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *fatalLog) Fatalf(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, v...))
}

func (l *fatalLog) any() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines) > 0
}

func (l *fatalLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 0 {
		return "nothing logged as fatal"
	}
	return strings.Join(l.lines, "; ")
}

func (*fatalLog) Noticef(string, ...any) {}
func (*fatalLog) Warnf(string, ...any)   {}
func (*fatalLog) Errorf(string, ...any)  {}
func (*fatalLog) Debugf(string, ...any)  {}
func (*fatalLog) Tracef(string, ...any)  {}

// stop shuts server i down (if it runs).
func (tc *testCluster) stop(i int) {
	if ns := tc.servers[i]; ns != nil {
		tc.servers[i] = nil
		ns.Shutdown()
		ns.WaitForShutdown()
	}
}

// index returns the index of the server named name, or -1.
func (tc *testCluster) index(name string) int {
	for i, o := range tc.opts {
		if o.ServerName == name {
			return i
		}
	}
	return -1
}

// waitJetStream waits until JetStream answers on the cluster.
func (tc *testCluster) waitJetStream(t *testing.T) {
	t.Helper()
	nc, err := nats.Connect(tc.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("JetStream cluster not ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startCluster starts three NATS servers with JetStream, routed to each
// other on loopback, and returns their client URLs once JetStream answers.
func startCluster(t *testing.T) []string {
	t.Helper()
	return startTestCluster(t).urls
}

// startTestCluster is startCluster returning the cluster.
func startTestCluster(t *testing.T) *testCluster {
	t.Helper()
	tc := newCluster(t)
	for i := range tc.opts {
		tc.start(t, i)
	}
	tc.waitJetStream(t)
	return tc
}

// TestReplicatedCluster runs two hosts against a three-server cluster with
// replicated (R3) streams: the path of a deployment beyond one machine.
func TestReplicatedCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	urls := startCluster(t)
	var hosts []*node.Node
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan *node.Node, 1)
		done := make(chan error, 1)
		go func() {
			done <- node.Run(ctx, node.Config{DataDir: t.TempDir(), NATSURL: strings.Join(urls, ","), Replicas: 3, HTTP: "127.0.0.1:0", Log: quietLog()},
				func(h *node.Node) { ready <- h })
		}()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("host %d: %v", i, err)
			}
		})
		select {
		case h := <-ready:
			hosts = append(hosts, h)
		case err := <-done:
			t.Fatalf("host %d: %v", i, err)
		case <-time.After(60 * time.Second):
			t.Fatalf("host %d not ready", i)
		}
	}
	nc, err := nats.Connect(urls[2])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// A new cluster may still be electing stream leaders: allow for it.
	c := client.New(nc, client.WithTimeout(30*time.Second))
	ctx := ctxT(t)
	info, err := c.CreateTable(ctx, "Replicated")
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	s, err := js.Stream(ctx, journal.StreamName("cairn", "Replicated", info.Epoch))
	if err != nil {
		t.Fatal(err)
	}
	if r := s.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("table stream has %d replicas, want 3", r)
	}
	// Concurrent conditional writes through both hosts on one partition:
	// on R3 JetStream allows one conditional write per subject in flight,
	// and the loser's refusal is handled like any conflict.
	r, err := c.Insert(ctx, "Replicated", engine.NewEntity("c", "1", engine.Property{Name: "N", Value: engine.Int64(0)}))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts { // both views see the counter before it is read
		tb, ok, err := h.Views().Lookup(ctx, "Replicated")
		if err == nil && !ok {
			t.Fatal("a host does not know table Replicated")
		}
		if err == nil {
			_, err = tb.WaitSeq(ctx, r.Seq)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	const workers, per = 4, 10
	if _, err := incrementConcurrently(ctx, c, "Replicated", workers, per, nil); err != nil {
		t.Fatal(err)
	}
	var ops []engine.Operation
	for i := 0; i < 100; i++ {
		ops = append(ops, engine.Operation{Op: engine.OpInsert, Entity: engine.NewEntity("b", fmt.Sprintf("%03d", i))})
	}
	if _, err := c.Batch(ctx, "Replicated", ops); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		e, _, err := c.Retrieve(ctx, "Replicated", "c", "1")
		if err == nil {
			if n, _ := e.Get("N"); n.Int() == workers*per {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("counter did not reach %d: %v", workers*per, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
