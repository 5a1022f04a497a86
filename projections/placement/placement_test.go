package placement

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func hosts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("host-%d", i)
	}
	return out
}

func shards(tables, per int) []ShardID {
	var out []ShardID
	for t := range tables {
		for i := range per {
			out = append(out, ShardID{Table: fmt.Sprintf("acct.table%d", t), Epoch: uint64(t + 1), Index: i})
		}
	}
	return out
}

// TestOwners: a shard's owners are r distinct hosts (all of them when
// there are fewer), the same whatever the member list's order or
// duplicates, and the owners for r are the first r of those for r+1.
func TestOwners(t *testing.T) {
	hs := hosts(9)
	m := NewMembers(hs)
	rnd := rand.New(rand.NewPCG(1, 2))
	shuffled := slices.Clone(hs)
	rnd.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	m2 := NewMembers(append(shuffled, hs[3], hs[5]))
	for _, id := range shards(5, 16) {
		var prev []string
		for r := 1; r <= 10; r++ {
			o := m.Owners(id, r)
			if len(o) != min(r, len(hs)) {
				t.Fatalf("%v r=%d: %d owners", id, r, len(o))
			}
			if len(slices.Compact(slices.Sorted(slices.Values(o)))) != len(o) {
				t.Fatalf("%v r=%d: a host twice in %v", id, r, o)
			}
			if !slices.Equal(o[:len(prev)], prev) {
				t.Fatalf("%v: owners for r=%d %v do not start with those for r-1 %v", id, r, o, prev)
			}
			if o2 := m2.Owners(id, r); !slices.Equal(o, o2) {
				t.Fatalf("%v r=%d: %v, %v from the same hosts in another order", id, r, o, o2)
			}
			prev = o
		}
	}
	if o := NewMembers(nil).Owners(ShardID{Table: "x"}, 2); len(o) != 0 {
		t.Fatalf("owners among no hosts: %v", o)
	}
}

// TestJoinAndDeath: under plain rendezvous hashing a joining host takes
// replicas and nothing else moves (every replica added is on the new
// host, one removed for each), and a dead host's shards are placed again
// with the host that held each beside it becoming its primary (R ≥ 2:
// no primary starts cold).
func TestJoinAndDeath(t *testing.T) {
	hs := hosts(12)
	all := shards(40, 32)
	const r = 2
	before := NewMembers(hs).Assign(all, r, 0)
	joined := NewMembers(append(slices.Clone(hs), "new")).Assign(all, r, 0)
	mv := Diff(before, joined)
	if mv.Added != joined.Replicas["new"] || mv.Removed != mv.Added || mv.ColdPrimaries != joined.Primaries["new"] {
		t.Fatalf("join: %+v, the new host holds %d replicas and %d primaries", mv, joined.Replicas["new"], joined.Primaries["new"])
	}
	// About r/(N+1) of the replicas: 1,280×2/13 ≈ 197.
	if fair := len(all) * r / (len(hs) + 1); mv.Added < fair/2 || mv.Added > 2*fair {
		t.Fatalf("join moved %d replicas, about %d expected", mv.Added, fair)
	}
	dead := NewMembers(hs[1:]).Assign(all, r, 0)
	mv = Diff(before, dead)
	if mv.Removed != before.Replicas[hs[0]] || mv.Added != mv.Removed {
		t.Fatalf("death: %+v, the dead host held %d replicas", mv, before.Replicas[hs[0]])
	}
	if mv.NewPrimaries != before.Primaries[hs[0]] || mv.ColdPrimaries != 0 {
		t.Fatalf("death: %+v, the dead host was primary of %d shards", mv, before.Primaries[hs[0]])
	}
	for id, o := range dead.Owners {
		if slices.Contains(o, hs[0]) {
			t.Fatalf("%v still on the dead host: %v", id, o)
		}
	}
}

// TestBoundedLoad: with a bound no host holds more than ⌈(1+bound) ×
// the mean⌉ replicas, every shard still has r distinct owners, and the
// assignment does not depend on the order the shards are given in.
func TestBoundedLoad(t *testing.T) {
	for _, c := range []struct {
		hosts, tables, per, r int
		bound                 float64
	}{
		{3, 1, 64, 2, 0.05}, {6, 1, 64, 2, 0.05}, {7, 20, 16, 3, 0.05}, {3, 2, 8, 3, 0.05}, {2, 1, 4, 3, 0.05},
		// Tight bounds, where the greedy pass's last shards find too few
		// hosts with room.
		{3, 1, 64, 2, 0.01}, {3, 1, 64, 2, 1e-9}, {5, 1, 64, 2, 1e-9}, {6, 1, 64, 3, 1e-9}, {4, 3, 64, 2, 0.01},
	} {
		all := shards(c.tables, c.per)
		m := NewMembers(hosts(c.hosts))
		bound := c.bound
		a := m.Assign(all, c.r, bound)
		r := min(c.r, c.hosts)
		limit := int(math.Ceil(float64(len(all)*r) * (1 + bound) / float64(c.hosts)))
		for h, n := range a.Replicas {
			if n > limit {
				t.Errorf("%+v: %s holds %d replicas, the limit is %d", c, h, n, limit)
			}
		}
		for id, o := range a.Owners {
			if len(o) != r || len(slices.Compact(slices.Sorted(slices.Values(o)))) != r {
				t.Fatalf("%+v: %v owned by %v", c, id, o)
			}
		}
		rev := slices.Clone(all)
		slices.Reverse(rev)
		b := m.Assign(rev, c.r, bound)
		for id, o := range a.Owners {
			if !slices.Equal(o, b.Owners[id]) {
				t.Fatalf("%+v: %v owned by %v, by %v with the shards in another order", c, id, o, b.Owners[id])
			}
		}
	}
}

// TestSimulate: the simulation's figures at a small size hold together:
// the replicas add up, and the moves are at or above their floors.
func TestSimulate(t *testing.T) {
	for _, bound := range []float64{0, 0.1} {
		rep := Simulate(SimConfig{Hosts: 20, Shards: 2000, ShardsPerTable: 64, R: 2, Bound: bound})
		if rep.MeanReplicas != 200 || rep.MinReplicas > 200 || rep.MaxReplicas < 200 || rep.MedianReplicas == 0 {
			t.Fatalf("bound %g: %+v", bound, rep)
		}
		if rep.Join.Added < rep.JoinFloor || rep.Death.Added < rep.DeathFloor || rep.DeathFloor == 0 {
			t.Fatalf("bound %g: moves below their floors: %+v", bound, rep)
		}
		if bound > 0 && float64(rep.MaxReplicas) > 1.1*rep.MeanReplicas+1 {
			t.Fatalf("bound %g: max %d against a mean of %g", bound, rep.MaxReplicas, rep.MeanReplicas)
		}
	}
}
