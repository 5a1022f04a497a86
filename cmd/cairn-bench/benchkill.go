package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/journal"
)

// benchKill measures a node's start after SIGKILL under a write load, at
// the node's default settings: a node runs as a child process (this
// binary again, "node-child"), a loader appends the table's history to
// its journal (every entity written -updates times, one record per
// write), and the child is killed with SIGKILL once the loader has
// written -kill-at of the last round, while the loader goes on writing.
// The child is started again on its data directory and the figure is the
// time from that start to the first read that answers. The floor is the
// same start after a clean stop (SIGTERM: the views write their snapshot
// on stop, so nothing is left to replay), measured right after on the
// same data: what the platform allows for a table of that size (the
// embedded server's recovery of its store and loading the table's
// snapshot).
func benchKill(args []string) error {
	fs := flag.NewFlagSet("start -kill", flag.ContinueOnError)
	fs.Bool("kill", true, "this mode")
	entities := fs.Int("entities", 200_000, "entities in the table")
	updates := fs.Int("updates", 4, "times each entity is written in the longer history (the shorter: once)")
	rounds := fs.Int("rounds", 3, "kills of each history, each on a new data directory; the median is reported")
	valueBytes := fs.Int("value-bytes", 0, "pad each entity's Notes property so that its values take about this many bytes (0: about 150, unpadded)")
	killAt := fs.Float64("kill-at", 0.95, "fraction of the last round written when the child is killed")
	childArgs := fs.String("child-flags", "", "flags of the child node, space-separated (-snapshots=false, -snapshot-every N, …)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *killAt <= 0 || *killAt > 1 {
		return errors.New("-kill-at is a fraction in (0, 1]")
	}
	fmt.Printf("# cairn bench start -kill: GOMAXPROCS=%d, %s/%s, %s, entities=%d of about %d bytes of values, killed at %.0f%% of the last round, rounds=%d (median), child flags %q\n\n",
		runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), *entities, max(*valueBytes, 150), 100**killAt, *rounds, *childArgs)
	fmt.Println("| history | records at the kill | ready after SIGKILL | of which JetStream up (the server's recovery) | views' part | replayed after the snapshot | floor: ready after a clean stop | ratio to the floor |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	histories := []int{1}
	if *updates > 1 {
		histories = append(histories, *updates)
	}
	var byHistory, viewsByHistory []float64
	for _, u := range histories {
		var ready, jsUp, views, floor []float64
		var replayed []string
		var records uint64
		for r := 0; r < *rounds; r++ {
			res, err := killRound(*entities, u, *valueBytes, *killAt, strings.Fields(*childArgs))
			if err != nil {
				return err
			}
			ready = append(ready, res.ready.Seconds())
			jsUp = append(jsUp, res.jsUp.Seconds())
			views = append(views, (res.ready - res.jsUp).Seconds())
			floor = append(floor, res.floor.Seconds())
			replayed = append(replayed, res.replayed)
			records = res.records
		}
		fmt.Printf("| %d× (%d entities) | %d | %.2f s | %.2f s | %.2f s | %s | %.2f s | %.2f |\n",
			u, *entities, records, median(ready), median(jsUp), median(views), strings.Join(replayed, ", "), median(floor), median(ready)/median(floor))
		byHistory = append(byHistory, median(ready))
		viewsByHistory = append(viewsByHistory, median(views))
	}
	if len(byHistory) == 2 {
		fmt.Printf("\nready after SIGKILL, %d× against 1×: %.2f; the views' part (ready less JetStream up), %d× against 1×: %.2f\n",
			*updates, byHistory[1]/byHistory[0], *updates, viewsByHistory[1]/viewsByHistory[0])
	}
	return nil
}

// loaderAppendTimeout bounds one append of the loader: a node killed
// fails it at once, a slow one must not.
const loaderAppendTimeout = time.Minute

// killResult is one round of benchKill.
type killResult struct {
	records  uint64        // journal records when the child was killed
	ready    time.Duration // from the start after the kill to the first read answered
	jsUp     time.Duration // of which until the node had JetStream (the server's recovery of its store)
	replayed string        // what the child's log says it replayed after its snapshot
	floor    time.Duration // the same after a clean stop
}

// killRound writes a history of u rounds on a new node child, kills it at
// killAt of the last round and measures its start, then its start after a
// clean stop.
func killRound(entities, u, valueBytes int, killAt float64, childArgs []string) (killResult, error) {
	var res killResult
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "cairn-bench-kill-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	addr, err := freeLoopback()
	if err != nil {
		return res, err
	}
	child, err := startNodeChild(dir, addr, childArgs)
	if err != nil {
		return res, err
	}
	defer child.kill()
	// The loader's connection dies with the child: no line per failed write.
	nc, err := nats.Connect("nats://"+addr, append(child.creds, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}), nats.NoReconnect())...)
	if err != nil {
		return res, err
	}
	defer nc.Close()
	// The loader saturates the node on purpose: an acknowledgement may
	// take seconds (a base being written, the collector), and a loader's
	// append is not retried.
	j, err := journal.New(nc, journal.Config{AppendTimeout: loaderAppendTimeout})
	if err != nil {
		return res, err
	}
	const table = "KillBench"
	epoch, err := j.AppendCatalog(ctx, &engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: table, Time: engine.TimeToTicks(time.Now())}, 0)
	if err != nil {
		return res, err
	}
	if err := j.EnsureTableStream(ctx, table, epoch); err != nil {
		return res, err
	}
	w := &historyWriter{j: j, table: table, epoch: epoch, entities: entities, last: make([]uint64, historyPartitions), pad: strings.Repeat("x", max(valueBytes-150, 0))}
	for r := 1; r < u; r++ {
		if err := w.round(ctx, r); err != nil {
			return res, err
		}
	}
	// The last round, killed on its way.
	target := uint64(u-1)*uint64(entities) + uint64(killAt*float64(entities))
	wctx, stopWriting := context.WithCancel(ctx)
	defer stopWriting()
	written := make(chan error, 1)
	go func() { written <- w.round(wctx, u) }()
	for w.appended.Load() < target {
		select {
		case err := <-written:
			if err != nil {
				return res, err
			}
			return res, fmt.Errorf("the last round ended before %d records", target)
		case <-time.After(time.Millisecond):
		}
	}
	child.kill()
	res.records = w.appended.Load()
	stopWriting()
	<-written // failed with the server: the loader's connection went with it
	nc.Close()

	start := time.Now()
	child, err = startNodeChild(dir, addr, childArgs)
	if err != nil {
		return res, err
	}
	if err := firstRead(ctx, addr, child.creds, table, "p000", "r00000000"); err != nil {
		return res, fmt.Errorf("%w\n%s", err, child.tail())
	}
	res.ready = time.Since(start)
	res.replayed = replayedLine(child.log())
	if at, ok := phaseAt(start, child.log(), phaseLines[0].msg); ok {
		res.jsUp = at
	}
	fmt.Fprintf(os.Stderr, "after the kill: %s\n", startPhases(start, child.log()))

	if err := child.stop(); err != nil {
		return res, err
	}
	start = time.Now()
	child, err = startNodeChild(dir, addr, childArgs)
	if err != nil {
		return res, err
	}
	if err := firstRead(ctx, addr, child.creds, table, "p000", "r00000000"); err != nil {
		return res, fmt.Errorf("%w\n%s", err, child.tail())
	}
	res.floor = time.Since(start)
	fmt.Fprintf(os.Stderr, "after a clean stop: %s\n", startPhases(start, child.log()))
	fmt.Fprintf(os.Stderr, "kill round: %d× %d entities, %d records at the kill: ready %v after the kill (%s), %v after a clean stop\n",
		u, entities, res.records, res.ready.Round(time.Millisecond), res.replayed, res.floor.Round(time.Millisecond))
	return res, child.stop()
}

// firstRead retrieves the entity (pk, rk) of table through the node at
// addr until one read answers (10 minutes at most): a new connection
// while the server is not up yet, a retry while no node answers.
func firstRead(ctx context.Context, addr string, creds []nats.Option, table, pk, rk string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	// Tries are this far apart: far below the figures measured (a second
	// and more), far above what a try costs the node.
	const pollEvery = 5 * time.Millisecond
	var last error
	for ctx.Err() == nil {
		nc, err := nats.Connect("nats://"+addr, append(creds, nats.Timeout(time.Second))...)
		if err == nil {
			cl := client.New(nc, client.WithTimeout(time.Second), client.WithAttempts(1))
			for ctx.Err() == nil && nc.IsConnected() {
				_, _, err = cl.Retrieve(ctx, table, pk, rk)
				if err == nil {
					nc.Close()
					return nil
				}
				last = err
				time.Sleep(pollEvery)
			}
			nc.Close()
		} else {
			last = err
		}
		time.Sleep(pollEvery)
	}
	return fmt.Errorf("no read of %s answered: %v", table, last)
}

// replayLine matches the view's replay line of the benchmark's table
// (projections' "view replayed").
var replayLine = regexp.MustCompile(`msg="view replayed" table=KillBench records=(\d+) from_snapshot=(\d+)`)

// replayedLine says what the child's log says it replayed.
func replayedLine(log string) string {
	m := replayLine.FindStringSubmatch(log)
	if m == nil {
		return "(no replay line)"
	}
	return fmt.Sprintf("%s records after position %s", m[1], m[2])
}

// phaseLines are the log lines that mark a node's start, in order: the
// first line, the embedded server and JetStream up (the views start), the
// snapshots loaded, the views ready.
var phaseLines = []struct{ name, msg string }{
	{"JetStream up", `msg="replaying the journal into the views"`},
	{"snapshot loaded", `msg="snapshot loaded" table=KillBench`},
	{"chain loaded", `msg="snapshot chain loaded" table=KillBench`},
	{"views ready", `msg="views ready"`},
}

// startPhases says when each phase of a start ended, from the times of
// the child's log lines, counted from start, when the child was started:
// "JetStream up" includes the embedded server's recovery of its store,
// which grows with the journal, what follows is the views'.
func startPhases(start time.Time, log string) string {
	var out []string
	for _, p := range phaseLines {
		if at, ok := phaseAt(start, log, p.msg); ok {
			out = append(out, fmt.Sprintf("%s +%.2f s", p.name, at.Seconds()))
		}
	}
	return strings.Join(out, ", ")
}

// phaseAt is the time of the first log line holding msg, counted from
// start.
func phaseAt(start time.Time, log, msg string) (time.Duration, bool) {
	for line := range strings.Lines(log) {
		if !strings.Contains(line, msg) {
			continue
		}
		f, ok := strings.CutPrefix(line, "time=")
		if !ok {
			return 0, false
		}
		ts, err := time.Parse(time.RFC3339Nano, strings.Fields(f)[0])
		return ts.Sub(start), err == nil
	}
	return 0, false
}

// nodeChild is a node of benchKill in a child process.
type nodeChild struct {
	cmd    *exec.Cmd
	creds  []nats.Option
	exited chan struct{}

	mu  sync.Mutex
	buf strings.Builder // its log (stderr)
}

// startNodeChild starts this binary as a node on dir with its embedded
// server on addr, and waits until it serves.
func startNodeChild(dir, addr string, flags []string) (*nodeChild, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := &nodeChild{exited: make(chan struct{})}
	c.cmd = exec.Command(self, append([]string{"node-child", "-data", dir, "-nats", addr}, flags...)...)
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the node child: %w", err)
	}
	var pipes sync.WaitGroup
	pipes.Add(1)
	go func() {
		defer pipes.Done()
		s := bufio.NewScanner(stderr)
		s.Buffer(nil, 1<<20)
		for s.Scan() {
			c.mu.Lock()
			c.buf.WriteString(s.Text())
			c.buf.WriteByte('\n')
			c.mu.Unlock()
		}
	}()
	lines := bufio.NewReader(stdout)
	line, err := lines.ReadString('\n')
	go func() {
		_, _ = io.Copy(io.Discard, lines)
		pipes.Wait()
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	credsFile, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if err != nil || !ok {
		c.kill()
		return nil, fmt.Errorf("the node child did not start: %q %v\n%s", line, err, c.tail())
	}
	creds, err := natsauth.Read(credsFile)
	if err != nil {
		c.kill()
		return nil, err
	}
	c.creds = creds.Options()
	return c, nil
}

func (c *nodeChild) log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// tail is the end of the child's log, for an error.
func (c *nodeChild) tail() string {
	s := c.log()
	const tailBytes = 4000
	if len(s) > tailBytes {
		s = s[len(s)-tailBytes:]
	}
	return s
}

// kill ends the child with SIGKILL and waits for it (nothing if it exited).
func (c *nodeChild) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
}

// stop ends the child with SIGTERM (a clean stop: the views write their
// snapshots) and waits for it.
func (c *nodeChild) stop() error {
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	<-c.exited
	if err := c.cmd.ProcessState; err != nil && !err.Success() {
		return fmt.Errorf("the node child exited with %v after SIGTERM:\n%s", err, c.tail())
	}
	return nil
}

// nodeChildMain runs a node for benchKill until SIGTERM: the data
// directory and the embedded server's address from the flags, the rest
// at its defaults, or as a host's flags set them (those benchKill's
// -child-flags names). It prints "ready <credentials file>" once the node
// serves, and logs to stderr.
func nodeChildMain(args []string) error {
	fs := flag.NewFlagSet("node-child", flag.ContinueOnError)
	dir := fs.String("data", "", "data directory")
	addr := fs.String("nats", "", "embedded server's client address")
	noSnapshots := fs.Bool("snapshots", true, "write the views' snapshots")
	every := fs.Int("snapshot-every", 0, "the views' Config.SnapshotEvery (0: the default)")
	bytes := fs.Int64("snapshot-bytes", 0, "the views' Config.SnapshotBytes (0: the default)")
	interval := fs.Duration("snapshot-interval", 0, "the views' Config.SnapshotInterval (0: the default)")
	compact := fs.Float64("snapshot-compact", 0, "the views' Config.SnapshotCompact (0: the default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg := node.Config{DataDir: *dir, NATSListen: *addr, HTTP: "off", NoSnapshots: !*noSnapshots,
		Log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	cfg.Views.SnapshotEvery, cfg.Views.SnapshotBytes, cfg.Views.SnapshotInterval, cfg.Views.SnapshotCompact = *every, *bytes, *interval, *compact
	return node.Run(ctx, cfg, func(n *node.Node) { fmt.Printf("ready %s\n", n.NATSCredsFile()) })
}

// freeLoopback returns a loopback address with a port free now.
func freeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
