package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/trace"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// Sizes of the latency workloads.
const (
	// latencyCommands are the commands, and the synchronous publishes,
	// of a round one at a time.
	latencyCommands = 2000
	// pacedFor is the longest a paced round runs: it sends -n commands
	// or what pacedFor holds at its rate, whichever is fewer.
	pacedFor = 5 * time.Second
	// pacedMin is the fewest commands a paced round may send: fewer give
	// no p99.
	pacedMin = 200
)

// latencyOneAtATime measures command → visible latency one command at a
// time beside a synchronous JetStream publish one at a time and today's
// protocol with no Cairn code one at a time (the skeleton: the request,
// the append and its acknowledgement, the delivery, the reply), rounds
// times, prints the medians of the rounds' p50 and p99 and returns the
// goal: a p99 at most twice the publish's.
func (b *bencher) latencyOneAtATime(ctx context.Context, ns *server.Server, size int) (goal, error) {
	table, err := b.newTable(ctx, "Latency")
	if err != nil {
		return goal{}, err
	}
	bodies, err := encodeRequests(latencyCommands, manyPartitionRequest)
	if err != nil {
		return goal{}, err
	}
	var cairn, publish, skeleton latencyRounds
	for r := 0; r < b.rounds; r++ {
		skel, err := skeletonRound(ctx, ns, b.nc, bodies, 1, 0, false)
		if err != nil {
			return goal{}, fmt.Errorf("skeleton one at a time: %w", err)
		}
		skeleton.add(skel.latencies)
		res, err := b.pipelined(b.nc, latencyCommands, 1, "cairn.cmd."+table, func(i int) *engine.Request {
			return &engine.Request{Op: "Insert", Entity: sampleEntity("lat", fmt.Sprintf("r%d-%07d", r, i))}
		})
		if err != nil {
			return goal{}, err
		}
		raw, err := b.rawLatency(ctx, latencyCommands, size)
		if err != nil {
			return goal{}, err
		}
		cairn.add(res.latencies)
		publish.add(raw)
	}
	if err := b.cl.DeleteTable(ctx, table); err != nil {
		return goal{}, err
	}
	c, pub, sk := cairn.medians(), publish.medians(), skeleton.medians()
	p50, p99, rawP50, rawP99 := c.p50, c.p99, pub.p50, pub.p99
	r99 := float64(p99) / float64(rawP99)
	met := r99 <= 2
	fmt.Printf("| command → visible latency, one at a time | p50 %v, p99 %v | sync publish p50 %v, p99 %v | %.1f× (p50), %.1f× (p99) | %s |\n",
		us(p50), us(p99), us(rawP50), us(rawP99), float64(p50)/float64(rawP50), r99, verdict("p99 ≤ 2× sync publish", met))
	fmt.Printf("| %s | p50 %v, p99 %v | sync publish p50 %v, p99 %v | %.1f× (p50), %.1f× (p99) | Cairn's p99: %.1f× it |\n",
		skeletonOneRow, us(sk.p50), us(sk.p99), us(rawP50), us(rawP99), float64(sk.p50)/float64(rawP50), float64(sk.p99)/float64(rawP99), float64(p99)/float64(sk.p99))
	return goal{name: "p99 command → visible, one at a time, ≤ 2× a sync publish one at a time",
		figure: fmt.Sprintf("p99 %v", us(p99)),
		floor:  fmt.Sprintf("sync publish p99 %v; the protocol with no Cairn code p99 %v (%.1f× the publish)", us(rawP99), us(sk.p99), float64(sk.p99)/float64(rawP99)),
		ratio:  fmt.Sprintf("%.1f×", r99), met: met}, nil
}

// skeletonOneRow names the one-at-a-time latency of today's protocol with
// no Cairn code.
const skeletonOneRow = "the same one at a time, today's protocol with no Cairn code (request, append and its acknowledgement, delivery, reply)"

// latencyPaced measures command → visible latency of many-partition
// inserts sent open loop at the fraction at of peak commands/s (the
// many-partition rate of the run), rounds times on a fresh table each,
// prints the medians of the rounds' p50, p99 and max, and returns the
// goal, which is read at half of the peak: a p99 of at most 5 ms.
func (b *bencher) latencyPaced(ctx context.Context, ns *server.Server, peak, at float64) (goal, error) {
	rate := peak * at
	n := min(b.n, int(rate*pacedFor.Seconds()))
	if n < pacedMin {
		return goal{}, fmt.Errorf("paced latency: %.0f commands/s sends fewer than %d commands in %v", rate, pacedMin, pacedFor)
	}
	var cairn latencyRounds
	var sent []float64
	stopTrace, err := startTrace(b.tracePaced, at)
	if err != nil {
		return goal{}, err
	}
	defer stopTrace()
	for r := 0; r < b.rounds; r++ {
		table, err := b.newTable(ctx, "Paced")
		if err != nil {
			return goal{}, err
		}
		// Steady state: the table's first write, and whatever it starts,
		// is done before the clock starts.
		if _, err := b.cl.Do(ctx, "cairn.cmd."+table, &engine.Request{Op: "Insert", Entity: sampleEntity("warm", "up")}); err != nil {
			return goal{}, err
		}
		res, err := b.send(b.nc, n, n, rate, "cairn.cmd."+table, manyPartitionRequest)
		if err != nil {
			return goal{}, fmt.Errorf("paced latency: %w", err)
		}
		if err := b.cl.DeleteTable(ctx, table); err != nil {
			return goal{}, err
		}
		cairn.add(res.latencies)
		sent = append(sent, res.rate)
	}
	stopTrace()
	c := cairn.medians()
	p99 := c.p99
	raw, err := b.rawPaced(ctx, n, rate)
	if err != nil {
		return goal{}, err
	}
	skel, err := b.skeletonPaced(ctx, ns, n, rate)
	if err != nil {
		return goal{}, err
	}
	met := p99 <= 5*time.Millisecond
	share, verdictCell := "half", verdict("p99 ≤ 5 ms", met)
	if at != 0.5 {
		share, verdictCell = strconv.FormatFloat(at, 'f', -1, 64)+" of", "" // the goal is read at one half
	}
	fmt.Printf("| command → visible latency, many partitions sent open loop at %s the first row's rate (%.0f commands/s; %d a round, answered at %.0f/s) | p50 %v, p99 %v, max %v | raw appends at the same rate: p50 %v, p99 %v, max %v | %.1f× | %s |\n",
		share, rate, n, median(sent), us(c.p50), us(p99), us(c.max),
		us(raw.p50), us(raw.p99), us(raw.max), float64(p99)/float64(raw.p99), verdictCell)
	fmt.Printf("| the same, today's protocol with no Cairn code (the skeleton above) | | p50 %v, p99 %v, max %v | %.1f× (Cairn's p99 to it) | |\n",
		us(skel.p50), us(skel.p99), us(skel.max), float64(p99)/float64(skel.p99))
	return goal{name: "p99 command → visible ≤ 5 ms at half of the peak rate",
		figure: fmt.Sprintf("p99 %v", us(p99)), floor: fmt.Sprintf("half of the peak: %.0f commands/s; at that rate raw appends p99 %v, the protocol with no Cairn code p99 %v", rate, us(raw.p99), us(skel.p99)),
		ratio: fmt.Sprintf("%.1f×", float64(p99)/float64(raw.p99)), met: met}, nil
}

// pacedPartitions is how many partitions (or subjects) a paced run
// spreads its writes over.
const pacedPartitions = 10_000

// latencyFigures are a latency run's p50, p99 and max.
type latencyFigures struct{ p50, p99, max time.Duration }

// latencyRounds collects the rounds of a latency run.
type latencyRounds struct{ p50s, p99s, maxes []time.Duration }

// add notes one round's latencies.
func (r *latencyRounds) add(lat []time.Duration) {
	r.p50s, r.p99s, r.maxes = append(r.p50s, percentile(lat, .5)), append(r.p99s, percentile(lat, .99)), append(r.maxes, percentile(lat, 1))
}

// medians returns the medians over the rounds of each round's p50, p99
// and max.
func (r *latencyRounds) medians() latencyFigures {
	return latencyFigures{medianDuration(r.p50s), medianDuration(r.p99s), medianDuration(r.maxes)}
}

// rawPaced is the floor of latencyPaced: n JetStream appends of the
// sample entity's size, to as many subjects as the paced inserts use
// partitions, sent open loop at rate/s through the same connection, each
// measured from its send to its acknowledgement (its reply, as a
// command's is), rounds times on a fresh file stream. No Cairn code
// runs, so it is what this process, this server and this machine give
// one request and one append at that rate, collector included.
func (b *bencher) rawPaced(ctx context.Context, n int, rate float64) (latencyFigures, error) {
	js, err := jetstream.New(b.nc)
	if err != nil {
		return latencyFigures{}, err
	}
	size, err := encodedSize(sampleEntity("p00000", "r0000000"))
	if err != nil {
		return latencyFigures{}, err
	}
	body := make([]byte, size)
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = body
	}
	var raw latencyRounds
	for r := 0; r < b.rounds; r++ {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCHPACED", Subjects: []string{"benchpaced.>"}, Storage: jetstream.FileStorage}); err != nil {
			return latencyFigures{}, err
		}
		res, err := sendBodies(b.nc, bodies, n, rate, func(i int) string { return "benchpaced.p" + strconv.Itoa(i%pacedPartitions) }, checkAck)
		if derr := js.DeleteStream(ctx, "BENCHPACED"); err == nil {
			err = derr
		}
		if err != nil {
			return latencyFigures{}, fmt.Errorf("paced raw appends: %w", err)
		}
		raw.add(res.latencies)
	}
	return raw.medians(), nil
}

// checkAck reads a JetStream publish acknowledgement: the stream's error
// if it refused the message.
func checkAck(data []byte) error {
	var ack struct {
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(data, &ack); err != nil {
		return err
	}
	if ack.Error != nil {
		return ack.Error
	}
	return nil
}

// rawLatency measures synchronous JetStream publishes one at a time.
func (b *bencher) rawLatency(ctx context.Context, n, size int) ([]time.Duration, error) {
	js, err := jetstream.New(b.nc)
	if err != nil {
		return nil, err
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCHLAT", Subjects: []string{"benchlat.>"}, Storage: jetstream.FileStorage}); err != nil {
		return nil, err
	}
	defer js.DeleteStream(ctx, "BENCHLAT")
	data := make([]byte, size)
	out := make([]time.Duration, n)
	for i := range out {
		t := time.Now()
		if _, err := js.Publish(ctx, "benchlat.p", data); err != nil {
			return nil, err
		}
		out[i] = time.Since(t)
	}
	return out, nil
}

// medianDuration returns the median of ds.
func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// us rounds d to the microsecond, as the tables print latencies.
func us(d time.Duration) time.Duration { return d.Round(time.Microsecond) }

// startTrace starts a runtime trace of the open-loop rounds at the
// fraction at to prefix.<at>, when prefix is set; stop ends it and may be
// called more than once.
func startTrace(prefix string, at float64) (stop func(), err error) {
	if prefix == "" {
		return func() {}, nil
	}
	f, err := os.Create(prefix + "." + strconv.FormatFloat(at, 'f', -1, 64))
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { trace.Stop(); f.Close() }) }, nil
}
