package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// benchPlaced measures what placing view shards on hosts saves
// (docs/SCALE.md): the heap of one host holding a table whole, then the
// heap of each host of clusters whose hosts each hold their share of the
// shards, with the same table. Every host is a child process (host-child)
// on one NATS server that this process runs, so that each heap is one
// host's alone; the heap of a host holding no table, measured first, is
// the floor every host pays before any view.
func benchPlaced(args []string) error {
	fs := flag.NewFlagSet("placed", flag.ContinueOnError)
	entities := fs.Int("entities", 200_000, "entities in the table")
	valueBytes := fs.Int("value-bytes", 1000, "bytes of values of each entity (about)")
	partitions := fs.Int("partitions", 4096, "partitions the entities spread over")
	hostsFlag := fs.String("hosts", "3,6", "cluster sizes, comma-separated")
	replicas := fs.Int("r", 2, "hosts holding each shard (-view-replicas)")
	restarts := fs.Int("restarts", 1, "rounds of a host killed and started again on the first cluster size, with and without snapshots (0: none)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	var sizes []int
	for _, s := range strings.Split(*hostsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-hosts: %q is not a number of hosts", s)
		}
		sizes = append(sizes, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "cairn-bench-placed-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := journal.StartEmbedded(journal.EmbeddedConfig{StoreDir: filepath.Join(dir, "nats"), Host: "127.0.0.1", Port: -1, NoLog: true})
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	url := srv.ClientURL()
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	j, err := journal.New(nc, journal.Config{})
	if err != nil {
		return err
	}
	if err := j.Init(ctx); err != nil {
		return err
	}
	fmt.Printf("# cairn bench placed: GOMAXPROCS=%d, %s/%s, %s, %d entities of about %d bytes of values over %d partitions, %d shards, R=%d\n\n",
		runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), *entities, *valueBytes, *partitions, engine.DefaultShards, *replicas)

	// The floor: a host holding no table.
	floor, err := measureHosts(ctx, url, 1, 0, nil, nil)
	if err != nil {
		return err
	}
	const table = "PlacedBench"
	epoch, err := createJournalTable(ctx, j, table)
	if err != nil {
		return err
	}
	w := &historyWriter{j: j, table: table, epoch: epoch, shards: engine.DefaultShards, entities: *entities, parts: *partitions,
		pad: strings.Repeat("x", max(*valueBytes-150, 0))}
	if err := w.round(ctx, 1); err != nil {
		return err
	}
	last, err := j.LastStreamSeq(ctx, table, epoch)
	if err != nil {
		return err
	}
	// The journal's fan-out: the records a round of writes, one per
	// partition, delivers to the hosts' views, per record written.
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	fan := &fanout{j: j, js: js, w: w, table: table, epoch: epoch}
	fanOf := func(n int, goal *placedGoal) func([]*cairnChild) error {
		return func(hosts []*cairnChild) error {
			f, err := fan.measure(ctx, hosts, goal)
			fan.per[n] = f
			return err
		}
	}
	wholeGoal := &placedGoal{seq: last, entities: uint64(*entities)}
	whole, err := measureHosts(ctx, url, 1, 0, wholeGoal, fanOf(1, wholeGoal))
	if err != nil {
		return err
	}
	mb := func(b uint64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }
	views := func(b uint64) uint64 { return b - min(b, floor[0].live) }
	fmt.Printf("A host holding no table: %s of heap. One host holding the table whole: %s (%s for its views, %.0f bytes per entity); its view and the outbox relay were delivered %.2f records per record written.\n\n",
		mb(floor[0].live), mb(whole[0].live), mb(views(whole[0].live)), float64(views(whole[0].live))/float64(*entities), fan.per[1])
	fmt.Println("| hosts | R | entities held per host: min / max (share of the table) | heap per host: min / median / max | largest heap against the whole host's | its views against the whole host's views | records its readers were delivered per record written: the views and the outbox relay (floor: R + 1; every host's view reading the whole journal: hosts + 1) |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, n := range sizes {
		goal := &placedGoal{seq: last, entities: uint64(min(n, *replicas)) * uint64(*entities), partial: n > *replicas}
		ms, err := measureHosts(ctx, url, n, *replicas, goal, fanOf(n, goal))
		if err != nil {
			return err
		}
		last = goal.seq // moved by the fan-out's writes
		heaps := make([]float64, len(ms))
		held := make([]uint64, len(ms))
		for i, m := range ms {
			heaps[i], held[i] = float64(m.live), m.entities
		}
		slices.Sort(heaps)
		slices.Sort(held)
		top := uint64(heaps[len(heaps)-1])
		fmt.Printf("| %d | %d | %d / %d (%.2f) | %s / %s / %s | %.2f | %.2f | %.2f (floor %d; whole journal %d) |\n", n, *replicas,
			held[0], held[len(held)-1], float64(held[len(held)-1])/float64(*entities),
			mb(uint64(heaps[0])), mb(uint64(median(heaps))), mb(top),
			float64(top)/float64(whole[0].live), float64(views(top))/float64(views(whole[0].live)),
			fan.per[n], min(n, *replicas)+1, n+1)
	}
	if *restarts == 0 {
		return nil
	}
	n := sizes[0]
	fmt.Printf("\nA host of %d (R=%d) killed with SIGKILL once the views settled, then started again on its data directory: from its start to ready, its views at the table's end. Without snapshots it replays the journal, as a host holding some shards did before shard bases.\n\n", n, *replicas)
	fmt.Println("| round | views start from | ready after |")
	fmt.Println("|---|---|---|")
	goal := &placedGoal{seq: last, entities: uint64(min(n, *replicas)) * uint64(*entities), partial: n > *replicas}
	for round := 1; round <= *restarts; round++ {
		for _, noSnap := range []bool{false, true} {
			took, err := measureRestart(ctx, url, n, *replicas, goal, noSnap)
			if err != nil {
				return err
			}
			from := "its shard bases, then the journal after them"
			if noSnap {
				from = "the journal (no snapshots)"
			}
			fmt.Printf("| %d | %s | %.1f s |\n", round, from, took.Seconds())
		}
	}
	return nil
}

// measureRestart starts n hosts holding each shard on replicas of them,
// waits until their views reach goal, kills the first with SIGKILL and
// starts it again on its data directory, and returns the time from that
// start until its views are back at the goal's position.
func measureRestart(ctx context.Context, url string, n, replicas int, goal *placedGoal, noSnapshots bool) (time.Duration, error) {
	var hosts []*cairnChild
	defer func() {
		for _, h := range hosts {
			h.stop()
		}
	}()
	args := func(dir string) []string {
		a := []string{"host-child", "-data", filepath.Join(dir, "data"), "-nats-url", url, "-view-replicas", strconv.Itoa(replicas)}
		if noSnapshots {
			a = append(a, "-no-snapshots")
		}
		return a
	}
	for range n {
		dir, err := os.MkdirTemp("", "cairn-bench-child-")
		if err != nil {
			return 0, err
		}
		h, err := startChild(ctx, dir, args(dir)...)
		if err != nil {
			return 0, err
		}
		hosts = append(hosts, h)
	}
	if err := settle(hosts, goal); err != nil {
		return 0, err
	}
	first := hosts[0]
	first.kill()
	start := time.Now()
	h, err := startChild(ctx, first.dir, args(first.dir)...)
	if err != nil {
		return 0, err
	}
	hosts[0] = h
	for {
		m, err := h.memory()
		if err != nil {
			return 0, err
		}
		if m.seq >= goal.seq && (m.partial > 0) == goal.partial {
			return time.Since(start), nil
		}
		if time.Since(start) > 10*time.Minute {
			return 0, errors.New("the restarted host's views did not reach the table's end within 10 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// placedGoal is what a cluster's views must show before its heaps are
// measured: every host at the table's last position, holding entities in
// all (each entity once per replica), in views of some shards.
type placedGoal struct {
	seq      uint64
	entities uint64
	partial  bool
}

// measureHosts starts n hosts holding each shard on replicas of them (0:
// every host whole), waits until their views reach goal (nil: none), and
// returns each host's memory after a collection.
func measureHosts(ctx context.Context, url string, n, replicas int, goal *placedGoal, during func([]*cairnChild) error) ([]memSample, error) {
	var hosts []*cairnChild
	defer func() {
		for _, h := range hosts {
			h.stop()
		}
	}()
	for range n {
		dir, err := os.MkdirTemp("", "cairn-bench-child-")
		if err != nil {
			return nil, err
		}
		h, err := startChild(ctx, dir, "host-child", "-data", filepath.Join(dir, "data"), "-nats-url", url, "-view-replicas", strconv.Itoa(replicas))
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, h)
	}
	if goal == nil {
		return samples(hosts)
	}
	if err := settle(hosts, goal); err != nil {
		return nil, err
	}
	ms, err := samples(hosts)
	if err != nil || during == nil {
		return ms, err
	}
	return ms, during(hosts)
}

// samples returns each host's memory after a collection.
func samples(hosts []*cairnChild) ([]memSample, error) {
	ms := make([]memSample, len(hosts))
	for i, h := range hosts {
		m, err := h.memory()
		if err != nil {
			return nil, err
		}
		ms[i] = m
	}
	return ms, nil
}

// settle waits until the hosts' views reach goal: every host at its
// position, in views of some shards when it says so, holding its entities
// in all.
func settle(hosts []*cairnChild, goal *placedGoal) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var held uint64
		done := true
		for _, h := range hosts {
			m, err := h.memory()
			if err != nil {
				return err
			}
			held += m.entities
			if m.seq < goal.seq || goal.partial && m.partial == 0 || !goal.partial && m.partial != 0 {
				done = false
			}
		}
		if done && held == goal.entities {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the hosts' views did not settle on their shards within 10 minutes")
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// fanout measures the journal's fan-out on a settled cluster: the records
// its views' consumers deliver per record written, over a round of
// writes of one record per partition.
type fanout struct {
	j     *journal.Journal
	js    jetstream.JetStream
	w     *historyWriter
	table string
	epoch uint64
	round int
	per   map[int]float64 // by cluster size
}

// measure writes two rounds and returns what the consumers of the
// table's stream delivered during the second per record: the first lets
// every reader catch up (the outbox relay of a new host reads the table
// from its start), and the second is measured once they all have. goal's
// position moves to the end of the rounds.
func (f *fanout) measure(ctx context.Context, hosts []*cairnChild, goal *placedGoal) (float64, error) {
	if f.per == nil {
		f.per = map[int]float64{}
	}
	var before map[string]uint64
	parts := cmp.Or(f.w.parts, historyPartitions)
	for round := range 2 {
		entities := f.w.entities
		f.round++
		f.w.entities = parts // one record per partition: each updates an entity
		err := f.w.round(ctx, 1000+f.round)
		f.w.entities = entities
		if err != nil {
			return 0, err
		}
		if goal.seq, err = f.j.LastStreamSeq(ctx, f.table, f.epoch); err != nil {
			return 0, err
		}
		if err := settle(hosts, goal); err != nil {
			return 0, err
		}
		now, err := f.delivered(ctx)
		if err != nil {
			return 0, err
		}
		if round == 0 {
			before = now
			continue
		}
		var sum uint64
		for name, n := range now {
			b, ok := before[name]
			if !ok {
				return 0, fmt.Errorf("the consumer %s of the table's stream appeared while the fan-out was measured (a view moved, or fell behind and went back to reading the whole journal)", name)
			}
			sum += n - b
		}
		return float64(sum) / float64(parts), nil
	}
	return 0, nil
}

// delivered returns what each consumer of the table's stream delivered,
// once that stopped moving (the views are at the end already; the outbox
// relay may still be catching up). Consumers a view left behind when it
// moved linger without delivering until the server removes them.
func (f *fanout) delivered(ctx context.Context) (map[string]uint64, error) {
	deadline := time.Now().Add(5 * time.Minute)
	var prev map[string]uint64
	for {
		s, err := f.js.Stream(ctx, f.j.TableStream(f.table, f.epoch))
		if err != nil {
			return nil, err
		}
		out := map[string]uint64{}
		lister := s.ListConsumers(ctx)
		for ci := range lister.Info() {
			out[ci.Name] = ci.Delivered.Consumer
		}
		if err := lister.Err(); err != nil {
			return nil, err
		}
		if maps.Equal(out, prev) {
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, errors.New("the readers of the table's stream did not settle within 5 minutes")
		}
		prev = out
		time.Sleep(time.Second)
	}
}
