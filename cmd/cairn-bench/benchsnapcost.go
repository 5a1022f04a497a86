package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
)

// benchSnapshotCost measures what writing snapshots costs the
// many-partition inserts (1 KB entities, one per command, -window in
// flight): two nodes in this process, one with snapshots at their
// defaults (shared through the store, as a node runs by default) and one
// with -snapshots=false, take the same workload in alternate rounds (the
// order swapped each round), each round on a new table deleted after it.
// A round of -n commands crosses the tail bound several times (32 MiB is
// about 30,000 of these records), so it writes bases and deltas.
func benchSnapshotCost(args []string) error {
	fs := flag.NewFlagSet("snapshots", flag.ContinueOnError)
	n := fs.Int("n", 200_000, "commands per round")
	window := fs.Int("window", 512, "commands in flight")
	rounds := fs.Int("rounds", 3, "rounds on each node; the medians are reported")
	shared := fs.Bool("shared", true, "the node with snapshots shares them through the object store (-snapshots-shared)")
	every := fs.Int("snapshot-every", 0, "the node's -snapshot-every (0: the default)")
	bytes := fs.Int64("snapshot-bytes", 0, "the node's -snapshot-bytes (0: the default)")
	compact := fs.Float64("snapshot-compact", 0, "the node's -snapshot-compact (0: the default)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type target struct {
		name  string
		b     *bencher
		dir   string
		rates []float64
	}
	var targets []*target
	for _, snapshots := range []bool{true, false} {
		dir, err := os.MkdirTemp("", "cairn-bench-snapcost-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		h, stop, err := startCairnConfig(ctx, dir, func(c *nodeConfig) {
			c.NoSnapshots, c.NoSharedSnapshots = !snapshots, !*shared
			c.Views.SnapshotEvery, c.Views.SnapshotBytes, c.Views.SnapshotCompact = *every, *bytes, *compact
		})
		if err != nil {
			return err
		}
		defer stop()
		nc, err := nats.Connect(h.ClientURL(), nodeCreds...)
		if err != nil {
			return err
		}
		defer nc.Close()
		name := "snapshots off"
		if snapshots {
			name = "snapshots on (defaults)"
		}
		targets = append(targets, &target{name: name, dir: dir, b: &bencher{nc: nc, cl: client.New(nc), n: *n, window: *window}})
	}
	fmt.Printf("# cairn bench snapshots: GOMAXPROCS=%d, %s/%s, %s, n=%d, window=%d, rounds=%d (median), shared %v, snapshot-every %d, snapshot-bytes %d, snapshot-compact %g (0: the defaults)\n\n",
		runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), *n, *window, *rounds, *shared, *every, *bytes, *compact)
	for r := 0; r < *rounds; r++ {
		order := []*target{targets[0], targets[1]}
		if r%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, tg := range order {
			table, err := tg.b.newTable(ctx, "SnapCost")
			if err != nil {
				return err
			}
			res, err := tg.b.pipelined(tg.b.nc, *n, *window, "cairn.cmd."+table, func(i int) *engine.Request {
				return &engine.Request{Op: "Insert", Entity: sampleEntity(fmt.Sprintf("p%05d", i%10000), fmt.Sprintf("r%07d", i))}
			})
			if err != nil {
				return fmt.Errorf("%s: %w", tg.name, err)
			}
			// The snapshots written for the table, before its drop
			// removes them.
			files, _ := filepath.Glob(filepath.Join(tg.dir, "snapshots", "*", "*"))
			fmt.Fprintf(os.Stderr, "round %d, %s: %.0f entities/s, %d snapshot files\n", r+1, tg.name, res.rate, len(files))
			tg.rates = append(tg.rates, res.rate)
			if err := tg.b.cl.DeleteTable(ctx, table); err != nil {
				return err
			}
			// Let the drop's removals and the last snapshot's write end
			// before the other node's round: polled, not slept.
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if left, _ := filepath.Glob(filepath.Join(tg.dir, "snapshots", "*")); len(left) == 0 {
					break
				}
			}
		}
	}
	on, off := median(targets[0].rates), median(targets[1].rates)
	fmt.Println("| insert, many partitions (1 entity per command) | entities/s | rounds |")
	fmt.Println("|---|---|---|")
	for _, tg := range targets {
		fmt.Printf("| %s | %.0f | %.0f |\n", tg.name, median(tg.rates), tg.rates)
	}
	fmt.Printf("\nwith snapshots against without: %.3f (a cost of %.1f %%)\n", on/off, 100*(1-on/off))
	return nil
}
