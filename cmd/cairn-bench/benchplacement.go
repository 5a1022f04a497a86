package main

import (
	"flag"
	"fmt"
	"runtime"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/projections/placement"
)

// benchPlacement simulates the placement of view shards on hosts
// (projections/placement, docs/SCALE.md): for each cluster size, plain
// rendezvous hashing and the bounded-load variant, the replicas per host
// against the mean, and the replicas moved when one host joins and when
// one dies against the fewest any placement could move. Nothing runs but
// the placement functions: the figures are the design's, at sizes no
// machine here reaches.
func benchPlacement(args []string) error {
	fs := flag.NewFlagSet("placement", flag.ContinueOnError)
	r := fs.Int("r", 2, "replicas of each shard (-view-replicas)")
	per := fs.Int("shards-per-table", 64, "view shards of each table")
	bound := fs.Float64("bound", 0.05, "the bounded variant's bound: no host above (1+bound) × the mean (a fifth of it is run too)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	fmt.Printf("# cairn bench placement: GOMAXPROCS=%d, %s/%s, %s, R=%d, %d shards per table\n\n",
		runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), *r, *per)
	fmt.Println("| hosts | shards | placement | replicas per host: mean | min / median / max | max against mean | primaries min / max | join: replicas added (floor) | of which not on the new host | death: replicas added (floor) | primaries started cold | one host computes it all |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, size := range []struct{ hosts, shards int }{{3, 64}, {6, 64}, {3, 1024}, {6, 1024}, {20, 6400}, {200, 20_000}, {1000, 100_000}} {
		for _, b := range []float64{0, *bound, *bound / 5} {
			rep := placement.Simulate(placement.SimConfig{Hosts: size.hosts, Shards: size.shards, ShardsPerTable: *per, R: *r, Bound: b})
			name := "rendezvous"
			if b > 0 {
				name = fmt.Sprintf("bounded %g", b)
			}
			fmt.Printf("| %d | %d | %s | %.1f | %d / %d / %d | %.2f | %d / %d | %d (%d) | %d | %d (%d) | %d | %v |\n",
				size.hosts, size.shards, name, rep.MeanReplicas, rep.MinReplicas, rep.MedianReplicas, rep.MaxReplicas,
				float64(rep.MaxReplicas)/rep.MeanReplicas, rep.MinPrimaries, rep.MaxPrimaries,
				rep.Join.Added, rep.JoinFloor, rep.JoinElsewhere,
				rep.Death.Added, rep.DeathFloor, rep.Death.ColdPrimaries, rep.Compute.Round(100_000))
		}
	}
	return nil
}
