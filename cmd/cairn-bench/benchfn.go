package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/projections"
)

// benchFunctions measures the function runner: invocation overhead (native
// and WebAssembly) against a plain NATS request/reply, queue throughput of
// a trivial function against a raw JetStream work-queue consumer, and the
// time to archive employees through the queue. Run it from the
// repository's root: it builds examples/hello and examples/archive.
func benchFunctions(args []string) error {
	fs := flag.NewFlagSet("bench-functions", flag.ContinueOnError)
	n := fs.Int("n", 10000, "messages per queue workload, employees to archive")
	calls := fs.Int("calls", 3000, "direct invocations per latency workload")
	rounds := fs.Int("rounds", 3, "rounds of each workload; the median is reported")
	only := fs.String("only", "", "run only the workloads whose group contains this text: direct, queue, archive")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the run (client, server and host share the process) to this file")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench-functions: unexpected arguments %q", fs.Args())
	}
	if *n < 1 || *calls < 1 || *rounds < 1 {
		return errors.New("bench-functions: -n, -calls and -rounds must be positive")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bn, stop, err := startBenchNode(ctx, *cpuprofile, jetstream.WithPublishAsyncMaxPending(4000))
	if err != nil {
		return err
	}
	defer stop()
	h, nc, js := bn.h, bn.nc, bn.js
	fr := h.Functions()
	b := &fnBencher{nc: nc, js: js, cl: client.New(nc), fr: fr, views: h.Views(), rounds: *rounds}

	fmt.Printf("# cairn bench-functions: GOMAXPROCS=%d, %s/%s, %s, n=%d, rounds=%d (median)\n\n",
		runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), *n, *rounds)
	for _, ex := range []string{"hello", "archive"} {
		fmt.Fprintf(os.Stderr, "building and deploying examples/%s…\n", ex)
		module, err := cli.Module(ctx, "examples/"+ex)
		if err != nil {
			return fmt.Errorf("run bench-functions from the repository's root: %w", err)
		}
		m := functions.Manifest{Name: "wasm-" + ex, Trigger: functions.Trigger{Queue: "wasm-" + ex}, Concurrency: 4}
		if ex == "archive" {
			m.WriteRate = functions.MaxRate // as native-archive-4
		}
		if _, err := fr.Registry().Deploy(ctx, m, module); err != nil {
			return err
		}
	}
	var helloRuns atomic.Int64
	native := functions.Manifest{Name: "native-hello", Trigger: functions.Trigger{Queue: "native-hello"}, Concurrency: 4}
	if err := fr.Register(native, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		helloRuns.Add(1)
		return inv.SetOutput(append([]byte("hello, "), inv.Trigger().Body...))
	})); err != nil {
		return err
	}
	// The same function on an HTTP route, called with a function key, and
	// on one signed for the development account (SharedKey).
	httpHello := functions.Manifest{Name: "http-hello", Concurrency: 4, Trigger: functions.Trigger{HTTP: &functions.HTTPTrigger{
		RatePerKey: functions.MaxRate, Account: engine.DevAccount, Routes: []functions.Route{
			{Method: "POST", Path: "/"}, {Method: "POST", Path: "/signed", Auth: functions.AuthAccount}}}}}
	if err := fr.Register(httpHello, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		return inv.SetOutput(append([]byte("hello, "), inv.Trigger().Body...))
	})); err != nil {
		return err
	}
	_, httpKey, err := fr.Keys().Create(ctx, "http-hello", "bench", time.Now())
	if err != nil {
		return err
	}
	// The built-in archive runs with its own budgets (16 at a time, no
	// write rate); the native example is the same code deployed as a user
	// would, with the write rate lifted, at concurrency 4 and 16.
	for _, c := range []int{4, 16} {
		m := functions.Manifest{Name: fmt.Sprintf("native-archive-%d", c), Trigger: functions.Trigger{Queue: fmt.Sprintf("native-archive-%d", c)},
			Concurrency: c, WriteRate: functions.MaxRate}
		if err := fr.Register(m, functions.NativeFunc(functions.Archive)); err != nil {
			return err
		}
	}
	for _, name := range []string{"wasm-hello", "wasm-archive"} {
		if err := b.waitLoaded(ctx, name); err != nil {
			return err
		}
	}

	fmt.Println("| workload | Cairn | baseline, same run | ratio | goal |")
	fmt.Println("|---|---|---|---|---|")
	selected := func(group string) bool { return *only == "" || strings.Contains(group, *only) }
	// 1. Direct invocation round trips, one at a time: native, then
	// WebAssembly against native (the sandbox's cost), with a plain NATS
	// request/reply to a responder on its own TCP connection for scale
	// (the runner's responder is connected in-process, so it can be faster).
	if selected("direct") {
		echo, err := b.latency(*calls, "bench.echo", true)
		if err != nil {
			return err
		}
		nativeLat, err := b.latency(*calls, functions.DirectSubject("cairn", "native-hello"), false)
		if err != nil {
			return err
		}
		wasmLat, err := b.latency(*calls, functions.DirectSubject("cairn", "wasm-hello"), false)
		if err != nil {
			return err
		}
		withKey := func(req *http.Request) { req.Header.Set(functions.KeyHeader, httpKey) }
		httpLat, err := b.httpLatency(*calls, h.HTTPURL()+functions.HTTPPrefix+"http-hello/", withKey)
		if err != nil {
			return err
		}
		signedLat, err := b.httpLatency(*calls, h.HTTPURL()+functions.HTTPPrefix+"http-hello/signed", func(req *http.Request) { signDev(req, "SharedKey") })
		if err != nil {
			return err
		}
		fmt.Printf("| direct invocation of a trivial function, native, one at a time (median round trip) | %v | NATS request/reply over TCP %v | %.2f | |\n",
			nativeLat.Round(time.Microsecond), echo.Round(time.Microsecond), float64(nativeLat)/float64(echo))
		fmt.Printf("| the same function on an HTTP route with a function key, one at a time, keep-alive (median round trip) | %v | direct invocation over NATS %v | %.2f | |\n",
			httpLat.Round(time.Microsecond), nativeLat.Round(time.Microsecond), float64(httpLat)/float64(nativeLat))
		fmt.Printf("| the same on a route whose auth is account, each call signed with SharedKey (median round trip) | %v | with a function key %v | %.2f | |\n",
			signedLat.Round(time.Microsecond), httpLat.Round(time.Microsecond), float64(signedLat)/float64(httpLat))
		fmt.Printf("| direct invocation of a trivial function, WebAssembly, one at a time (median round trip) | %v | native %v | +%v | |\n",
			wasmLat.Round(time.Microsecond), nativeLat.Round(time.Microsecond), (wasmLat - nativeLat).Round(time.Microsecond))
	}
	// 2. Queue throughput, each against the raw baseline just before it.
	queueGoal := map[string]float64{"native-hello": 0.8, "wasm-hello": 0.5}
	for _, name := range []string{"native-hello", "wasm-hello"} {
		if !selected("queue") {
			break
		}
		raw, err := b.rawQueue(ctx, *n)
		if err != nil {
			return err
		}
		rate, err := b.queueRate(ctx, name, *n)
		if err != nil {
			return err
		}
		fmt.Printf("| trivial queue-triggered function, %s | %.0f invocations/s | raw work-queue publish, consume, ack (4 workers) %.0f msgs/s | %.2f | %s |\n",
			name, rate, raw, rate/raw, verdict(fmt.Sprintf("≥ %.1f of raw", queueGoal[name]), rate/raw >= queueGoal[name]))
	}
	// 3. Archiving employees: each round runs every queue once, so that
	// the machine's load weighs on all of them alike; each is set
	// against the native example (native-archive-4) of the same rounds.
	queues := []string{"native-archive-4", "archive", "native-archive-16", "wasm-archive"}
	els := map[string][]float64{}
	for r := 0; r < b.rounds && selected("archive"); r++ {
		for _, q := range queues {
			el, err := b.archive(ctx, q, *n)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "%s, round %d: %v\n", q, r+1, el.Round(time.Millisecond))
			els[q] = append(els[q], float64(el))
		}
	}
	if selected("archive") {
		native := time.Duration(median(els["native-archive-4"]))
		for _, q := range queues {
			el := time.Duration(median(els[q]))
			goal := ""
			if q == "archive" {
				goal = verdict("as fast as the native example", el <= native)
			}
			fmt.Printf("| archive %d employees through the queue %q | %v (%.0f employees/s) | the native example (native-archive-4) %v | %.2f | %s |\n",
				*n, q, el.Round(time.Millisecond), float64(*n)/el.Seconds(), native.Round(time.Millisecond), native.Seconds()/el.Seconds(), goal)
		}
	}
	st := fr.Stats()
	fmt.Printf("\ninvocations %d, failures %d, poisoned %d\n", st.Invocations.Load(), st.Failures.Load(), st.Poisoned.Load())
	return nil
}

type fnBencher struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	cl     *client.Client
	fr     *functions.Runner
	views  *projections.Views
	rounds int
	tables int
}

func (b *fnBencher) waitLoaded(ctx context.Context, name string) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if _, ok := b.fr.Version(name); ok {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("function %s did not load", name)
}

// latency is the median of round trips of n requests, one at a time;
// with echo, to a responder that answers at once.
func (b *fnBencher) latency(n int, subject string, echo bool) (time.Duration, error) {
	if echo {
		// A connection of its own, as the runner's responder has.
		rc, err := nats.Connect(b.nc.ConnectedUrl(), nodeCreds...)
		if err != nil {
			return 0, err
		}
		defer rc.Close()
		if _, err := rc.Subscribe(subject, func(m *nats.Msg) { m.Respond(m.Data) }); err != nil {
			return 0, err
		}
		if err := rc.Flush(); err != nil {
			return 0, err
		}
	}
	var meds []float64
	for range b.rounds {
		lat := make([]time.Duration, n)
		for i := range lat {
			start := time.Now()
			r, err := b.nc.Request(subject, []byte("world"), 5*time.Second)
			if err != nil {
				return 0, err
			}
			if e := r.Header.Get(functions.HeaderReplyError); e != "" {
				return 0, fmt.Errorf("%s: %s", subject, e)
			}
			lat[i] = time.Since(start)
		}
		meds = append(meds, float64(percentile(lat, .5)))
	}
	return time.Duration(median(meds)), nil
}

// httpLatency is the median round trip of n calls of an HTTP route, one
// at a time on one kept-alive connection, each authorised by auth; the
// first calls wait for a key to reach the runner's copy.
func (b *fnBencher) httpLatency(n int, url string, auth func(*http.Request)) (time.Duration, error) {
	hc := &http.Client{Timeout: 5 * time.Second}
	call := func() error {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader("world"))
		if err != nil {
			return err
		}
		auth(req)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
	for deadline := time.Now().Add(10 * time.Second); call() != nil; {
		if time.Now().After(deadline) {
			return 0, call()
		}
		time.Sleep(10 * time.Millisecond)
	}
	var meds []float64
	for range b.rounds {
		lat := make([]time.Duration, n)
		for i := range lat {
			start := time.Now()
			if err := call(); err != nil {
				return 0, err
			}
			lat[i] = time.Since(start)
		}
		meds = append(meds, float64(percentile(lat, .5)))
	}
	return time.Duration(median(meds)), nil
}

// publishAll enqueues n messages with async publishing.
func (b *fnBencher) publishAll(ctx context.Context, subject string, n int, body func(i int) []byte) error {
	for i := range n {
		// A busy machine can hold acknowledgements back longer than the
		// default stall wait (200 ms): wait rather than fail the round.
		if _, err := b.js.PublishAsync(subject, body(i), jetstream.WithStallWait(10*time.Second)); err != nil {
			return err
		}
	}
	select {
	case <-b.js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rawQueue is the baseline: n messages published to a work-queue stream
// and consumed and acknowledged by a plain pull consumer as they come,
// timed from the first publish to the last acknowledgement.
func (b *fnBencher) rawQueue(ctx context.Context, n int) (float64, error) {
	var rates []float64
	for r := range b.rounds {
		b.tables++
		name := fmt.Sprintf("BENCHWQ%d_%d", b.tables, r)
		s, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"benchwq." + name}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage})
		if err != nil {
			return 0, err
		}
		cons, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			return 0, err
		}
		iter, err := cons.Messages(jetstream.PullMaxMessages(4))
		if err != nil {
			return 0, err
		}
		// One reader, four workers acknowledging, as a function of
		// concurrency 4 does.
		msgs := make(chan jetstream.Msg, 4)
		done := make(chan error, 5)
		go func() {
			defer close(msgs)
			for got := 0; got < n; {
				m, err := iter.Next()
				if errors.Is(err, jetstream.ErrNoHeartbeat) {
					continue // the iterator pulls again
				}
				if err != nil {
					done <- err
					return
				}
				msgs <- m
				got++
			}
		}()
		for range 4 {
			go func() {
				var first error
				for m := range msgs {
					if err := m.DoubleAck(ctx); err != nil && first == nil {
						first = err
					}
				}
				done <- first
			}()
		}
		start := time.Now()
		if err := b.publishAll(ctx, "benchwq."+name, n, func(int) []byte { return []byte("world") }); err != nil {
			return 0, err
		}
		for range 4 {
			if err := <-done; err != nil {
				return 0, err
			}
		}
		select { // the reader's error, if it stopped early
		case err := <-done:
			return 0, err
		default:
		}
		rates = append(rates, float64(n)/time.Since(start).Seconds())
		fmt.Fprintf(os.Stderr, "raw work queue, round %d: %.0f msgs/s\n", r+1, rates[r])
		iter.Stop()
		b.js.DeleteStream(ctx, name)
	}
	return median(rates), nil
}

// queueRate is the rate of a function on its queue: n messages published,
// timed from the first publish until the queue is empty (every message
// acknowledged).
func (b *fnBencher) queueRate(ctx context.Context, function string, n int) (float64, error) {
	q := b.fr.Queues()
	var rates []float64
	for r := range b.rounds {
		start := time.Now()
		if err := b.publishAll(ctx, functions.QueueSubject("cairn", function), n, func(int) []byte { return []byte("world") }); err != nil {
			return 0, err
		}
		for {
			d, err := q.Depth(ctx, function)
			if err != nil {
				return 0, err
			}
			if d == 0 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		rates = append(rates, float64(n)/time.Since(start).Seconds())
		fmt.Fprintf(os.Stderr, "%s, round %d: %.0f invocations/s\n", function, r+1, rates[r])
	}
	return median(rates), nil
}

// archive hires n employees in Current, enqueues an archive message for
// each and measures until Current is empty and Archive holds them all.
func (b *fnBencher) archive(ctx context.Context, queue string, n int) (time.Duration, error) {
	b.tables++
	cur, arc := fmt.Sprintf("Current%d", b.tables), fmt.Sprintf("Archive%d", b.tables)
	for _, t := range []string{cur, arc} {
		if _, err := b.cl.CreateTable(ctx, t); err != nil {
			return 0, err
		}
	}
	depts := []string{"Sales", "Marketing", "Engineering", "Support"}
	for d, dept := range depts {
		for start := 0; start < n; start += 100 * len(depts) {
			var ops []engine.Operation
			for i := start + d; i < min(start+100*len(depts), n); i += len(depts) {
				ops = append(ops, engine.Operation{Op: engine.OpInsert, Entity: sampleEntity(dept, fmt.Sprintf("%06d", i))})
			}
			if len(ops) == 0 {
				continue
			}
			if _, err := b.cl.Batch(ctx, cur, ops); err != nil {
				return 0, err
			}
		}
	}
	body := func(i int) []byte {
		dept, id := depts[i%len(depts)], fmt.Sprintf("%06d", i)
		if !strings.HasPrefix(queue, "wasm-") {
			m, _ := json.Marshal(functions.ArchiveRequest{From: cur, To: arc, PartitionKey: dept, RowKey: id})
			return m
		}
		m, _ := json.Marshal(map[string]string{"department": dept, "id": id, "from": cur, "to": arc})
		return m
	}
	start := time.Now()
	if err := b.publishAll(ctx, functions.QueueSubject("cairn", queue), n, body); err != nil {
		return 0, err
	}
	for {
		d, err := b.fr.Queues().Depth(ctx, queue)
		if err != nil {
			return 0, err
		}
		if d == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	el := time.Since(start)
	for _, c := range []struct {
		table string
		want  int
	}{{cur, 0}, {arc, n}} {
		t, ok := b.views.Table(c.table)
		if !ok || t.Snapshot().Len() != c.want {
			return 0, fmt.Errorf("after archiving, %s should hold %d entities", c.table, c.want)
		}
	}
	return el, nil
}
