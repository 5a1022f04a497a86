package placement

import (
	"fmt"
	"slices"
	"time"
)

// SimConfig is a placement simulation: Shards view shards (tables of
// ShardsPerTable each) on Hosts hosts, R replicas each, Bound as Assign's.
type SimConfig struct {
	Hosts, Shards, ShardsPerTable, R int
	Bound                            float64
}

// SimReport is what a simulation measured: the replicas and primaries
// per host (the ideal is the mean), the moves when one host joins and
// when one dies against the fewest any placement could make, and how
// long one host takes to compute the whole assignment.
type SimReport struct {
	Config SimConfig

	MeanReplicas                             float64
	MinReplicas, MedianReplicas, MaxReplicas int
	MinPrimaries, MaxPrimaries               int

	Join, Death           Moves
	JoinFloor, DeathFloor int // replicas that must move at the least: the new host's fair share, the dead host's replicas
	JoinElsewhere         int // replicas a join added on hosts other than the new one

	Compute time.Duration
}

// Simulate places the shards on hosts "h0000"…, then again with one host
// more ("joined"), and again without the first host ("h0000" dies).
func Simulate(cfg SimConfig) SimReport {
	per := max(cfg.ShardsPerTable, 1)
	shards := make([]ShardID, cfg.Shards)
	for i := range shards {
		shards[i] = ShardID{Table: fmt.Sprintf("t%06d", i/per), Epoch: 1, Index: i % per}
	}
	hosts := make([]string, cfg.Hosts)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%04d", i)
	}
	rep := SimReport{Config: cfg}
	m := NewMembers(hosts)
	start := time.Now()
	a := m.Assign(shards, cfg.R, cfg.Bound)
	rep.Compute = time.Since(start)

	r := min(cfg.R, cfg.Hosts)
	rep.MeanReplicas = float64(cfg.Shards*r) / float64(cfg.Hosts)
	var loads, prims []int
	for _, h := range hosts {
		loads = append(loads, a.Replicas[h])
		prims = append(prims, a.Primaries[h])
	}
	slices.Sort(loads)
	slices.Sort(prims)
	rep.MinReplicas, rep.MedianReplicas, rep.MaxReplicas = loads[0], loads[len(loads)/2], loads[len(loads)-1]
	rep.MinPrimaries, rep.MaxPrimaries = prims[0], prims[len(prims)-1]

	joined := NewMembers(append(slices.Clone(hosts), "joined"))
	ja := joined.Assign(shards, cfg.R, cfg.Bound)
	rep.Join = Diff(a, ja)
	rep.JoinElsewhere = rep.Join.Added - ja.Replicas["joined"]
	rep.JoinFloor = cfg.Shards * min(cfg.R, cfg.Hosts+1) / (cfg.Hosts + 1)
	if cfg.Hosts > 1 {
		dead := NewMembers(hosts[1:])
		rep.Death = Diff(a, dead.Assign(shards, cfg.R, cfg.Bound))
		rep.DeathFloor = a.Replicas[hosts[0]]
		if cfg.R >= cfg.Hosts {
			rep.DeathFloor = 0 // every host held everything: nothing to place again
		}
	}
	return rep
}
