package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/journal"
)

// The floors of the HTTP workloads. A floor is what a server that does
// the least a workload needs costs, measured in the same run with the
// same client and concurrency, and the goals of the lean path bound
// Cairn's figure as a multiple of it:
//
//   - a point read: net/http answering every GET with one stored entity
//     (floorChild);
//   - an insert or an upsert: net/http answering every insert's POST
//     with 204, plus one raw JetStream append of the entity's size and
//     one raw delivery of it (natsFloorChild), their costs added;
//   - memory per entity: the entity encoded (encodedSize).
//
// Each floor runs in a process of its own, whose CPU time is read before
// and after its timed part, as the servers' is.

// floorKind names the floor of a workload.
type floorKind int

const (
	noFloor     floorKind = iota
	readFloor             // net/http answering a GET
	writeFloor            // net/http answering a POST, one raw append, one raw delivery
	memoryFloor           // the entity encoded, with its keys
)

// floor is a floor's median figure: a rate (the ceiling of the workload
// without any Cairn code) and server CPU per entity in microseconds, or
// for memory bytes per entity.
type floor struct {
	name  string  // the row's first cell: what the floor does
	short string  // the same cell where the floor is printed again
	rate  float64 // entities/s (0: not a rate)
	cpu   float64 // µs of CPU per entity (0: not measured)
	bytes float64 // bytes per entity (memory)
}

// floors measures each floor once, when a workload first needs it, with
// the client, n, rounds and warm-up of the workloads.
type floors struct {
	client              string // -client
	doer                *http.Client
	n, rounds, warmup   int
	read, write, memory *floor
	// skeleton is the insert with today's protocol and no Cairn code,
	// measured with the write floor and printed below it; readSkeleton
	// the point read's, measured with the read floor.
	skeleton, readSkeleton *floor
}

// of returns the floor of kind, measuring it first if needed; nil when
// kind is noFloor or, for the CPU floors, when cpu is false (the Cairn
// side's CPU is not measured: nothing to compare with).
func (f *floors) of(ctx context.Context, kind floorKind, cpu bool) (*floor, error) {
	var err error
	switch {
	case kind == readFloor && cpu:
		if f.read == nil {
			f.read, err = f.measureRead(ctx)
		}
		return f.read, err
	case kind == writeFloor && cpu:
		if f.write == nil {
			f.write, err = f.measureWrite(ctx)
		}
		return f.write, err
	case kind == memoryFloor:
		if f.memory == nil {
			f.memory, err = memoryFloorOf(makeRows(scanEntities, byBatch))
		}
		return f.memory, err
	}
	return nil, nil
}

// measureRead measures the floor of a point read, and the point read
// with the protocol's own work and no Cairn code (readSkeletonChild) on
// the point-read workload's rows and keys.
func (f *floors) measureRead(ctx context.Context) (*floor, error) {
	h, err := f.measureHTTP(ctx, "a point read", "", nil, func(t *target) func(context.Context, int) error {
		return func(ctx context.Context, i int) error { return t.client.Get(ctx, "Floor", key("p", i), key("r", i)) }
	})
	if err != nil {
		return nil, err
	}
	rows := makeRows(f.n, byBatch)
	pick := randomIndexes(max(f.n, f.warmup), len(rows))
	sk, err := f.measureHTTP(ctx, "a point read with the protocol's work", "", []string{"-read-skeleton", strconv.Itoa(f.n)}, func(t *target) func(context.Context, int) error {
		return func(ctx context.Context, i int) error {
			r := rows[pick[i]]
			return t.client.Get(ctx, "Floor", r.pk, r.rk)
		}
	})
	if err != nil {
		return nil, err
	}
	f.readSkeleton = &floor{
		name: fmt.Sprintf("a point read with the protocol's work and no Cairn code: net/http, the SharedKeyLite signature checked (date, HMAC-SHA256), the keys read from the path, the entity's stored JSON found in a Go map of the same %d entities and written; same client, keys, %d concurrent", f.n, writers),
		rate: sk.v, cpu: sk.cpu,
	}
	return &floor{name: fmt.Sprintf("floor of a point read: net/http answering every GET with one stored entity, %d concurrent, same client", writers),
		rate: h.v, cpu: h.cpu}, nil
}

// measureWrite measures the floor of an insert: net/http answering the
// inserts' POSTs, plus a raw append and a raw delivery, their CPU per
// entity added and their rates added as costs (1/(1/a+1/b+1/c)), as the
// NATS benchmark's ceiling adds its parts.
func (f *floors) measureWrite(ctx context.Context) (*floor, error) {
	rows := makeRows(max(f.n, f.warmup), func(i int) string { return key("p", i%partitions) })
	insert := func(t *target) func(context.Context, int) error {
		return func(ctx context.Context, i int) error { return t.client.Insert(ctx, "Floor", rows[i].body) }
	}
	h, err := f.measureHTTP(ctx, "an insert", "", nil, insert)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "cairn-bench-skeleton-")
	if err != nil {
		return nil, err
	}
	sk, err := f.measureHTTP(ctx, "an insert with today's protocol", dir, nil, insert)
	if err != nil {
		return nil, err
	}
	f.skeleton = &floor{
		name: fmt.Sprintf("an insert with today's protocol and no Cairn code: net/http, each POST's body appended (a subject of its own, expected empty, file storage), answered with 204 once acknowledged and delivered back through an ordered consumer; same client, %d concurrent", writers),
		rate: sk.v, cpu: sk.cpu,
	}
	a, d, err := f.measureJournal(ctx)
	if err != nil {
		return nil, err
	}
	cpu := h.cpu + a.cpu + d.cpu
	if h.cpu == 0 || a.cpu == 0 || d.cpu == 0 {
		cpu = 0 // a part not measured: no sum
	}
	return &floor{
		short: "floor of an insert, as above",
		name: fmt.Sprintf("floor of an insert: net/http answering each insert's POST with 204 (%.2f µs, %.0f/s), + one raw append of %d bytes (async publish, %d in flight, acknowledged, file storage: %.2f µs, %.0f/s), + one raw delivery (ordered consumer: %.2f µs, %.0f/s); same client, %d concurrent",
			h.cpu, h.v, entitySize, writers, a.cpu, a.v, d.cpu, d.v, writers),
		rate: 1 / (1/h.v + 1/a.v + 1/d.v),
		cpu:  cpu,
	}, nil
}

// measureHTTP measures the net/http floor (floorChild) doing what op
// makes of a target, with the workloads' client and concurrency: the
// median rate and server CPU per request of f.rounds rounds of f.n
// requests, after an uncounted one of f.warmup. With a directory
// (removed afterwards) the child is the insert's skeleton, storing there;
// flags are the child's further flags.
func (f *floors) measureHTTP(ctx context.Context, what, skeletonDir string, flags []string, op func(*target) func(context.Context, int) error) (figure, error) {
	args := append([]string{"http-floor-child"}, flags...)
	if skeletonDir != "" {
		args = append(args, "-skeleton-store", filepath.Join(skeletonDir, "jetstream"))
	}
	c, err := startChild(ctx, skeletonDir, args...)
	if err != nil {
		return figure{}, fmt.Errorf("bench-http: %w", err)
	}
	defer c.stop()
	t, err := newTarget("net/http floor", c.url+"/"+httpapi.DevAccountName, f.client, f.doer, nil)
	if err != nil {
		return figure{}, err
	}
	t.pid = c.cmd.Process.Pid
	if f.warmup > 0 {
		if _, err := t.rate(ctx, writers, f.warmup, 1, op(t)); err != nil {
			return figure{}, fmt.Errorf("bench-http: floor of %s: %w", what, err)
		}
	}
	var rates, cpus []float64
	for r := 1; r <= f.rounds; r++ {
		v, err := t.rate(ctx, writers, f.n, 1, op(t))
		if err != nil {
			return figure{}, fmt.Errorf("bench-http: floor of %s: %w", what, err)
		}
		fmt.Fprintf(os.Stderr, "bench-http: floor of %s, net/http, round %d/%d: %.0f requests/s, server CPU %.2f µs per request\n", what, r, f.rounds, v, t.cpu)
		rates, cpus = append(rates, v), append(cpus, t.cpu)
	}
	return figure{v: median(rates), cpu: medianOrZero(cpus)}, nil
}

// measureJournal measures a raw append and a raw delivery of f.n
// messages of entitySize bytes in natsFloorChild, f.rounds rounds after
// an uncounted one of f.warmup: the median rate and CPU per message of
// each.
func (f *floors) measureJournal(ctx context.Context) (appends, deliveries figure, err error) {
	dir, err := os.MkdirTemp("", "cairn-bench-floor-")
	if err != nil {
		return figure{}, figure{}, err
	}
	c, err := startChild(ctx, dir, "http-floor-child", "-nats-store", filepath.Join(dir, "jetstream"))
	if err != nil {
		return figure{}, figure{}, fmt.Errorf("bench-http: %w", err)
	}
	defer c.stop()
	round := func(n int) (a, d figure, err error) {
		if _, err := c.ask("stream"); err != nil {
			return figure{}, figure{}, err
		}
		if a, err = c.measure(fmt.Sprintf("append %d", n), n); err != nil {
			return figure{}, figure{}, err
		}
		d, err = c.measure(fmt.Sprintf("deliver %d", n), n)
		return a, d, err
	}
	if f.warmup > 0 {
		if _, _, err := round(f.warmup); err != nil {
			return figure{}, figure{}, fmt.Errorf("bench-http: floor of an insert: %w", err)
		}
	}
	var ar, ac, dr, dc []float64
	for r := 1; r <= f.rounds; r++ {
		a, d, err := round(f.n)
		if err != nil {
			return figure{}, figure{}, fmt.Errorf("bench-http: floor of an insert: %w", err)
		}
		fmt.Fprintf(os.Stderr, "bench-http: floor of an insert, round %d/%d: raw append %.0f msgs/s, %.2f µs per message; raw delivery %.0f msgs/s, %.2f µs per message\n",
			r, f.rounds, a.v, a.cpu, d.v, d.cpu)
		ar, ac, dr, dc = append(ar, a.v), append(ac, a.cpu), append(dr, d.v), append(dc, d.cpu)
	}
	return figure{v: median(ar), cpu: medianOrZero(ac)}, figure{v: median(dr), cpu: medianOrZero(dc)}, nil
}

// measure sends the child the command line, which does n units of work,
// and returns the rate the child answers with and the child's CPU time
// per unit from before the line to after the answer (0 where the
// platform cannot tell, as target.rate).
func (c *cairnChild) measure(line string, n int) (figure, error) {
	pid := c.cmd.Process.Pid
	before, cpuErr := processCPU(pid)
	answer, err := c.ask(line)
	if err != nil {
		return figure{}, err
	}
	rate, err := strconv.ParseFloat(answer, 64)
	if err != nil {
		return figure{}, fmt.Errorf("%s: answer %q", line, answer)
	}
	f := figure{v: rate}
	if after, err := processCPU(pid); cpuErr == nil && err == nil && after > before {
		f.cpu = float64(after-before) / float64(time.Microsecond) / float64(n)
	}
	return f, nil
}

// ask sends the child a command line and returns its answer: the rest of
// a line "ok …", or an error with the rest of a line "error …".
func (c *cairnChild) ask(line string) (string, error) {
	if _, err := fmt.Fprintln(c.in, line); err != nil {
		return "", err
	}
	answer, err := c.out.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("%s: %w", line, err)
	}
	answer = strings.TrimSpace(answer)
	if rest, ok := strings.CutPrefix(answer, "ok"); ok {
		return strings.TrimSpace(rest), nil
	}
	return "", fmt.Errorf("%s: %s", line, answer)
}

// natsFloorChild runs an embedded NATS server with JetStream storing in
// store (as a host's, and connected in process, as a host is) until its
// stdin closes, and answers each line on it:
//
//	stream       deletes the last stream and makes a new one (file storage)
//	append <n>   publishes n messages of entitySize bytes to it, over
//	             partitions subjects, asynchronously with writers in
//	             flight, and waits for every acknowledgement
//	deliver <n>  reads its first n messages with an ordered consumer
//
// with "ok" (stream) or "ok <messages/s>", or "error <reason>". The parent
// reads the child's CPU time around each line: what one append and one
// delivery cost a host's process with no Cairn code.
func natsFloorChild(store string) error {
	ns, err := journal.StartEmbedded(journal.EmbeddedConfig{StoreDir: store, Port: -1, NoLog: true})
	if err != nil {
		return err
	}
	defer ns.Shutdown()
	nc, err := nats.Connect(ns.ClientURL(), nats.InProcessServer(ns))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(writers))
	if err != nil {
		return err
	}
	ctx := context.Background()
	fmt.Printf("ready %s\n", ns.ClientURL())
	data := make([]byte, entitySize)
	streams := 0
	name := ""
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		verb, arg, _ := strings.Cut(in.Text(), " ")
		n, _ := strconv.Atoi(arg)
		var rate float64
		var err error
		switch verb {
		case "stream":
			if name != "" {
				err = js.DeleteStream(ctx, name)
			}
			if err == nil {
				streams++
				name = "FLOOR" + strconv.Itoa(streams)
				_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"floor." + name + ".>"}, Storage: jetstream.FileStorage})
			}
		case "append":
			rate, err = rawAppend(js, "floor."+name+".p", data, n, partitions)
		case "deliver":
			rate, err = rawDeliver(ctx, js, name, n)
		default:
			err = fmt.Errorf("unknown command %q", in.Text())
		}
		switch {
		case err != nil:
			fmt.Printf("error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		case verb == "stream":
			fmt.Println("ok")
		default:
			fmt.Printf("ok %g\n", rate)
		}
	}
	return in.Err()
}

// rawAppend publishes n messages of data asynchronously, round the
// subjects prefix + 0 to partitions-1, and waits for their
// acknowledgements; it returns the rate.
func rawAppend(js jetstream.JetStream, prefix string, data []byte, n, partitions int) (float64, error) {
	if n < 1 {
		return 0, errors.New("append: no messages")
	}
	start := time.Now()
	for i := range n {
		if _, err := js.PublishAsync(prefix+strconv.Itoa(i%partitions), data); err != nil {
			return 0, err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		return 0, errors.New("append: not acknowledged within a minute")
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// rawDeliver reads the first n messages of stream with an ordered
// consumer, doing nothing with them; it returns the rate.
func rawDeliver(ctx context.Context, js jetstream.JetStream, stream string, n int) (float64, error) {
	if n < 1 {
		return 0, errors.New("deliver: no messages")
	}
	start := time.Now()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return 0, err
	}
	var got atomic.Int64
	done := make(chan struct{})
	cc, err := cons.Consume(func(jetstream.Msg) {
		if got.Add(1) == int64(n) {
			close(done)
		}
	})
	if err != nil {
		return 0, err
	}
	defer cc.Stop()
	select {
	case <-done:
	case <-time.After(time.Minute):
		return 0, fmt.Errorf("deliver: %d of %d messages within a minute", got.Load(), n)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// memoryFloorOf returns the mean encoded size of rows' entities, read by
// the parser of Cairn's HTTP API.
func memoryFloorOf(rows []benchRow) (*floor, error) {
	total := 0
	for _, r := range rows {
		e, err := wire.ParseEntityJSON(r.body)
		if err != nil {
			return nil, fmt.Errorf("bench-http: entity %s/%s: %w", r.pk, r.rk, err)
		}
		n, err := encodedSize(e)
		if err != nil {
			return nil, err
		}
		total += n
	}
	return &floor{name: fmt.Sprintf("the same %d entities encoded: their properties in msgpack (engine.EncodeProperties, as the journal holds them) plus PartitionKey and RowKey, mean", len(rows)),
		bytes: float64(total) / float64(len(rows))}, nil
}
