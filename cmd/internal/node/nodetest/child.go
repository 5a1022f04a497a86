package nodetest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/commit"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/projections"
)

// childEnv carries a child's ChildConfig, as JSON, from the test to the
// test binary started again as a node.
const childEnv = "CAIRN_TEST_CHILD"

// ChildConfig configures a node in a child process.
type ChildConfig struct {
	// DataDir is the data directory (a new temporary one when empty).
	DataDir string
	// NATSListen is the embedded server's address (a free loopback port
	// when empty and NATSURL is empty).
	NATSListen string
	// NATSURL connects the node to a NATS server instead of embedding one.
	NATSURL string
	// NATSCreds is the credentials file to connect to NATSURL with (the
	// NATSCredsFile of the node whose server that is).
	NATSCreds string
	// HTTP is the HTTP API's address ("off" when empty).
	HTTP string
	// Failpoint kills the child at a named step (the functions' and the
	// snapshots': functions.invoke, snapshot.base-write, …).
	Failpoint string
	// NoBuiltins leaves the built-in functions off (nothing takes the
	// archive queue's messages).
	NoBuiltins bool
	// SnapshotEvery, when set, bounds the views' tail: a snapshot every
	// so many records (crash tests kill the node while it writes one).
	// SnapshotCompact, when set, is the views' compaction fraction.
	SnapshotEvery   int
	SnapshotCompact float64
	// NoSnapshots turns the views' snapshots off: every view replays its
	// whole journal.
	NoSnapshots bool
	// Replicas is the replica count of the node's streams (with NATSURL
	// naming a cluster).
	Replicas int
	// History, PruneEvery and PruneGrace set the node's default retention
	// and its pruner's pace (node.Config); DedupWindow the views'
	// command-id window.
	History                string
	PruneEvery, PruneGrace time.Duration
	DedupWindow            time.Duration
	// ViewReplicas places the views' shards (node.Config).
	ViewReplicas int
	// ClaimWindow is the committer's claim window of large values;
	// ValueSweepMargin and ValueSweepEvery tune their sweep
	// (node.Config; zero: the defaults).
	ClaimWindow                       time.Duration
	ValueSweepMargin, ValueSweepEvery time.Duration

	// MarkerQueue, when set, runs a native function "marker" on this
	// queue: for each message it inserts the row PartitionKey "m",
	// RowKey the message's body, into the table Markers (which the test
	// creates). A message whose effect were applied twice would find its
	// row there and fail.
	MarkerQueue string

	// ServerOnly runs no node: only a NATS server with JetStream, storing
	// in DataDir and taking clients on NATSListen, without authentication
	// (StartServerChild).
	ServerOnly bool
	// ServerName names the server (ServerOnly).
	ServerName string
	// ClusterListen is the server's route address, and Routes the route
	// URLs of every server of its cluster (ServerOnly; none: no cluster).
	ClusterListen string
	Routes        []string
}

// Main lets a test binary double as a node process: call it from TestMain.
// Started by StartChild, the binary runs a node until SIGTERM instead of
// the tests, and prints READY once the node serves.
func Main(m *testing.M) {
	raw, ok := os.LookupEnv(childEnv)
	if !ok {
		os.Exit(m.Run())
	}
	var cc ChildConfig
	if err := json.Unmarshal([]byte(raw), &cc); err != nil {
		fmt.Fprintln(os.Stderr, "child node: bad", childEnv+":", err)
		os.Exit(2)
	}
	if cc.ServerOnly {
		os.Exit(serverMain(cc))
	}
	views := projections.Config{SnapshotEvery: cc.SnapshotEvery, SnapshotCompact: cc.SnapshotCompact, Failpoint: cc.Failpoint, DedupWindow: cc.DedupWindow}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := node.Run(ctx, node.Config{
		DataDir:    cc.DataDir,
		NATSListen: cc.NATSListen,
		NATSURL:    cc.NATSURL,
		NATSCreds:  cc.NATSCreds,
		HTTP:       cc.HTTP,
		Functions: node.FunctionsConfig{Failpoint: cc.Failpoint, NoBuiltins: cc.NoBuiltins,
			ValueSweepMargin: cc.ValueSweepMargin, ValueSweepEvery: cc.ValueSweepEvery},
		Commit:       commit.Config{ClaimWindow: cc.ClaimWindow},
		NoSnapshots:  cc.NoSnapshots,
		Replicas:     cc.Replicas,
		Views:        views,
		History:      cc.History,
		PruneEvery:   cc.PruneEvery,
		PruneGrace:   cc.PruneGrace,
		ViewReplicas: cc.ViewReplicas,
		Log:          slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}, func(n *node.Node) {
		if cc.MarkerQueue == "" {
			fmt.Println("READY")
			return
		}
		go func() {
			select {
			case <-n.Functions().Ready():
			case <-ctx.Done():
				return
			}
			m := functions.Manifest{Name: "marker", Trigger: functions.Trigger{Queue: cc.MarkerQueue}}
			m.BackoffMin = functions.Duration(50 * time.Millisecond)
			m.BackoffMax = functions.Duration(time.Second)
			if err := n.Functions().Register(m, functions.NativeFunc(marker)); err != nil {
				fmt.Fprintln(os.Stderr, "child node: register the marker function:", err)
				os.Exit(1)
			}
			fmt.Println("READY")
		}()
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child node:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// marker is the MarkerQueue function.
func marker(ctx context.Context, inv *functions.Invocation) error {
	return inv.Write(ctx, "Markers", engine.Operation{Op: engine.OpInsert, Entity: engine.NewEntity("m", string(inv.Trigger().Body))})
}

// serverMain runs a NATS server for a ServerOnly child until SIGTERM and
// returns the exit status; it prints READY once the server takes
// connections.
func serverMain(cc ChildConfig) int {
	host, port, err := splitAddr(cc.NATSListen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child server:", err)
		return 2
	}
	o := &server.Options{
		ServerName: cc.ServerName,
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   cc.DataDir,
		MaxPayload: 8 << 20,
		NoSigs:     true,
		NoLog:      true,
	}
	if cc.ClusterListen != "" {
		chost, cport, err := splitAddr(cc.ClusterListen)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child server:", err)
			return 2
		}
		o.Cluster = server.ClusterOpts{Name: "cairn-test", Host: chost, Port: cport}
		o.Routes = server.RoutesFromStr(strings.Join(cc.Routes, ","))
	}
	ns, err := server.NewServer(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child server:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go ns.Start()
	if !ns.ReadyForConnections(60 * time.Second) {
		fmt.Fprintln(os.Stderr, "child server: not ready within 60s")
		return 1
	}
	fmt.Println("READY")
	<-ctx.Done()
	ns.Shutdown()
	ns.WaitForShutdown()
	return 0
}

func splitAddr(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	return host, port, err
}

// StartServerChild starts a NATS server (cc.ServerOnly) in a child process
// and waits until it takes connections, as StartChild does for a node. A
// server killed with SIGKILL is restarted by starting it again with the
// same ChildConfig: the same store and ports.
func StartServerChild(t testing.TB, cc ChildConfig) *Child {
	t.Helper()
	cc.ServerOnly = true
	if cc.NATSListen == "" {
		t.Fatal("nodetest: a server child needs its NATSListen")
	}
	return StartChild(t, cc)
}

// Child is a node, or a NATS server (ServerOnly), running in a child
// process (this test binary, started
// again; its TestMain must call Main).
type Child struct {
	cmd   *exec.Cmd
	ready chan struct{} // closed when the node printed READY
	done  chan struct{} // closed when the process has exited
	err   error         // the exit status, once done is closed

	mu  sync.Mutex
	log strings.Builder
}

// StartChild starts a child node and waits until it is ready (90 s at the
// most). The test ends it with SIGKILL, if it still runs, when it ends.
func StartChild(t testing.TB, cc ChildConfig) *Child {
	t.Helper()
	c := SpawnChild(t, cc)
	select {
	case <-c.ready:
	case <-c.done:
		t.Fatalf("child node exited before it was ready (%v):\n%s", c.err, c.Log())
	case <-time.After(90 * time.Second):
		t.Fatalf("child node not ready within 90s:\n%s", c.Log())
	}
	return c
}

// SpawnChild starts a child node without waiting for it to be ready: for
// a node that is meant to die while it starts (a failpoint reached by a
// message waiting for it). The test ends it with SIGKILL, if it still
// runs, when it ends.
func SpawnChild(t testing.TB, cc ChildConfig) *Child {
	t.Helper()
	if cc.DataDir == "" {
		cc.DataDir = t.TempDir()
	}
	if cc.NATSListen == "" && cc.NATSURL == "" {
		cc.NATSListen = FreeAddr(t)
	}
	if cc.HTTP == "" {
		cc.HTTP = "off"
	}
	raw, err := json.Marshal(cc)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{cmd: cmd, done: make(chan struct{}), ready: make(chan struct{})}
	ready := c.ready
	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() {
		defer pipes.Done()
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			c.mu.Lock()
			c.log.WriteString(s.Text())
			c.log.WriteByte('\n')
			c.mu.Unlock()
		}
	}()
	go func() {
		defer pipes.Done()
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			if s.Text() == "READY" {
				close(ready)
			}
		}
	}()
	go func() {
		// Wait only after the pipes are read to their end (os/exec's rule).
		pipes.Wait()
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-c.done })
	return c
}

// WaitReady waits until the child is ready, or has exited, or d has
// passed; it returns nil once ready, else why not (with the child's log).
// A test that restarts a child as a supervisor would, starting it again
// after it gave up, uses SpawnChild and WaitReady.
func (c *Child) WaitReady(d time.Duration) error {
	select {
	case <-c.ready:
		return nil
	case <-c.done:
		return fmt.Errorf("child exited before it was ready (%v):\n%s", c.err, c.Tail())
	case <-time.After(d):
		return fmt.Errorf("child not ready within %v:\n%s", d, c.Tail())
	}
}

// Log returns what the child logged so far (its stderr).
func (c *Child) Log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

// Tail returns the last 4,000 bytes of the log.
func (c *Child) Tail() string {
	s := c.Log()
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return s
}

// Signal sends sig to the child.
func (c *Child) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// Done is closed once the child has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// Wait waits until the child has exited and returns its exit status
// (an *exec.ExitError for a signal or a non-zero exit).
func (c *Child) Wait() error {
	<-c.done
	return c.err
}

// Kill ends the child with SIGKILL and waits for it.
func (c *Child) Kill(t testing.TB) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.done
}
