package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
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

// benchProjections measures what declared projections cost, in one run
// against an in-process node: the write rate with 0, 1 and 3 indexes
// declared on the written table (rounds alternate between them), the lag
// from a write's reply on that node to its index entry on a second node
// connected to the same server (and the source table's on that node, its
// baseline), and the speed of building an index on a large table.
func benchProjections(args []string) error {
	fs := flag.NewFlagSet("projections", flag.ContinueOnError)
	n := fs.Int("n", 20000, "writes per throughput round")
	window := fs.Int("window", 512, "writes in flight")
	rounds := fs.Int("rounds", 7, "rounds of each configuration (alternating); the median is reported")
	latFor := fs.Duration("latency-for", 5*time.Second, "how long the paced lag run sends")
	load := fs.Float64("latency-load", 0.5, "the lag run's write rate, as a fraction of the 0-index rate")
	rebuild := fs.Int("rebuild", 1_000_000, "entities of the table an index is built on (0: skip)")
	short := fs.Bool("short", false, "a quick run for CI: n=2000, rounds=1, latency-for=1s, rebuild=20000 unless given")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *short { // the flags given explicitly stay
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range map[string]string{"n": "2000", "rounds": "1", "latency-for": "1s", "rebuild": "20000"} {
			if !set[name] {
				_ = fs.Set(name, v)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bn, stop, err := startBenchNode(ctx, *cpuprofile)
	if err != nil {
		return err
	}
	defer stop()
	h, nc, js := bn.h, bn.nc, bn.js
	kv, err := projections.OpenDeclarations(ctx, js, "cairn", 1)
	if err != nil {
		return err
	}
	pb := &projBench{bencher: &bencher{nc: nc, cl: client.New(nc), n: *n, window: *window, rounds: *rounds}, kv: kv, a: h}
	sample, _ := wire.EncodeRequestMsgpack(&engine.Request{Op: "Insert", Entity: employee("p0000", "r0000000", 0)})
	fmt.Printf("# cairn bench projections: GOMAXPROCS=%d, %s/%s, %s, n=%d, window=%d, rounds=%d (median)\n",
		runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), *n, *window, *rounds)
	fmt.Printf("entity: 10 properties, %d bytes as a msgpack Insert request; inserts over 1,000 partitions\n\n", len(sample))

	// 1. Write throughput by the number of indexes.
	// Each round writes once per configuration, in an order that rotates
	// from round to round; a configuration's ratio is the median of its
	// rounds' ratios to the 0-index write of the same round, which the
	// machine's drift over a run does not move as much as the rates.
	configs := []int{0, 1, 3}
	rates := map[int][]float64{}
	ratios := map[int][]float64{}
	for r := 0; r < pb.rounds; r++ {
		got := map[int]float64{}
		for i := range configs {
			k := configs[(i+r)%len(configs)]
			rate, err := pb.writeRound(ctx, k)
			if err != nil {
				return fmt.Errorf("%d indexes: %w", k, err)
			}
			got[k] = rate
			rates[k] = append(rates[k], rate)
		}
		for _, k := range configs {
			ratios[k] = append(ratios[k], got[k]/got[0])
		}
	}
	base := median(rates[0])
	fmt.Println("| workload | figure | ratio to 0 indexes, same rounds (median of the rounds' ratios) | goal |")
	fmt.Println("|---|---|---|---|")
	for _, k := range configs {
		m := median(rates[k])
		goal := ""
		if k > 0 {
			goal = fmt.Sprintf("≥ %.2f (≤ 15 %% per index)", max(0, 1-0.15*float64(k)))
		}
		what := fmt.Sprintf("%d indexes", k)
		if k == 1 {
			what = "1 index"
		}
		fmt.Printf("| inserts, %s declared | %.0f entities/s (rounds: %s) | %.2f (rounds: %s) | %s |\n", what, m, rateList(rates[k], 1000, "k"), median(ratios[k]), rateList(ratios[k], 1, ""), goal)
	}

	// 2. Lag on a second node, at a fraction of the 0-index rate.
	lag, err := pb.lag(ctx, base**load, *latFor)
	if err != nil {
		return fmt.Errorf("lag: %w", err)
	}
	fmt.Printf("| reply on A → record delivered to a raw ordered consumer (baseline), at %.0f writes/s (%.2f of 0 indexes) | p50 %v, p99 %v, max %v | | |\n",
		lag.sent, *load, pct(lag.raw, .5), pct(lag.raw, .99), pct(lag.raw, 1))
	fmt.Printf("| reply on A → source entity visible on B, same writes | p50 %v, p99 %v, max %v | | |\n",
		pct(lag.src, .5), pct(lag.src, .99), pct(lag.src, 1))
	fmt.Printf("| reply on A → index entry visible on B, same writes | p50 %v, p99 %v, max %v | | p99 ≤ 5 ms |\n",
		pct(lag.idx, .5), pct(lag.idx, .99), pct(lag.idx, 1))
	fmt.Printf("| positions of the source B published during the run at which B's index was behind | %d of %d | | 0 (published in one step) |\n", lag.behind, lag.positions)

	// 3. Building an index on a large table.
	if *rebuild > 0 {
		if err := pb.build(ctx, *rebuild); err != nil {
			return fmt.Errorf("build: %w", err)
		}
	}
	return nil
}

type projBench struct {
	*bencher
	kv jetstream.KeyValue
	a  *node.Node
}

var projLastNames = []string{"Jones", "Smith", "Garcia", "Nguyen", "Okafor", "Müller", "Kowalski", "Tanaka", "Silva", "Haddad"}
var projDepts = []string{"Sales", "Ops", "Dev", "Legal", "Finance", "Support", "Research", "Marketing"}

// employee is a ~1 KB entity of ten properties whose Email is unique,
// LastName one of 1,000 and Dept one of eight.
func employee(pk, rk string, i int) *engine.Entity {
	return engine.NewEntity(pk, rk,
		engine.Property{Name: "FirstName", Value: engine.String("Margaret Anne")},
		engine.Property{Name: "LastName", Value: engine.String(projLastNames[i%len(projLastNames)] + strconv.Itoa(i%100))},
		engine.Property{Name: "Email", Value: engine.String("e" + strconv.Itoa(i) + "@contoso.example")},
		engine.Property{Name: "Dept", Value: engine.String(projDepts[i%len(projDepts)])},
		engine.Property{Name: "Address", Value: engine.String(strings.Repeat("12 Market Street, ", 10))},
		engine.Property{Name: "Notes", Value: engine.String(strings.Repeat("quarterly review notes ", 26))},
		engine.Property{Name: "Age", Value: engine.Int32(int32(20 + i%45))},
		engine.Property{Name: "Salary", Value: engine.Double(72150.5)},
		engine.Property{Name: "Hired", Value: engine.DateTime(time.Date(2012, 3, 1, 9, 0, 0, 0, time.UTC))},
		engine.Property{Name: "Active", Value: engine.Bool(true)},
	)
}

// indexDefs are the k indexes declared on table (k ≤ 3): by Email, by
// LastName carrying FirstName, by Dept and LastName.
func indexDefs(table string, k int, version uint64) []*projections.Definition {
	all := []*projections.Definition{
		{Name: table + "ByEmail", Source: table, Version: version, Kind: projections.KindIndex, Key: []string{"Email"}},
		{Name: table + "ByLast", Source: table, Version: version, Kind: projections.KindIndex, Key: []string{"LastName"}, Include: []string{"FirstName"}},
		{Name: table + "ByDept", Source: table, Version: version, Kind: projections.KindIndex, Key: []string{"Dept", "LastName"}},
	}
	return all[:k]
}

// declare deploys defs and waits until the node a serves them.
func (pb *projBench) declare(ctx context.Context, views *projections.Views, defs []*projections.Definition) error {
	for _, d := range defs {
		if _, err := projections.Deploy(ctx, pb.kv, d); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	for _, d := range defs {
		if err := views.WaitProjection(wctx, d); err != nil {
			return err
		}
	}
	return nil
}

func (pb *projBench) drop(ctx context.Context, table string, defs []*projections.Definition) error {
	for _, d := range defs {
		if err := projections.Drop(ctx, pb.kv, d.Full()); err != nil {
			return err
		}
	}
	return pb.cl.DeleteTable(ctx, table)
}

// writeRound writes n inserts into a new table with k indexes declared
// and returns the rate; the table and its indexes are dropped after.
func (pb *projBench) writeRound(ctx context.Context, k int) (float64, error) {
	table, err := pb.newTable(ctx, "Proj")
	if err != nil {
		return 0, err
	}
	defs := indexDefs(table, k, 1)
	if err := pb.declare(ctx, pb.a.Views(), defs); err != nil {
		return 0, err
	}
	res, err := pb.pipelined(pb.nc, pb.n, pb.window, "cairn.cmd."+table, func(i int) *engine.Request {
		return &engine.Request{Op: "Insert", Entity: employee(fmt.Sprintf("p%04d", i%1000), fmt.Sprintf("r%07d", i), i)}
	})
	if err != nil {
		return 0, err
	}
	if k > 0 {
		// The indexes hold every write: the reply came after they did.
		r, _, err := pb.a.Views().Readable(ctx, defs[0].Full())
		if err != nil {
			return 0, err
		}
		if got := r.Snapshot().Len(); got != pb.n {
			return 0, fmt.Errorf("index %s holds %d entities after %d writes", defs[0].Name, got, pb.n)
		}
	}
	return res.rate, pb.drop(ctx, table, defs)
}

// startFollower starts a second node connected to a's server (no server
// of its own, no HTTP) in a new temporary directory.
func startFollower(ctx context.Context, a *node.Node) (*node.Node, func(), error) {
	dir, err := os.MkdirTemp("", "cairn-bench-b-")
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	ready := make(chan *node.Node, 1)
	done := make(chan error, 1)
	go func() {
		done <- node.Run(ctx, node.Config{DataDir: dir, NATSURL: a.ClientURL(), NATSCreds: a.NATSCredsFile(), HTTP: "off",
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, func(h *node.Node) { ready <- h })
	}()
	select {
	case h := <-ready:
		return h, func() { cancel(); <-done; os.RemoveAll(dir) }, nil
	case err := <-done:
		cancel()
		os.RemoveAll(dir)
		return nil, nil, err
	}
}

// observation is when an observer first saw a view at a position.
type observation struct {
	seq uint64
	at  time.Time
}

// observe records every position the table's published snapshots reach,
// and when, until ctx ends. With check, it also counts the positions at
// which check's snapshot was behind (a projection must never be behind
// its source: it is published first).
func observe(ctx context.Context, t, check *projections.Table) <-chan observed {
	out := make(chan observed, 1)
	go func() {
		var o observed
		for {
			s := t.Snapshot()
			if len(o.obs) == 0 || s.Seq > o.obs[len(o.obs)-1].seq {
				o.obs = append(o.obs, observation{s.Seq, time.Now()})
				if check != nil && check.Snapshot().Seq < s.Seq {
					o.behind++
				}
			}
			if _, err := t.WaitSeq(ctx, s.Seq+1); err != nil {
				out <- o
				return
			}
		}
	}()
	return out
}

type observed struct {
	obs    []observation
	behind int
}

// seen returns when obs first reached seq (false: never).
func seen(obs []observation, seq uint64) (time.Time, bool) {
	i := sort.Search(len(obs), func(i int) bool { return obs[i].seq >= seq })
	if i == len(obs) {
		return time.Time{}, false
	}
	return obs[i].at, true
}

// lagResult is what lag measured, per write: from its reply on node A to
// its source entity and its index entry on node B, and to its record's
// delivery to a raw ordered consumer (the baseline: the same hop without
// Cairn).
type lagResult struct {
	src, idx, raw []time.Duration
	sent          float64 // writes per second sent
	positions     int     // positions B's source view published
	behind        int     // of which B's index had not reached
}

// lag writes at rate for d into a table with one index (by Email) on node
// a, while a second node b follows the same journal, and returns per write
// the time from its reply on a to the source entity and to its index entry
// being published on b (0 when b showed it before the reply arrived).
func (pb *projBench) lag(ctx context.Context, rate float64, d time.Duration) (res lagResult, err error) {
	n := int(rate * d.Seconds())
	if n < 100 {
		return res, errors.New("the rate is too low to measure")
	}
	b, stopB, err := startFollower(ctx, pb.a)
	if err != nil {
		return res, err
	}
	defer stopB()
	table, err := pb.newTable(ctx, "Lag")
	if err != nil {
		return res, err
	}
	defs := indexDefs(table, 1, 1)
	if err := pb.declare(ctx, pb.a.Views(), defs); err != nil {
		return res, err
	}
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if err := b.Views().WaitProjection(wctx, defs[0]); err != nil {
		return res, fmt.Errorf("node B: %w", err)
	}
	// Steady state: one write through before the clock starts.
	if _, err := pb.cl.Do(ctx, "cairn.cmd."+table, &engine.Request{Op: "Insert", Entity: employee("warm", "up", n)}); err != nil {
		return res, err
	}
	bSrc, ok := b.Views().Table(table)
	if !ok {
		return res, fmt.Errorf("node B has no view of %s", table)
	}
	bIdx, _, err := b.Views().Readable(wctx, defs[0].Full())
	if err != nil {
		return res, err
	}
	if _, err := bIdx.WaitSeq(wctx, 1); err != nil {
		return res, err
	}
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	srcObs, idxObs := observe(octx, bSrc, bIdx), observe(octx, bIdx, nil)
	stopRaw, err := rawArrivals(octx, pb.a, journal.StreamName("cairn", table, bSrc.Epoch()))
	if err != nil {
		return res, err
	}

	acked := make([]time.Time, n)
	seqs := make([]uint64, n)
	var mu sync.Mutex
	var failed error
	got := 0
	all := make(chan struct{})
	inbox := "_INBOX.benchproj." + nuid.Next() + "."
	sub, err := pb.nc.Subscribe(inbox+"*", func(m *nats.Msg) {
		now := time.Now()
		i, _ := strconv.Atoi(m.Subject[len(inbox):])
		rep, err := wire.DecodeReplyMsgpack(m.Data)
		mu.Lock()
		defer mu.Unlock()
		if err != nil || rep.Error != nil {
			failed = fmt.Errorf("write %d: %v %v", i, err, rep)
		} else {
			acked[i], seqs[i] = now, rep.Seq
		}
		if got++; got == n {
			close(all)
		}
	})
	if err != nil {
		return res, err
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)
	start := time.Now()
	for i := 0; i < n; i++ {
		if wait := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); wait > 0 {
			time.Sleep(wait)
		}
		body, err := wire.EncodeRequestMsgpack(&engine.Request{Op: "Insert", Entity: employee(fmt.Sprintf("p%04d", i%1000), fmt.Sprintf("r%07d", i), i)})
		if err != nil {
			return res, err
		}
		if err := pb.nc.PublishRequest("cairn.cmd."+table, inbox+strconv.Itoa(i), body); err != nil {
			return res, err
		}
	}
	res.sent = float64(n) / time.Since(start).Seconds()
	select {
	case <-all:
	case <-time.After(time.Minute):
		return res, fmt.Errorf("%d of %d replies", got, n)
	}
	mu.Lock()
	err, last := failed, uint64(0)
	for _, s := range seqs {
		last = max(last, s)
	}
	mu.Unlock()
	if err != nil {
		return res, err
	}
	if _, err := bIdx.WaitSeq(wctx, last); err != nil {
		return res, err
	}
	if _, err := bSrc.WaitSeq(wctx, last); err != nil {
		return res, err
	}
	ocancel()
	so, ix := <-srcObs, <-idxObs
	raw := stopRaw()
	res.positions, res.behind = len(so.obs), so.behind
	for i := range n {
		ts, ok1 := seen(so.obs, seqs[i])
		ti, ok2 := seen(ix.obs, seqs[i])
		if !ok1 || !ok2 {
			return res, fmt.Errorf("write %d (at %d) was not seen on node B", i, seqs[i])
		}
		res.src = append(res.src, max(0, ts.Sub(acked[i])))
		res.idx = append(res.idx, max(0, ti.Sub(acked[i])))
		if tr, ok := raw[seqs[i]]; ok {
			res.raw = append(res.raw, max(0, tr.Sub(acked[i])))
		}
	}
	if err := pb.drop(ctx, table, defs); err != nil {
		return res, err
	}
	return res, nil
}

// rawArrivals records when each message of a stream reaches an ordered
// consumer on a connection of its own, until stop.
func rawArrivals(ctx context.Context, a *node.Node, stream string) (stop func() map[uint64]time.Time, err error) {
	nc, err := nats.Connect(a.ClientURL(), nodeCreds...)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		nc.Close()
		return nil, err
	}
	var mu sync.Mutex
	at := map[uint64]time.Time{}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		now := time.Now()
		if md, err := m.Metadata(); err == nil {
			mu.Lock()
			at[md.Sequence.Stream] = now
			mu.Unlock()
		}
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return func() map[uint64]time.Time {
		cc.Stop()
		nc.Close()
		mu.Lock()
		defer mu.Unlock()
		return at
	}, nil
}

// build writes a table of n entities in batches of 100 (one partition
// each), then declares an index on it (a first build), then a new version
// of that index (a rebuild beside the active version), and reports each
// build's rate.
func (pb *projBench) build(ctx context.Context, n int) error {
	table, err := pb.newTable(ctx, "Big")
	if err != nil {
		return err
	}
	batches := (n + 99) / 100
	start := time.Now()
	res, err := pb.pipelined(pb.nc, batches, 32, "cairn.cmd."+table, func(i int) *engine.Request {
		ops := make([]engine.Request, 0, 100)
		for k := 0; k < 100 && i*100+k < n; k++ {
			j := i*100 + k
			ops = append(ops, engine.Request{Op: "Insert", Entity: employee(fmt.Sprintf("b%06d", i), fmt.Sprintf("r%03d", k), j)})
		}
		return &engine.Request{Op: "Batch", Ops: ops}
	})
	if err != nil {
		return err
	}
	fmt.Printf("| writing the table to build on: %d entities in batches of 100 | %v (%.0f entities/s; %.0f with encoding the requests) | | |\n",
		n, time.Duration(float64(batches)/res.rate*float64(time.Second)).Round(time.Millisecond), res.rate*float64(n)/float64(batches),
		float64(n)/time.Since(start).Seconds())
	for _, version := range []uint64{1, 2} {
		def := indexDefs(table, 2, version)[1] // by LastName, carrying FirstName
		if version == 2 {
			def.Include = []string{"FirstName", "Dept"}
		}
		var mu sync.Mutex
		var lastBuild *projections.BuildProgress
		pctx, pcancel := context.WithCancel(ctx)
		polled := make(chan struct{})
		go func() {
			defer close(polled)
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-pctx.Done():
					return
				case <-t.C:
				}
				for _, st := range pb.a.Views().ProjectionStatuses() {
					if st.Full == def.Full() && st.Build != nil && st.Build.Version == version {
						b := *st.Build
						mu.Lock()
						lastBuild = &b
						mu.Unlock()
					}
				}
			}
		}()
		start := time.Now()
		err := pb.declare(ctx, pb.a.Views(), []*projections.Definition{def})
		el := time.Since(start)
		pcancel()
		<-polled
		if err != nil {
			return err
		}
		what := "first build of an index (by LastName)"
		if version == 2 {
			what = "new version of it, built beside the active one"
		}
		status := ""
		if lastBuild != nil {
			status = fmt.Sprintf("; status at the last poll: phase %s, %.0f entities/s", lastBuild.Phase, lastBuild.RatePerSec)
		}
		fmt.Printf("| %s, %d entities | %v from deploy to served: %.0f entities/s%s | | ≥ 200,000 entities/s |\n",
			what, n, el.Round(time.Millisecond), float64(n)/el.Seconds(), status)
	}
	return nil
}

func pct(ls []time.Duration, p float64) time.Duration {
	return percentile(ls, p).Round(time.Microsecond)
}

// rateList lists figures divided by unit, with one or two decimals.
func rateList(xs []float64, unit float64, suffix string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		prec := 2
		if unit > 1 {
			prec = 1
		}
		s[i] = strconv.FormatFloat(x/unit, 'f', prec, 64) + suffix
	}
	return strings.Join(s, ", ")
}
