package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
	"github.com/cairn-dev/cairn/cmd/internal/node"
)

// Sizes of the workloads that do not depend on -n.
const (
	entitySize   = 1024  // bytes of JSON per entity, padding included
	partitions   = 1000  // partitions of the single-insert workload
	batchSize    = 100   // entities per transaction, the protocol's maximum
	rangeRows    = 1000  // rows a range query returns
	scanEntities = 10000 // entities of the filtered-scan and memory tables
	scanBuckets  = 100   // values of the Bucket property: a filter on one matches 1%
	writers      = 16    // goroutines of the single-entity workloads
	batchWriters = 16    // transactions in flight
	queryWorkers = 4     // queries in flight
)

// errUnmeasured marks a figure a target cannot provide on this platform; its
// cell shows "-".
var errUnmeasured = errors.New("not measurable here")

// benchHTTP runs the same workloads through the Azure Tables Go SDK against
// Cairn's HTTP API (an in-process host) and against Azurite, the official
// emulator (a child process installed with npm), and prints a table of both
// figures and their ratio.
func benchHTTP(args []string) error {
	fs := flag.NewFlagSet("bench-http", flag.ContinueOnError)
	n := fs.Int("n", 5000, "entities of the insert workloads and of the point-read table, and point reads; the query workloads run n/100 and n/500 queries")
	rounds := fs.Int("rounds", 3, "rounds of each workload; the median is reported")
	only := fs.String("only", "", "run only the workloads whose name contains this text")
	dir := fs.String("azurite-dir", defaultAzuriteDir(), "npm prefix Azurite is installed into and run from")
	noAzurite := fs.Bool("no-azurite", false, "measure Cairn alone")
	noCairn := fs.Bool("no-cairn", false, "measure Azurite alone")
	settle := fs.Duration("settle", 15*time.Second, "wait before each memory reading (after the table's creation, and after loading), so that caches expiring by then (JetStream's block cache: 10s) count in neither")
	client := fs.String("client", "lean", "the client both servers are driven with: lean (a minimal hand-written one, so that the figures are the servers') or sdk (the official Go SDK, whose own CPU dominates on a small machine)")
	warmup := fs.Int("warmup", 300, "n of an uncounted first round of the selected workloads but memory, which warms node's JIT (0: none)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to this file: of the Cairn host's process, or with -cairn-process=false of this one (the host beside the client)")
	heapprofile := fs.String("heapprofile", "", "write heap profiles of the Cairn host's process, recording every allocation, before and after each memory round's load, to this prefix followed by .<table>.before and .after (compare with go tool pprof -diff_base); the host's run is slower")
	inChild := fs.Bool("cairn-process", true, "run the Cairn host in a process of its own, as Azurite is, so that each server's CPU per operation is read from its own process; false: in this process")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench-http: unexpected arguments %q", fs.Args())
	}
	if *n < 1 || *rounds < 1 {
		return errors.New("bench-http: -n and -rounds must be positive")
	}
	hostProfile := *cpuprofile
	if *heapprofile != "" && !*inChild {
		return errors.New("bench-http: -heapprofile needs the host in a process of its own (-cairn-process)")
	}
	if !*inChild {
		stopProfile, err := startCPUProfile(*cpuprofile)
		if err != nil {
			return err
		}
		defer stopProfile()
		hostProfile = ""
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := newTablesClient(*client, "http://127.0.0.1:1/x", nil); err != nil {
		return err
	}
	doer := sharedHTTPClient()

	var cairn, azure *target
	if !*noAzurite {
		t, stop, err := azuriteTarget(ctx, *dir, *client, doer)
		if err != nil {
			return err
		}
		defer stop()
		azure = t
	}
	if !*noCairn {
		t, stop, err := cairnTarget(ctx, *client, doer, *inChild, hostProfile, *heapprofile != "")
		if err != nil {
			return err
		}
		defer stop()
		cairn = t
	}
	if cairn == nil && azure == nil {
		return errors.New("bench-http: neither Cairn nor Azurite to measure")
	}

	desc := "Cairn alone (Azurite skipped)"
	switch {
	case cairn == nil:
		desc = fmt.Sprintf("Azurite %s alone", azuriteVersion)
	case azure != nil:
		desc = fmt.Sprintf("Cairn vs Azurite %s (node %s, in memory)", azuriteVersion, nodeVersion())
	}
	via := "the lean client"
	if *client == "sdk" {
		via = "the Go SDK (aztables)"
	}
	fmt.Printf("# cairn bench-http: %s, through %s; GOMAXPROCS=%d, %s/%s, %s, n=%d, rounds=%d (median)\n\n",
		desc, via, runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), *n, *rounds)
	fmt.Printf("entity: %d bytes of JSON: PartitionKey, RowKey, %d typed properties and a padding string\n\n",
		len(benchEntity(key("p", 0), key("r", 0), 0)), len(entityProperties(0)))
	fmt.Println("| workload | Cairn | Azurite | ratio (Cairn/Azurite) | goal | server CPU per entity: Cairn | Azurite | ratio (Azurite/Cairn) |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	selected := func(w httpWorkload) bool { return *only == "" || strings.Contains(w.name, *only) }
	if *warmup > 0 {
		for _, w := range httpWorkloads(*warmup, *settle, "") {
			if selected(w) && !w.lowerIsBetter {
				if err := w.warmUp(ctx, cairn, azure); err != nil {
					return err
				}
			}
		}
	}
	fl := &floors{client: *client, doer: doer, n: *n, rounds: *rounds, warmup: *warmup}
	printed := map[*floor]bool{}
	for _, w := range httpWorkloads(*n, *settle, *heapprofile) {
		if !selected(w) {
			continue
		}
		c, a, err := w.measure(ctx, *rounds, cairn, azure)
		if err != nil {
			return err
		}
		var f *floor
		if cairn != nil {
			if f, err = fl.of(ctx, w.floor, cairn.pid != 0); err != nil {
				return err
			}
		}
		fmt.Println(w.row(c, a, f))
		if f != nil {
			fmt.Println(w.floorRow(c, f, printed[f]))
			printed[f] = true
		}
		if f != nil && f == fl.write && fl.skeleton != nil {
			fmt.Println(w.skeletonRow(c, fl.skeleton))
		}
		if f != nil && f == fl.read && fl.readSkeleton != nil {
			fmt.Println(w.skeletonRow(c, fl.readSkeleton))
		}
	}
	return nil
}

// azuriteTarget installs Azurite into dir if needed and starts it. When npm
// is missing or the install fails it says so and returns a nil target: the
// Cairn side then runs alone. stop kills the process.
func azuriteTarget(ctx context.Context, dir, client string, doer *http.Client) (t *target, stop func(), err error) {
	if err := installAzurite(ctx, dir); err != nil {
		if ctx.Err() != nil {
			return nil, nil, err
		}
		fmt.Fprintf(os.Stderr, "Azurite skipped: %v; running the Cairn side alone\n", err)
		return nil, func() {}, nil
	}
	fmt.Fprintf(os.Stderr, "bench-http: starting Azurite from %s\n", dir)
	a, err := startAzurite(ctx, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("bench-http: %w", err)
	}
	if t, err = newTarget("Azurite", a.endpoint(httpapi.DevAccountName), client, doer, a.memory); err != nil {
		a.stop()
		return nil, nil, err
	}
	t.pid = a.cmd.Process.Pid
	return t, a.stop, nil
}

// cairnTarget starts a Cairn host, in a child process (inChild, writing
// its CPU profile to cpuprofile when it stops, and recording every
// allocation for its heap profiles with everyAlloc) or in this one; stop
// shuts it down.
func cairnTarget(ctx context.Context, client string, doer *http.Client, inChild bool, cpuprofile string, everyAlloc bool) (t *target, stop func(), err error) {
	if inChild {
		c, err := startCairnChild(ctx, cpuprofile, everyAlloc)
		if err != nil {
			return nil, nil, fmt.Errorf("bench-http: start Cairn: %w", err)
		}
		if t, err = newTarget("Cairn", c.url+"/"+httpapi.DevAccountName, client, doer, c.memory); err != nil {
			c.stop()
			return nil, nil, err
		}
		t.pid = c.cmd.Process.Pid
		t.heapProfile = c.heapProfile
		return t, c.stop, nil
	}
	h, stop, err := startCairn(ctx, "")
	if err != nil {
		return nil, nil, fmt.Errorf("bench-http: start Cairn: %w", err)
	}
	if t, err = newTarget("Cairn", h.HTTPURL()+"/"+httpapi.DevAccountName, client, doer, cairnMemory); err != nil {
		stop()
		return nil, nil, err
	}
	return t, stop, nil
}

// startCairn starts an in-process host with an embedded NATS server in
// dir ("": a new temporary directory, removed by stop) and its HTTP API on
// a free port. stop shuts it down.
func startCairn(ctx context.Context, dir string) (h *node.Node, stop func(), err error) {
	return startCairnConfig(ctx, dir, nil)
}

type nodeConfig = node.Config

// benchNode is an in-process node of a benchmark with a connection to its
// server as the node user.
type benchNode struct {
	h  *node.Node
	nc *nats.Conn
	js jetstream.JetStream
}

// startBenchNode starts the CPU profile (none for ""), a node on a new
// temporary directory and a connection to it; stop undoes them in reverse.
func startBenchNode(ctx context.Context, cpuprofile string, jsOpts ...jetstream.JetStreamOpt) (b *benchNode, stop func(), err error) {
	var undo []func()
	stop = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	stopProfile, err := startCPUProfile(cpuprofile)
	if err != nil {
		return nil, nil, err
	}
	undo = append(undo, stopProfile)
	h, stopNode, err := startCairn(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	undo = append(undo, stopNode)
	nc, err := nats.Connect(h.ClientURL(), nodeCreds...)
	if err != nil {
		return nil, nil, err
	}
	undo = append(undo, nc.Close)
	js, err := jetstream.New(nc, jsOpts...)
	if err != nil {
		return nil, nil, err
	}
	return &benchNode{h: h, nc: nc, js: js}, stop, nil
}

// startCairnConfig is startCairn with changes to the node's config.
func startCairnConfig(ctx context.Context, dir string, change func(*nodeConfig)) (h *node.Node, stop func(), err error) {
	cleanup := func() {}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "cairn-bench-"); err != nil {
			return nil, nil, err
		}
		cleanup = func() { os.RemoveAll(dir) }
	}
	ctx, cancel := context.WithCancel(ctx)
	ready := make(chan *node.Node, 1)
	done := make(chan error, 1)
	cfg := node.Config{DataDir: dir, NATSListen: "127.0.0.1:0", HTTP: "127.0.0.1:0", OutboxSubjects: []string{"benchout.>"},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if change != nil {
		change(&cfg)
	}
	go func() {
		done <- node.Run(ctx, cfg, func(h *node.Node) { ready <- h })
	}()
	select {
	case h = <-ready:
	case err = <-done:
		cancel()
		cleanup()
		return nil, nil, err
	}
	c, err := natsauth.Read(h.NATSCredsFile())
	if err != nil {
		cancel()
		<-done
		cleanup()
		return nil, nil, err
	}
	nodeCreds = c.Options()
	return h, func() { cancel(); <-done; cleanup() }, nil
}

// nodeCreds connect as the node user of the node startCairn started last:
// the benchmarks make streams of their own and answer requests on
// subjects of their own, which a client without credentials may not.
var nodeCreds []nats.Option

// sharedHTTPClient returns the HTTP client both targets' SDK clients send
// through, with enough idle connections for every worker.
func sharedHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: tr}
}

// target is one server under test.
type target struct {
	name   string // "Cairn" or "Azurite"
	client tablesClient
	memory func() (memSample, error) // what the server holds now
	tables int                       // tables created so far, for fresh names
	// heapProfile writes the server's heap profile to a file (nil: it
	// cannot).
	heapProfile func(path string) error
	// pid is the server's process (0: this one, shared with the client:
	// its CPU is not measured).
	pid int
	// cpu is the server's CPU time per unit of the last rate, in
	// microseconds (0: not measured).
	cpu float64
}

// rate is rate, and reads the server process's CPU time before and after:
// t.cpu is then its CPU per unit (entity).
func (t *target) rate(ctx context.Context, workers, n int, perOp float64, op func(context.Context, int) error) (float64, error) {
	t.cpu = 0
	var before time.Duration
	var cpuErr error
	if t.pid != 0 {
		before, cpuErr = processCPU(t.pid)
	}
	r, err := rate(ctx, workers, n, perOp, op)
	if err != nil || t.pid == 0 || cpuErr != nil {
		return r, err
	}
	if after, err := processCPU(t.pid); err == nil && after > before {
		t.cpu = float64(after-before) / float64(time.Microsecond) / (perOp * float64(n))
	}
	return r, nil
}

// present returns the targets that are not nil.
func present(ts ...*target) []*target {
	var out []*target
	for _, t := range ts {
		if t != nil {
			out = append(out, t)
		}
	}
	return out
}

// memSample is the memory of a server at one moment, after a full garbage
// collection.
type memSample struct {
	live uint64 // bytes of live objects: Go heap, or V8 heap plus external
	rss  uint64 // resident set size of the process (0: unknown)
	// What a Cairn host's views hold: entities, views holding only some
	// shards, and the lowest view position.
	entities, partial, seq uint64
}

// newTarget returns a target driven by the client named kind.
func newTarget(name, endpoint, kind string, doer *http.Client, memory func() (memSample, error)) (*target, error) {
	c, err := newTablesClient(kind, endpoint, doer)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &target{name: name, client: c, memory: memory}, nil
}

// cairnMemory returns the live heap of this process after a collection:
// the memory of the in-process Cairn host (and of the idle SDK clients).
func cairnMemory() (memSample, error) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, err := processRSS(os.Getpid())
	if err != nil && !errors.Is(err, errUnmeasured) {
		return memSample{}, err
	}
	return memSample{live: ms.HeapAlloc, rss: rss}, nil
}

// httpWorkload is one row of the table.
type httpWorkload struct {
	name string
	unit string
	// lowerIsBetter: the ratio to Azurite is Azurite/Cairn.
	lowerIsBetter bool
	// floor is what the workload's Cairn figure is also compared with
	// (benchfloor.go): its server CPU per entity, or for memory its bytes
	// per entity. floorGoal is the most that figure may be, as a multiple
	// of the floor's.
	floor     floorKind
	floorGoal float64
	// run loads what the workload needs into table, a fresh table of t,
	// and returns the figure it measures.
	run func(ctx context.Context, t *target, table string) (float64, error)
}

// httpWorkloads returns the workloads; n sizes the insert workloads and the
// number of point reads, settle is the wait before a memory reading, and
// heapprofile the prefix of the heap profiles around it ("": none).
func httpWorkloads(n int, settle time.Duration, heapprofile string) []httpWorkload {
	return []httpWorkload{
		{name: fmt.Sprintf("insert, %d concurrent (AddEntity, %d partitions)", writers, partitions), unit: "entities/s", floor: writeFloor, floorGoal: 1.5,
			run: func(ctx context.Context, t *target, table string) (float64, error) {
				rows := makeRows(n, func(i int) string { return key("p", i%partitions) })
				return t.rate(ctx, writers, n, 1, func(ctx context.Context, i int) error {
					return t.client.Insert(ctx, table, rows[i].body)
				})
			}},
		{name: fmt.Sprintf("upsert, %d concurrent (UpsertEntity replace, %d partitions, half of them new)", writers, partitions), unit: "entities/s", floor: writeFloor, floorGoal: 1.5,
			run: func(ctx context.Context, t *target, table string) (float64, error) {
				rows := makeRows(n, func(i int) string { return key("p", i%partitions) })
				if err := load(ctx, t, table, rows[:n/2]); err != nil {
					return 0, err
				}
				// Every other row replaces one loaded above, the others are new.
				pick := make([]int, n)
				for i := range pick {
					pick[i] = i/2 + (i%2)*(n/2)
				}
				return t.rate(ctx, writers, n, 1, func(ctx context.Context, i int) error {
					r := rows[pick[i]]
					return t.client.Upsert(ctx, table, r.pk, r.rk, r.body)
				})
			}},
		{name: fmt.Sprintf("batch of %d, one partition each, %d concurrent", batchSize, batchWriters), unit: "entities/s",
			run: func(ctx context.Context, t *target, table string) (float64, error) {
				batches := toBatches(makeRows(max(n/batchSize, 1)*batchSize, byBatch))
				return t.rate(ctx, batchWriters, len(batches), batchSize, submitter(t, table, batches))
			}},
		{name: fmt.Sprintf("point read, %d concurrent (GetEntity, random keys)", writers), unit: "entities/s", floor: readFloor, floorGoal: 1.3,
			run: func(ctx context.Context, t *target, table string) (float64, error) {
				rows := makeRows(n, byBatch)
				if err := load(ctx, t, table, rows); err != nil {
					return 0, err
				}
				pick := randomIndexes(n, len(rows))
				return t.rate(ctx, writers, n, 1, func(ctx context.Context, i int) error {
					r := rows[pick[i]]
					return t.client.Get(ctx, table, r.pk, r.rk)
				})
			}},
		{name: fmt.Sprintf("range query, %d rows of one partition, %d concurrent", rangeRows, queryWorkers), unit: "entities/s",
			run: func(ctx context.Context, t *target, table string) (float64, error) {
				// Rows 100 to 1099 of 1200 in partition "p".
				if err := load(ctx, t, table, makeRows(rangeRows+200, func(int) string { return "p" })); err != nil {
					return 0, err
				}
				filter := fmt.Sprintf("PartitionKey eq 'p' and RowKey ge '%s' and RowKey lt '%s'", key("r", 100), key("r", 100+rangeRows))
				return t.rate(ctx, queryWorkers, max(n/100, 5), rangeRows, querier(t, table, filter, rangeRows))
			}},
		{name: fmt.Sprintf("filtered scan of %d entities, 1%% match, %d concurrent", scanEntities, queryWorkers), unit: "entities examined/s",
			run: func(ctx context.Context, t *target, table string) (float64, error) {
				if err := load(ctx, t, table, makeRows(scanEntities, byBatch)); err != nil {
					return 0, err
				}
				filter := fmt.Sprintf("Bucket eq %d", scanBuckets/2)
				return t.rate(ctx, queryWorkers, max(n/50, 20), scanEntities, querier(t, table, filter, scanEntities/scanBuckets))
			}},
		{name: fmt.Sprintf("memory per entity, %d entities (live heap after GC)", scanEntities), unit: "bytes", lowerIsBetter: true, floor: memoryFloor, floorGoal: 1.1,
			run: func(ctx context.Context, t *target, table string) (float64, error) {
				return memoryPerEntity(ctx, t, table, makeRows(scanEntities, byBatch), settle, heapprofile)
			}},
	}
}

// measure runs w rounds times on each target present, a fresh table each
// time, and returns the median figure of each and of its server's CPU
// per unit (0 for an absent target or one that cannot measure it).
func (w httpWorkload) measure(ctx context.Context, rounds int, cairn, azure *target) (c, a figure, err error) {
	figures, cpus := map[*target][]float64{}, map[*target][]float64{}
	for r := 1; r <= rounds; r++ {
		for _, t := range present(cairn, azure) {
			v, err := w.report(ctx, t, fmt.Sprintf("round %d/%d", r, rounds))
			if errors.Is(err, errUnmeasured) {
				continue
			}
			if err != nil {
				return figure{}, figure{}, err
			}
			figures[t] = append(figures[t], v)
			if t.cpu > 0 {
				cpus[t] = append(cpus[t], t.cpu)
			}
		}
	}
	return figure{medianOrZero(figures[cairn]), medianOrZero(cpus[cairn])},
		figure{medianOrZero(figures[azure]), medianOrZero(cpus[azure])}, nil
}

// figure is a target's median result of a workload and its server's
// median CPU per unit, in microseconds (0: not measured).
type figure struct{ v, cpu float64 }

// warmUp runs w once on each target present, uncounted.
func (w httpWorkload) warmUp(ctx context.Context, cairn, azure *target) error {
	for _, t := range present(cairn, azure) {
		if _, err := w.report(ctx, t, "warm-up"); err != nil && !errors.Is(err, errUnmeasured) {
			return err
		}
	}
	return nil
}

// report runs w once on t with progress lines on stderr, and names the
// workload and the target in its error.
func (w httpWorkload) report(ctx context.Context, t *target, round string) (float64, error) {
	fmt.Fprintf(os.Stderr, "bench-http: %s: %s on %s\n", w.name, round, t.name)
	v, err := w.once(ctx, t)
	switch {
	case errors.Is(err, errUnmeasured):
		fmt.Fprintf(os.Stderr, "bench-http:   %s: %v\n", t.name, err)
		return 0, err
	case err != nil:
		return 0, fmt.Errorf("bench-http: workload %q on %s: %w", w.name, t.name, err)
	}
	if t.cpu > 0 {
		fmt.Fprintf(os.Stderr, "bench-http:   %s: %s, server CPU %.2f µs per entity\n", t.name, w.cell(v), t.cpu)
	} else {
		fmt.Fprintf(os.Stderr, "bench-http:   %s: %s\n", t.name, w.cell(v))
	}
	return v, nil
}

// once creates a fresh table on t, runs w on it and deletes the table, so
// that no round weighs on the next.
func (w httpWorkload) once(ctx context.Context, t *target) (float64, error) {
	t.cpu = 0 // a workload without a rate measures none
	t.tables++
	name := fmt.Sprintf("bench%d", t.tables)
	if err := t.client.CreateTable(ctx, name); err != nil {
		return 0, fmt.Errorf("create table %s: %w", name, err)
	}
	v, err := w.run(ctx, t, name)
	if err != nil {
		return 0, err
	}
	if err := t.client.DeleteTable(ctx, name); err != nil {
		return 0, fmt.Errorf("delete table %s: %w", name, err)
	}
	return v, nil
}

// row formats the table row of w from the two medians (0: not measured)
// and, with a floor, Cairn's figure's multiple of it.
func (w httpWorkload) row(c, a figure, f *floor) string {
	cairn, azure := c.v, a.v
	cairnCell, cairnCPU := w.cell(cairn), cpuCell(c.cpu)
	if r := w.ofFloor(c, f); r > 0 {
		if w.floor == memoryFloor {
			cairnCell += fmt.Sprintf(" (%.2f× encoded)", r)
		} else {
			cairnCPU += fmt.Sprintf(" (%.2f× floor)", r)
		}
	}
	cpuRatio := "-"
	if c.cpu > 0 && a.cpu > 0 {
		cpuRatio = fmt.Sprintf("%.1f×", a.cpu/c.cpu)
	}
	// The goals against Azurite are withdrawn: a row's goal is its
	// floor's, in the row below it.
	ratio := "-"
	if cairn > 0 && azure > 0 {
		ratio = fmt.Sprintf("%.1f×", cairn/azure)
		if w.lowerIsBetter {
			ratio = fmt.Sprintf("%.1f× (Azurite/Cairn)", azure/cairn)
		}
	}
	goal := ""
	if w.floor != noFloor {
		goal = "the floor's, below"
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s |", w.name, cairnCell, w.cell(azure), ratio, goal, cairnCPU, cpuCell(a.cpu), cpuRatio)
}

// ofFloor returns Cairn's figure as a multiple of the floor's: server CPU
// per entity, or bytes per entity for memory (0: either is missing).
func (w httpWorkload) ofFloor(c figure, f *floor) float64 {
	switch {
	case f == nil:
		return 0
	case w.floor == memoryFloor && c.v > 0 && f.bytes > 0:
		return c.v / f.bytes
	case w.floor != memoryFloor && c.cpu > 0 && f.cpu > 0:
		return c.cpu / f.cpu
	}
	return 0
}

// floorRow formats the row of f below w's: the floor's figures, Cairn's
// multiple of it in the ratio column and the goal (floorGoal) met or not;
// again names a floor printed before by its short name.
func (w httpWorkload) floorRow(c figure, f *floor, again bool) string {
	name := f.name
	if again && f.short != "" {
		name = f.short
	}
	of := "floor"
	if w.floor == memoryFloor {
		of = "encoded"
	}
	want := fmt.Sprintf("≤ %.1f× %s", w.floorGoal, of)
	ratio, goal := "-", want
	if r := w.ofFloor(c, f); r > 0 {
		ratio, goal = fmt.Sprintf("%.2f× (Cairn/%s)", r, of), verdict(want, r <= w.floorGoal)
	}
	if w.floor == memoryFloor {
		return fmt.Sprintf("| %s | %.0f bytes | - | %s | %s | - | - | - |", name, f.bytes, ratio, goal)
	}
	return fmt.Sprintf("| %s | %.0f entities/s | - | %s | %s | %s | - | - |", name, f.rate, ratio, goal, cpuCell(f.cpu))
}

// skeletonRow formats the row of the insert or the point read with the
// protocol's work and no Cairn code below w's floor row: its figures and
// Cairn's multiple of its CPU per entity, which no goal bounds.
func (w httpWorkload) skeletonRow(c figure, s *floor) string {
	ratio := "-"
	if c.cpu > 0 && s.cpu > 0 {
		ratio = fmt.Sprintf("%.2f× (Cairn/it)", c.cpu/s.cpu)
	}
	return fmt.Sprintf("| %s | %.0f entities/s | - | %s | | %s | - | - |", s.name, s.rate, ratio, cpuCell(s.cpu))
}

// cpuCell formats CPU per entity in microseconds ("-": not measured).
func cpuCell(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f µs", v)
}

func (w httpWorkload) cell(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f %s", v, w.unit)
}

func medianOrZero(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return median(xs)
}

// memoryPerEntity loads rows into tc and returns how much more live memory
// t holds settle after, per entity. The first reading, too, comes settle
// after what went before (the table's creation, the last round), so that
// both find the caches that expire by then expired: a JetStream block
// cache still held at the first reading made the growth look 26 bytes an
// entity smaller. The growth of its resident set, which also counts
// memory the runtime keeps but does not use, is printed to stderr. With a
// profile prefix, t's heap profiles after each reading are written to
// profile.<table>.before and .after.
func memoryPerEntity(ctx context.Context, t *target, table string, rows []benchRow, settle time.Duration, profile string) (float64, error) {
	// Built before the first reading and kept alive past the second, so
	// that the client's own data is in both.
	batches := toBatches(rows)
	heap := func(when string) error {
		if profile == "" || t.heapProfile == nil {
			return nil
		}
		path := profile + "." + table + "." + when
		fmt.Fprintf(os.Stderr, "bench-http: %s: heap profile %s\n", t.name, path)
		return t.heapProfile(path)
	}
	if err := sleep(ctx, settle); err != nil {
		return 0, err
	}
	before, err := settledMemory(ctx, t)
	if err == nil {
		err = heap("before")
	}
	if err != nil {
		return 0, err
	}
	if err := parallel(ctx, batchWriters, len(batches), submitter(t, table, batches)); err != nil {
		return 0, err
	}
	if err := sleep(ctx, settle); err != nil {
		return 0, err
	}
	after, err := settledMemory(ctx, t)
	if err == nil {
		err = heap("after")
	}
	if err != nil {
		return 0, err
	}
	runtime.KeepAlive(batches)
	per := func(b, a uint64) float64 { return (float64(a) - float64(b)) / float64(len(rows)) }
	if before.rss > 0 && after.rss > 0 {
		fmt.Fprintf(os.Stderr, "bench-http: %s: resident set grew by %.0f bytes per entity (%d MiB now)\n",
			t.name, per(before.rss, after.rss), after.rss>>20)
	}
	return per(before.live, after.live), nil
}

// settledMemory samples the memory of t every 250 ms until two samples in
// a row agree within 1%, at most for 5 s: the first collection after a
// burst of requests may still find some of the burst's objects reachable
// (V8 does, for one).
func settledMemory(ctx context.Context, t *target) (memSample, error) {
	prev, err := t.memory()
	for i := 0; i < 20 && err == nil; i++ {
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return memSample{}, err
		}
		var cur memSample
		if cur, err = t.memory(); err == nil && math.Abs(float64(cur.live)-float64(prev.live)) <= float64(prev.live)/100 {
			return cur, nil
		}
		prev = cur
	}
	return prev, err
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// benchRow is an entity to write, with its keys.
type benchRow struct {
	pk, rk string
	body   []byte // the entity's JSON
}

// key returns prefix followed by i in 7 digits, so that keys sort as
// their numbers do.
func key(prefix string, i int) string { return fmt.Sprintf("%s%07d", prefix, i) }

// byBatch puts every batchSize consecutive rows in a partition of their own.
func byBatch(i int) string { return key("p", i/batchSize) }

// makeRows returns n entities, row i in partition pk(i) with row key r<i>.
// Rows of one transaction must share a partition: see toBatches.
func makeRows(n int, pk func(i int) string) []benchRow {
	rows := make([]benchRow, n)
	for i := range rows {
		p, r := pk(i), key("r", i)
		rows[i] = benchRow{pk: p, rk: r, body: benchEntity(p, r, i)}
	}
	return rows
}

// padding fills entities up to entitySize bytes.
var padding = strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", entitySize/32)

// entityProperties returns the properties of entity number i but its
// padding: strings, an Int32, a Double, a DateTime, an Int64 and Bucket (i
// modulo scanBuckets, for the filtered scan).
func entityProperties(i int) map[string]any {
	return map[string]any{
		"Name":       "Jones, Margaret Anne (Sales)",
		"Email":      "margaret.jones@contoso.example",
		"Department": "Sales",
		"City":       "Springfield",
		"Age":        int32(20 + i%50),
		"Salary":     50000.25 + float64(i%1000), // the fraction keeps it a Double
		"Hired":      aztables.EDMDateTime(time.Date(2012, 3, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)),
		"Serial":     aztables.EDMInt64(i),
		"Bucket":     int32(i % scanBuckets),
	}
}

// benchEntity returns the JSON of entity number i: its properties and a
// Notes string padding it to about entitySize bytes.
func benchEntity(pk, rk string, i int) []byte {
	props := entityProperties(i)
	props["Notes"] = ""
	e := aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: pk, RowKey: rk}, Properties: props}
	b := mustMarshal(e)
	props["Notes"] = padding[:max(entitySize-len(b), 0)]
	return mustMarshal(e)
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the entities are built above: a bug
	}
	return b
}

// toBatches groups rows into insert transactions of up to batchSize rows,
// cutting wherever the partition changes.
func toBatches(rows []benchRow) [][][]byte {
	var out [][][]byte
	for i, r := range rows {
		if i == 0 || len(out[len(out)-1]) == batchSize || r.pk != rows[i-1].pk {
			out = append(out, make([][]byte, 0, batchSize))
		}
		out[len(out)-1] = append(out[len(out)-1], r.body)
	}
	return out
}

// submitter returns an operation submitting batches[i] to table.
func submitter(t *target, table string, batches [][][]byte) func(context.Context, int) error {
	return func(ctx context.Context, i int) error { return t.client.Batch(ctx, table, batches[i]) }
}

// load inserts rows into table with transactions, batchWriters in flight.
func load(ctx context.Context, t *target, table string, rows []benchRow) error {
	batches := toBatches(rows)
	if err := parallel(ctx, batchWriters, len(batches), submitter(t, table, batches)); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	return nil
}

// querier returns an operation that pages through the entities of table
// matching filter and fails unless there are want of them.
func querier(t *target, table, filter string, want int) func(context.Context, int) error {
	return func(ctx context.Context, _ int) error {
		got, err := t.client.Query(ctx, table, filter)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("query %q returned %d entities, want %d", filter, got, want)
		}
		return nil
	}
}

// randomIndexes returns n indexes below size, the same on every run.
func randomIndexes(n, size int) []int {
	rnd := rand.New(rand.NewPCG(1, 2))
	out := make([]int, n)
	for i := range out {
		out[i] = rnd.IntN(size)
	}
	return out
}

// rate runs op for 0 ≤ i < n on workers goroutines and returns perOp
// units per second of the whole run.
func rate(ctx context.Context, workers, n int, perOp float64, op func(context.Context, int) error) (float64, error) {
	start := time.Now()
	if err := parallel(ctx, workers, n, op); err != nil {
		return 0, err
	}
	return perOp * float64(n) / time.Since(start).Seconds(), nil
}

// parallel runs op for 0 ≤ i < n on workers goroutines, each taking the
// next i, and returns the first error, after which no new op starts.
func parallel(ctx context.Context, workers, n int, op func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := op(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// processRSS reads the resident set size of a process from /proc.
func processRSS(pid int) (uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errUnmeasured, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("pid %d: VmRSS %q: %v", pid, rest, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%w: no VmRSS for pid %d", errUnmeasured, pid)
}
