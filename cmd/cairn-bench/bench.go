package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/projections"
)

// bench runs the end-to-end benchmarks against an in-process host with an
// embedded server in a temporary directory, and prints each figure next to
// the raw JetStream figure measured in the same run.
func bench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	n := fs.Int("n", 50000, "commands per throughput workload")
	window := fs.Int("window", 512, "commands in flight per workload")
	rounds := fs.Int("rounds", 3, "rounds of each workload; the median is reported")
	dir := fs.String("dir", "", "data directory (default: a new temporary directory, removed afterwards)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (client, server and host share the process) to this file")
	memprofile := fs.String("memprofile", "", "write a profile of the run's allocations (every goroutine of the process) to this file when it ends")
	only := fs.String("only", "", "run only the workloads whose name contains this text")
	pacedAt := fs.String("paced-at", "0.5", "fractions of the many-partition rate to send the open-loop latency rounds at, comma-separated (the goal is read at 0.5)")
	tracePaced := fs.String("trace", "", "write a runtime trace of Cairn's open-loop rounds at each -paced-at fraction to this prefix followed by .<fraction> (go tool trace)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	fractions, err := parseFractions(*pacedAt)
	if err != nil {
		return fmt.Errorf("bench: -paced-at: %w", err)
	}
	stopProfile, err := startCPUProfile(*cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	if *memprofile != "" {
		defer func() {
			if err := writeAllocsProfile(*memprofile); err != nil {
				fmt.Fprintln(os.Stderr, "bench: -memprofile:", err)
			}
		}()
	}
	// Measured before the server starts: its block caches fill and expire
	// on their own schedule and would blur a heap measurement.
	memPerEntity, err := viewMemory(50000)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, stop, err := startCairn(ctx, *dir)
	if err != nil {
		return err
	}
	defer stop()
	nc, err := nats.Connect(h.ClientURL(), nodeCreds...)
	if err != nil {
		return err
	}
	defer nc.Close()
	dev, err := nats.Connect(h.ClientURL())
	if err != nil {
		return err
	}
	defer dev.Close()
	b := &bencher{nc: nc, dev: dev, cl: client.New(nc), n: *n, window: *window, rounds: *rounds, only: *only, memPerEntity: memPerEntity, pacedAt: fractions, tracePaced: *tracePaced}
	fmt.Printf("# cairn bench: GOMAXPROCS=%d, %s/%s, %s, n=%d, window=%d, rounds=%d (median)\n\n",
		runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), *n, *window, *rounds)
	return b.run(ctx, h)
}

// startCPUProfile writes a CPU profile to path until stop is called ("":
// none).
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// writeAllocsProfile writes the allocations made since the process
// started (sampled) to path.
func writeAllocsProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

type bencher struct {
	nc  *nats.Conn // the node user's
	dev *nats.Conn // a client without credentials

	cl     *client.Client
	n      int
	window int
	rounds int
	table  int
	only   string

	memPerEntity float64
	pacedAt      []float64 // -paced-at: the open-loop rounds' fractions of the peak
	tracePaced   string    // -trace: the prefix of the open-loop rounds' runtime traces
}

// sampleEntity is a ~1 KB entity of ten properties.
func sampleEntity(pk, rk string) *engine.Entity {
	return engine.NewEntity(pk, rk,
		engine.Property{Name: "Name", Value: engine.String("Jones, Margaret Anne (Sales)")},
		engine.Property{Name: "Email", Value: engine.String("margaret.jones@contoso.example")},
		engine.Property{Name: "Department", Value: engine.String("Sales")},
		engine.Property{Name: "Address", Value: engine.String(strings.Repeat("12 Market Street, ", 10))},
		engine.Property{Name: "Notes", Value: engine.String(strings.Repeat("quarterly review notes ", 26))},
		engine.Property{Name: "Age", Value: engine.Int32(38)},
		engine.Property{Name: "Salary", Value: engine.Double(72150.5)},
		engine.Property{Name: "Hired", Value: engine.DateTime(time.Date(2012, 3, 1, 9, 0, 0, 0, time.UTC))},
		engine.Property{Name: "Id", Value: engine.Guid([16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})},
		engine.Property{Name: "Active", Value: engine.Bool(true)},
	)
}

func (b *bencher) newTable(ctx context.Context, name string) (string, error) {
	b.table++
	t := fmt.Sprintf("%s%d", name, b.table)
	_, err := b.cl.CreateTable(ctx, t)
	return t, err
}

type result struct {
	rate      float64 // operations per second
	latencies []time.Duration
}

// pipelined sends n requests with at most window in flight, each built by
// req(i), and measures the rate and each request's latency.
func (b *bencher) pipelined(nc *nats.Conn, n, window int, subject string, req func(i int) *engine.Request) (result, error) {
	return b.send(nc, n, window, 0, subject, req)
}

// paceTick is how often a paced run sends the requests that are due: at
// 15,000 requests/s, 15 a tick.
const paceTick = time.Millisecond

// send sends n requests with at most window in flight, each built by
// req(i), and measures the rate and each request's latency from its send
// to its reply. A rate above 0 paces the sends: every paceTick it sends
// those due by then at rate requests/s, answered or not (open loop when
// window is n).
func (b *bencher) send(nc *nats.Conn, n, window int, rate float64, subject string, req func(i int) *engine.Request) (result, error) {
	bodies, err := encodeRequests(n, req)
	if err != nil {
		return result{}, err
	}
	return sendBodies(nc, bodies, window, rate, func(int) string { return subject }, func(data []byte) error {
		rep, err := wire.DecodeReplyMsgpack(data)
		if err == nil && rep.Error != nil {
			err = rep.Error
		}
		return err
	})
}

// encodeRequests returns requests 0 to n-1 of req, encoded.
func encodeRequests(n int, req func(i int) *engine.Request) ([][]byte, error) {
	bodies := make([][]byte, n)
	for i := range bodies {
		body, err := wire.EncodeRequestMsgpack(req(i))
		if err != nil {
			return nil, err
		}
		bodies[i] = body
	}
	return bodies, nil
}

// sendBodies is send for messages made beforehand: bodies[i] goes to
// subject(i), and check says whether its reply tells of a failure.
func sendBodies(nc *nats.Conn, bodies [][]byte, window int, rate float64, subject func(i int) string, check func([]byte) error) (result, error) {
	n := len(bodies)
	inbox := "_INBOX.bench." + nuid.Next() + "."
	starts := make([]time.Time, n)
	lat := make([]time.Duration, n)
	sem := make(chan struct{}, window)
	var wg sync.WaitGroup
	var errs atomic.Int64
	var firstErr atomic.Value
	sub, err := nc.Subscribe(inbox+"*", func(m *nats.Msg) {
		i, _ := strconv.Atoi(m.Subject[len(inbox):])
		lat[i] = time.Since(starts[i])
		if err := check(m.Data); err != nil {
			if errs.Add(1) == 1 {
				firstErr.Store(err.Error())
			}
		}
		<-sem
		wg.Done()
	})
	if err != nil {
		return result{}, err
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)
	var tick <-chan time.Time
	if rate > 0 {
		t := time.NewTicker(paceTick)
		defer t.Stop()
		tick = t.C
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		for rate > 0 && float64(i) > rate*time.Since(start).Seconds() {
			<-tick
		}
		sem <- struct{}{}
		wg.Add(1)
		starts[i] = time.Now()
		if err := nc.PublishRequest(subject(i), inbox+strconv.Itoa(i), bodies[i]); err != nil {
			return result{}, err
		}
	}
	wg.Wait()
	el := time.Since(start)
	if e := errs.Load(); e > 0 {
		return result{}, fmt.Errorf("%d of %d requests failed, first: %v", e, n, firstErr.Load())
	}
	return result{rate: float64(n) / el.Seconds(), latencies: lat}, nil
}

// rawPublish measures async JetStream publishing of n messages of size
// bytes to per-partition subjects: the physical anchor of every ratio.
func (b *bencher) rawPublish(ctx context.Context, n, size, partitions int) (float64, error) {
	js, err := jetstream.New(b.nc, jetstream.WithPublishAsyncMaxPending(4000))
	if err != nil {
		return 0, err
	}
	name := "BENCHRAW" + strconv.Itoa(b.table)
	b.table++
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"benchraw." + name + ".>"}, Storage: jetstream.FileStorage}); err != nil {
		return 0, err
	}
	defer js.DeleteStream(ctx, name)
	return rawAppend(js, "benchraw."+name+".p", make([]byte, size), n, partitions)
}

// manyPartitionRequest is request i of the many-partition inserts: the
// sample entity in partition i modulo pacedPartitions.
func manyPartitionRequest(i int) *engine.Request {
	return &engine.Request{Op: "Insert", Entity: sampleEntity(fmt.Sprintf("p%05d", i%pacedPartitions), fmt.Sprintf("r%07d", i))}
}

// onePartitionRequest is the one-partition inserts' request i.
func onePartitionRequest(i int) *engine.Request {
	return &engine.Request{Op: "Insert", Entity: sampleEntity("hot", fmt.Sprintf("r%07d", i))}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func percentile(ls []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ls...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(float64(len(s)-1)*p)]
}

func (b *bencher) run(ctx context.Context, h *node.Node) error {
	sample, _ := wire.EncodeRequestMsgpack(&engine.Request{Op: "Insert", Entity: sampleEntity("p0000", "r0000000")})
	size := len(sample)
	fmt.Printf("entity: 10 properties, %d bytes as a msgpack Insert request\n\n", size)
	fmt.Println("| workload | Cairn | raw JetStream async publish, same run | ratio | goal |")
	fmt.Println("|---|---|---|---|---|")

	type workload struct {
		name, unit, goal string
		// ofRaw, when above 0, is the goal: at least this fraction of
		// raw async publishing's rate; goalName states it in the goals.
		ofRaw    float64
		goalName string
		// ofCeiling marks the workload whose goal is a fraction of the
		// ceiling of today's protocol, measured at the end of the run.
		ofCeiling float64
		// dev sends as a client without credentials, the development
		// user: its requests cross its account's import.
		dev bool
		// grouped: the grouped skeleton (today's protocol with group
		// commit and no Cairn code) is measured and printed below it.
		grouped bool
		perReq  int
		window  int
		reqs    int
		mk      func(table string, round int) func(i int) *engine.Request
	}
	workloads := []workload{
		{name: "insert, many partitions (1 entity per command)", unit: "entities/s", goal: "≥ 0.8 of the ceiling (goals, below)", ofCeiling: 0.8, perReq: 1, window: b.window, reqs: b.n,
			mk: func(string, int) func(int) *engine.Request { return manyPartitionRequest }},
		{name: "insert, many partitions, from a client without credentials", unit: "entities/s", goal: "the row above: an import's cost", dev: true, perReq: 1, window: b.window, reqs: b.n,
			mk: func(string, int) func(int) *engine.Request { return manyPartitionRequest }},
		{name: "insert, one partition (group commit)", unit: "entities/s", ofRaw: 0.9, goal: "≥ 0.9 of raw",
			goalName: "inserts into one partition ≥ 0.9 of raw async publish", perReq: 1, window: b.window, reqs: b.n,
			grouped: true,
			mk:      func(string, int) func(int) *engine.Request { return onePartitionRequest }},
		{name: "batch of 100, one partition per batch", unit: "entities/s", ofRaw: 1, goal: "≥ raw",
			goalName: "batches of 100 ≥ raw async publish", perReq: 100, window: max(b.window/16, 1), reqs: max(b.n/100, 20),
			mk: func(string, int) func(int) *engine.Request {
				return func(i int) *engine.Request {
					ops := make([]engine.Request, 100)
					for k := range ops {
						ops[k] = engine.Request{Op: "Insert", Entity: sampleEntity(fmt.Sprintf("b%05d", i), fmt.Sprintf("r%03d", k))}
					}
					return &engine.Request{Op: "Batch", Ops: ops}
				}
			}},
	}
	var goals []goal
	var loadLat []time.Duration
	var replayTable string
	// The many-partition inserts and the raw publishing beside them.
	var many, manyRaw float64
	for _, w := range workloads {
		if b.only != "" && !strings.Contains(w.name, b.only) {
			continue
		}
		var rates, raws, skels []float64
		var skelBodies [][]byte
		if w.grouped {
			var err error
			if skelBodies, err = encodeRequests(w.reqs, onePartitionRequest); err != nil {
				return err
			}
		}
		for r := 0; r < b.rounds; r++ {
			raw, err := b.rawPublish(ctx, w.reqs*w.perReq, size, 10000)
			if err != nil {
				return fmt.Errorf("raw publish: %w", err)
			}
			table, err := b.newTable(ctx, "Bench")
			if err != nil {
				return err
			}
			nc := b.nc
			if w.dev {
				nc = b.dev
			}
			res, err := b.pipelined(nc, w.reqs, w.window, "cairn.cmd."+table, w.mk(table, r))
			if err != nil {
				return fmt.Errorf("%s: %w", w.name, err)
			}
			rates = append(rates, res.rate*float64(w.perReq))
			raws = append(raws, raw)
			if w.grouped {
				// In every round, so that the machine's load weighs on
				// both alike.
				sk, err := skeletonRound(ctx, h.NATSServer(), b.nc, skelBodies, w.window, 0, true)
				if err != nil {
					return fmt.Errorf("grouped skeleton: %w", err)
				}
				skels = append(skels, sk.rate)
			}
			if w.perReq == 1 && loadLat == nil {
				// The first workload's table (one record per entity)
				// is the one replayed below.
				loadLat = res.latencies
				replayTable = table
			} else if err := b.cl.DeleteTable(ctx, table); err != nil {
				// Every round starts from the same state: earlier
				// rounds' tables would weigh on the heap and the disk.
				return err
			}
		}
		c, raw := median(rates), median(raws)
		g := w.goal
		if w.ofRaw > 0 {
			met := c/raw >= w.ofRaw
			g = verdict(w.goal, met)
			goals = append(goals, goal{name: w.goalName, figure: fmt.Sprintf("%.0f %s", c, w.unit),
				floor: fmt.Sprintf("raw async publish %.0f msgs/s", raw), ratio: fmt.Sprintf("%.2f", c/raw), met: met})
		}
		fmt.Printf("| %s | %.0f %s | %.0f msgs/s | %.2f | %s |\n", w.name, c, w.unit, raw, c/raw, g)
		if w.ofCeiling > 0 {
			many, manyRaw = c, raw
		}
		if w.grouped {
			skel := median(skels)
			fmt.Printf("| %s | %.0f commands/s | %.0f msgs/s | %.2f | Cairn's one partition: %.2f of it |\n",
				skeletonGroupedRow, skel, raw, skel/raw, c/skel)
		}
	}

	if b.only != "" {
		if strings.Contains(memoryRow, b.only) {
			if _, err := b.memoryRow(); err != nil {
				return err
			}
		}
		if strings.Contains(skeletonRow, b.only) {
			skel, err := b.skeletonRate(ctx, h.NATSServer())
			if err != nil {
				return err
			}
			fmt.Printf("| %s; %d in flight) | %.0f commands/s | | | |\n", skeletonRow, b.window, skel)
		}
		return nil
	}
	if many == 0 {
		return errors.New("bench: no many-partition inserts measured")
	}
	echo, err := b.echo(size)
	if err != nil {
		return err
	}
	skel, err := b.skeletonRate(ctx, h.NATSServer())
	if err != nil {
		return err
	}
	fmt.Printf("| %s; %d in flight) | %.0f commands/s | %.0f msgs/s | %.2f | Cairn's many partitions: %.2f of it |\n",
		skeletonRow, b.window, skel, manyRaw, skel/manyRaw, many/skel)
	g, err := b.latencyOneAtATime(ctx, h.NATSServer(), size)
	if err != nil {
		return err
	}
	goals = append(goals, g)
	fmt.Printf("| command → visible latency, %d in flight | p50 %v, p99 %v | | | |\n", b.window,
		percentile(loadLat, .5).Round(time.Microsecond), percentile(loadLat, .99).Round(time.Microsecond))
	for _, f := range b.pacedAt {
		g, err := b.latencyPaced(ctx, h.NATSServer(), many, f)
		if err != nil {
			return err
		}
		if f == 0.5 {
			goals = append(goals, g)
		}
	}

	rawConsume, err := b.replay(ctx, h, replayTable)
	if err != nil {
		return err
	}
	memGoal, err := b.memoryRow()
	if err != nil {
		return err
	}
	goals = append(goals, memGoal)

	// Each single-entity command costs at least a request and its reply,
	// an append and its acknowledgement, and the record's delivery to the
	// view. At the rates measured for each alone, one after another on the
	// same cores, and with no Cairn code at all, the many-partition
	// inserts could reach this:
	ceiling := 1 / (1/manyRaw + 1/echo + 1/rawConsume)
	ofCeiling := many / ceiling
	fmt.Printf("| ceiling of many partitions: one echo request, one raw append, one raw delivery per command (the rates above, added as costs; no Cairn code) | %.0f commands/s | %.0f msgs/s | %.2f | %s |\n",
		ceiling, manyRaw, ceiling/manyRaw, verdict(fmt.Sprintf("many partitions ≥ 0.8 of it: %.2f", ofCeiling), ofCeiling >= 0.8))
	goals = append([]goal{{name: "many-partition inserts ≥ 0.8 of the ceiling of today's protocol",
		figure: fmt.Sprintf("%.0f entities/s", many), floor: fmt.Sprintf("ceiling %.0f commands/s", ceiling),
		ratio: fmt.Sprintf("%.2f", ofCeiling), met: ofCeiling >= 0.8}}, goals...)
	printGoals(goals)
	return nil
}

// echo measures plain NATS request/reply to a responder that answers at
// once, with the same window and body size: the ceiling of any protocol
// that answers each command, before JetStream is involved.
func (b *bencher) echo(size int) (float64, error) {
	nc, err := nats.Connect(b.nc.ConnectedUrl(), nodeCreds...)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	subj := "benchecho." + nuid.Next()
	reply := []byte{0x80}
	sub, err := nc.Subscribe(subj, func(m *nats.Msg) { _ = m.Respond(reply) })
	if err != nil {
		return 0, err
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)
	if err := nc.Flush(); err != nil {
		return 0, err
	}
	body := &engine.Request{Op: "Insert", Entity: sampleEntity("p", "r")}
	var rates []float64
	for r := 0; r < b.rounds; r++ {
		res, err := b.pipelined(b.nc, b.n, b.window, subj, func(int) *engine.Request { return body })
		if err != nil {
			return 0, err
		}
		rates = append(rates, res.rate)
	}
	fmt.Printf("| for scale: NATS request/reply to an echo responder, no JetStream | %.0f requests/s | | | |\n", median(rates))
	_ = size
	return median(rates), nil
}

// replay measures rebuilding a view from the journal, against reading the
// same stream with a raw ordered consumer, and the memory the view holds.
func (b *bencher) replay(ctx context.Context, h *node.Node, table string) (rawRate float64, err error) {
	tv, ok := h.Views().Table(table)
	if !ok {
		return 0, fmt.Errorf("no view of %s", table)
	}
	records := tv.Snapshot().Seq
	entities := tv.Snapshot().Len()
	j, err := journal.New(b.nc, journal.Config{})
	if err != nil {
		return 0, err
	}
	rawRate, err = rawReplay(ctx, b.nc, journal.StreamName("cairn", table, tv.Epoch()), records)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	vt := projections.NewTable(table, tv.Epoch(), 0)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- j.Consume(rctx, table, tv.Epoch(), tv.Shards(), 1, func(seq uint64, rec *engine.Record, pending uint64) error {
			vt.Apply(seq, rec)
			if pending == 0 || seq >= records {
				vt.Publish()
			}
			if seq >= records {
				cancel()
			}
			return nil
		})
	}()
	<-rctx.Done()
	<-errc
	el := time.Since(start)
	if vt.Snapshot().Seq < records {
		return 0, fmt.Errorf("replay stopped at %d of %d", vt.Snapshot().Seq, records)
	}
	rate := float64(records) / el.Seconds()
	fmt.Printf("| replay into a view (%d records, %d entities) | %.0f records/s, %.0f entities/s | raw ordered consumer %.0f msgs/s | %.2f | |\n",
		records, entities, rate, float64(entities)/el.Seconds(), rawRate, rate/rawRate)
	return rawRate, nil
}

// memoryRow is the first cell of the memory row.
const memoryRow = "memory per entity in a view (10 properties, ~1 KB of values)"

// memoryRow prints the row of the memory measured before the server
// started (viewMemory) and returns its goal.
func (b *bencher) memoryRow() (goal, error) {
	encoded, err := encodedSize(memoryEntity(0))
	if err != nil {
		return goal{}, err
	}
	ratio := b.memPerEntity / float64(encoded)
	fmt.Printf("| %s | %.0f bytes | the entity encoded: %d bytes (its properties in msgpack, engine.EncodeProperties, plus PartitionKey and RowKey) | %.2f× | %s |\n",
		memoryRow, b.memPerEntity, encoded, ratio, verdict("≤ 1.1× encoded", ratio <= 1.1))
	return goal{name: "memory per entity in a view ≤ 1.1× the encoded entity plus keys",
		figure: fmt.Sprintf("%.0f bytes", b.memPerEntity), floor: fmt.Sprintf("%d bytes encoded", encoded),
		ratio: fmt.Sprintf("%.2f×", ratio), met: ratio <= 1.1}, nil
}

// memoryEntity returns entity number i of viewMemory: the sample entity
// in one of 1,000 partitions.
func memoryEntity(i int) *engine.Entity {
	return sampleEntity(fmt.Sprintf("p%05d", i%1000), fmt.Sprintf("r%07d", i))
}

// viewMemory measures the live heap a view holds per entity: n records of
// one entity each go through the journal codec into a fresh view, away from
// the server's own caches.
func viewMemory(n int) (float64, error) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	vt := projections.NewTable("Memory", 1, 0)
	for i := 0; i < n; i++ {
		e := memoryEntity(i)
		data, err := journal.EncodeRecord(&engine.Record{Time: int64(i), PartitionKey: e.PartitionKey,
			Commands: []engine.CommandRef{{Count: 1}},
			Events:   []engine.Event{{Kind: engine.EventPut, RowKey: e.RowKey, Properties: e.Properties}}})
		if err != nil {
			return 0, err
		}
		rec, err := journal.DecodeRecord(data)
		if err != nil {
			return 0, err
		}
		vt.Apply(uint64(i+1), rec)
	}
	vt.Publish()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	per := (float64(ms.HeapAlloc) - float64(before)) / float64(vt.Snapshot().Len())
	runtime.KeepAlive(vt)
	return per, nil
}

// rawReplay reads a whole stream with an ordered consumer, doing nothing
// with the messages.
func rawReplay(ctx context.Context, nc *nats.Conn, stream string, n uint64) (float64, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	return rawDeliver(ctx, js, stream, int(n))
}

// parseFractions reads -paced-at: fractions above 0 and at most 1.
func parseFractions(v string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(v, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || x <= 0 || x > 1 {
			return nil, fmt.Errorf("%q is not a fraction above 0 and at most 1", f)
		}
		out = append(out, x)
	}
	return out, nil
}
