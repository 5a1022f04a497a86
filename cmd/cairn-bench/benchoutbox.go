package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/wire"
)

// benchOutbox measures the transactional outbox against an in-process
// node: writes with one message each, to visible (the reply) and to
// delivered (the message stored by the destination's stream), as ratios
// to the same writes without messages in the same run; then, at half the
// write rate, the delay from a write's reply to its message's arrival.
func benchOutbox(args []string) error {
	fs := flag.NewFlagSet("outbox", flag.ContinueOnError)
	n := fs.Int("n", 20000, "writes per round")
	window := fs.Int("window", 512, "writes in flight")
	rounds := fs.Int("rounds", 3, "rounds; the median is reported")
	latSeconds := fs.Duration("latency-for", 5*time.Second, "how long the half-load latency run sends")
	load := fs.Float64("latency-load", 0.5, "the latency run's write rate, as a fraction of the first row's")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (client, server, node and relay share the process) to this file")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bn, stop, err := startBenchNode(ctx, *cpuprofile)
	if err != nil {
		return err
	}
	defer stop()
	nc, js := bn.nc, bn.js
	b := &bencher{nc: nc, cl: client.New(nc), n: *n, window: *window, rounds: *rounds}
	fmt.Printf("# cairn bench outbox: GOMAXPROCS=%d, %s/%s, %s, n=%d, window=%d, rounds=%d (median)\n\n",
		runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), *n, *window, *rounds)
	insert := func(withMessage bool, round int) func(i int) *engine.Request {
		return func(i int) *engine.Request {
			pk := fmt.Sprintf("p%04d", i%1000)
			r := &engine.Request{Op: "Insert", Entity: sampleEntity(pk, fmt.Sprintf("r%07d", i))}
			if withMessage {
				r.Messages = []engine.Message{{Subject: "benchout.r" + strconv.Itoa(round) + "." + pk, Body: []byte(strconv.Itoa(i))}}
			}
			return r
		}
	}
	var plain, visible, delivered []float64
	for r := 0; r < b.rounds; r++ {
		table, err := b.newTable(ctx, "Plain")
		if err != nil {
			return err
		}
		res, err := b.pipelined(b.nc, b.n, b.window, "cairn.cmd."+table, insert(false, r))
		if err != nil {
			return err
		}
		plain = append(plain, res.rate)
		stream := "BENCHOUT" + strconv.Itoa(r)
		s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"benchout.r" + strconv.Itoa(r) + ".>"}, Storage: jetstream.FileStorage})
		if err != nil {
			return err
		}
		if table, err = b.newTable(ctx, "Outbox"); err != nil {
			return err
		}
		start := time.Now()
		res, err = b.pipelined(b.nc, b.n, b.window, "cairn.cmd."+table, insert(true, r))
		if err != nil {
			return err
		}
		visible = append(visible, res.rate)
		for {
			info, err := s.Info(ctx)
			if err != nil {
				return err
			}
			if info.State.Msgs >= uint64(b.n) {
				break
			}
			if time.Since(start) > 5*time.Minute {
				return fmt.Errorf("only %d of %d messages delivered after 5 minutes", info.State.Msgs, b.n)
			}
			time.Sleep(2 * time.Millisecond)
		}
		delivered = append(delivered, float64(b.n)/time.Since(start).Seconds())
		_ = js.DeleteStream(ctx, stream)
	}
	p, v, d := median(plain), median(visible), median(delivered)
	fmt.Println("| workload | rate | ratio to the same writes without messages | goal |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| inserts without messages, 1,000 partitions | %.0f writes/s | 1.00 | |\n", p)
	fmt.Printf("| inserts with one message each, to visible | %.0f writes/s | %.2f | |\n", v, v/p)
	fmt.Printf("| inserts with one message each, to delivered | %.0f messages/s | %.2f | relay ≥ write path (≥ %.2f) |\n", d, d/p, v/p)
	lat, err := halfLoadLatency(ctx, b, js, p**load, *latSeconds)
	if err != nil {
		return err
	}
	fmt.Printf("| reply → message stored, at %.0f writes/s (%.2f of the first row) | p50 %v, p99 %v, max %v | | p99 ≤ 10 ms at 0.5 |\n",
		p**load, *load, percentile(lat, .5).Round(time.Microsecond), percentile(lat, .99).Round(time.Microsecond), percentile(lat, 1).Round(time.Microsecond))
	return nil
}

// halfLoadLatency sends writes with one message each at rate for d and
// returns, per write, the time from its reply to its message's arrival at
// a consumer of the destination's stream (0 when the message came first).
func halfLoadLatency(ctx context.Context, b *bencher, js jetstream.JetStream, rate float64, d time.Duration) ([]time.Duration, error) {
	n := int(rate * d.Seconds())
	if n < 100 {
		return nil, errors.New("outbox latency: the rate is too low to measure")
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCHOUTLAT", Subjects: []string{"benchout.lat.>"}, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, err
	}
	defer js.DeleteStream(ctx, "BENCHOUTLAT")
	table, err := b.newTable(ctx, "OutboxLatency")
	if err != nil {
		return nil, err
	}
	acked := make([]time.Time, n)
	arrived := make([]time.Time, n)
	var mu sync.Mutex
	got := 0
	all := make(chan struct{})
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		now := time.Now()
		i, err := strconv.Atoi(string(m.Data()))
		if err != nil || i < 0 || i >= n {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if arrived[i].IsZero() {
			arrived[i] = now
			if got++; got == n {
				close(all)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	defer cc.Stop()
	// Steady state: the table's relay is running before the clock starts.
	warm := &engine.Request{Op: "Insert", Entity: sampleEntity("warm", "up"), Messages: []engine.Message{{Subject: "benchout.lat.warm", Body: []byte("-1")}}}
	if _, err := b.cl.Do(ctx, "cairn.cmd."+table, warm); err != nil {
		return nil, err
	}
	for {
		info, err := stream.Info(ctx)
		if err != nil {
			return nil, err
		}
		if info.State.Msgs == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	inbox := "_INBOX.benchout." + nuid.Next() + "."
	var failed error
	sub, err := b.nc.Subscribe(inbox+"*", func(m *nats.Msg) {
		now := time.Now()
		i, _ := strconv.Atoi(m.Subject[len(inbox):])
		if rep, err := wire.DecodeReplyMsgpack(m.Data); err != nil || rep.Error != nil {
			mu.Lock()
			failed = fmt.Errorf("write %d: %v %v", i, err, rep)
			mu.Unlock()
			return
		}
		mu.Lock()
		acked[i] = now
		mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	start := time.Now()
	for i := 0; i < n; i++ {
		if wait := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); wait > 0 {
			time.Sleep(wait)
		}
		pk := fmt.Sprintf("p%04d", i%1000)
		body, err := wire.EncodeRequestMsgpack(&engine.Request{Op: "Insert", Entity: sampleEntity(pk, fmt.Sprintf("r%07d", i)),
			Messages: []engine.Message{{Subject: "benchout.lat." + pk, Body: []byte(strconv.Itoa(i))}}})
		if err != nil {
			return nil, err
		}
		if err := b.nc.PublishRequest("cairn.cmd."+table, inbox+strconv.Itoa(i), body); err != nil {
			return nil, err
		}
	}
	select {
	case <-all:
	case <-time.After(time.Minute):
		return nil, fmt.Errorf("outbox latency: %d of %d messages arrived", got, n)
	}
	time.Sleep(100 * time.Millisecond) // the last replies
	mu.Lock()
	defer mu.Unlock()
	if failed != nil {
		return nil, failed
	}
	lat := make([]time.Duration, 0, n)
	for i := range n {
		if acked[i].IsZero() {
			continue
		}
		lat = append(lat, max(0, arrived[i].Sub(acked[i])))
	}
	return lat, nil
}
