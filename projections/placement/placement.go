// Package placement decides which hosts materialise which view shards
// (docs/SCALE.md): a table's partitions are cut into a fixed number of
// shards by a hash of the PartitionKey (engine.Shard), and each shard is held by
// R of the live hosts, chosen by rendezvous hashing (highest random
// weight, Owners): every host computes the same owners from the same
// member list, with no directory and no planner, a join moves about
// R/(N+1) of the shards (all to the new host), and a death hands each of
// its shards to a host that already held it when R ≥ 2. Assign adds an
// optional bound on any host's load (consistent hashing with bounded
// loads), for clusters small enough that the plain hash's spread
// matters.
//
// The functions here are pure: the membership, the leases that keep a
// stale owner from answering, and the moves themselves are the callers'.
package placement

import (
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
)

// ShardID names one view shard: a table incarnation (its full name, as
// the catalog spells it in lower case, and its epoch) and the shard's
// index among the table's shards.
type ShardID struct {
	Table string
	Epoch uint64
	Index int
}

func (id ShardID) String() string {
	return id.Table + "/" + strconv.FormatUint(id.Epoch, 10) + "/" + strconv.Itoa(id.Index)
}

// key is the shard's hash, the one input of its hosts' weights.
func (id ShardID) key() uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id.Table))
	var b [17]byte // b[0] = 0 ends the name: "a"+epoch 12 never equals "a1"+epoch 2
	binary.BigEndian.PutUint64(b[1:], id.Epoch)
	binary.BigEndian.PutUint64(b[9:], uint64(id.Index))
	_, _ = h.Write(b[:])
	return mix(h.Sum64())
}

// hostKey is a host's hash, computed once per member list.
func hostKey(host string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(host))
	return mix(h.Sum64())
}

// weight is a host's weight for a shard: the highest R weights own it.
func weight(host, shard uint64) uint64 { return mix(host ^ shard) }

// mix is the SplitMix64 finalizer: every bit of the result depends on
// every bit of x, so that weights of one shard over many hosts, and of
// one host over many shards, are as good as independent.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Members is a member list prepared for placement: the hosts' names and
// their hashes, sorted by name so that its order never decides anything.
type Members struct {
	names []string
	keys  []uint64
}

// NewMembers prepares a member list; duplicates are dropped.
func NewMembers(hosts []string) *Members {
	names := slices.Clone(hosts)
	slices.Sort(names)
	names = slices.Compact(names)
	m := &Members{names: names, keys: make([]uint64, len(names))}
	for i, n := range names {
		m.keys[i] = hostKey(n)
	}
	return m
}

// Owners returns the hosts that hold a shard, most preferred first (the
// first is its primary): the r hosts of the highest weight, or every
// host when there are fewer. Ties, which need two hosts of the same hash,
// go to the smaller name.
func (m *Members) Owners(id ShardID, r int) []string {
	idx := m.top(id.key(), r, nil)
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = m.names[j]
	}
	return out
}

// top returns the indexes of the r hosts of the highest weight for shard
// key k, skipping those full says are full (nil: none is), best first.
func (m *Members) top(k uint64, r int, full func(int) bool) []int {
	r = min(r, len(m.names))
	best := make([]int, 0, r)
	ws := make([]uint64, 0, r)
	for i, hk := range m.keys {
		if full != nil && full(i) {
			continue
		}
		w := weight(hk, k)
		// Insertion into the short sorted list of the best so far.
		pos := len(ws)
		for pos > 0 && ws[pos-1] < w {
			pos--
		}
		if pos >= r {
			continue
		}
		if len(ws) < r {
			ws, best = append(ws, 0), append(best, 0)
		}
		copy(ws[pos+1:], ws[pos:len(ws)-1])
		copy(best[pos+1:], best[pos:len(best)-1])
		ws[pos], best[pos] = w, i
	}
	return best
}

// Assignment is where every shard of a set lives: its owners, most
// preferred first, and each host's count of replicas and primaries.
type Assignment struct {
	Owners    map[ShardID][]string
	Replicas  map[string]int
	Primaries map[string]int
}

// keyed is a shard and its hash, the order Assign places shards in.
type keyed struct {
	id  ShardID
	key uint64
}

// Assign places every shard on r hosts. With bound > 0 no host holds more
// than ⌈(1+bound) × the mean⌉ replicas: shards are placed one after
// another in the order of their hashes, each on its r hosts of the
// highest weight among those not yet full (consistent hashing with
// bounded loads). bound ≤ 0 is plain rendezvous hashing (each shard's
// owners depend on the member list alone).
func (m *Members) Assign(shards []ShardID, r int, bound float64) *Assignment {
	a := &Assignment{Owners: make(map[ShardID][]string, len(shards)), Replicas: map[string]int{}, Primaries: map[string]int{}}
	if len(m.names) == 0 {
		return a
	}
	r = min(r, len(m.names))
	order := make([]keyed, len(shards))
	for i, id := range shards {
		order[i] = keyed{id, id.key()}
	}
	slices.SortFunc(order, func(a, b keyed) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.id.Table, b.id.Table),
			cmp.Compare(a.id.Epoch, b.id.Epoch), cmp.Compare(a.id.Index, b.id.Index))
	})
	var full func(int) bool
	load := make([]int, len(m.names))
	limit := 0
	if bound > 0 {
		total := len(shards) * r
		limit = int(math.Ceil(float64(total) * (1 + bound) / float64(len(m.names))))
		full = func(i int) bool { return load[i] >= limit }
	}
	placed := make([][]int, len(order)) // each shard's owners, by index
	for k, s := range order {
		idx := m.top(s.key, r, full)
		if len(idx) < r {
			// Fewer hosts with room than replicas: the rest go to the
			// best of the full ones, never twice to one host.
			for _, j := range m.top(s.key, len(m.names), nil) {
				if len(idx) < r && !slices.Contains(idx, j) {
					idx = append(idx, j)
				}
			}
		}
		for _, j := range idx {
			load[j]++
		}
		placed[k] = idx
	}
	if bound > 0 {
		m.relieve(order, placed, load, limit)
	}
	for k, s := range order {
		owners := make([]string, len(placed[k]))
		for i, j := range placed[k] {
			owners[i] = m.names[j]
		}
		a.Owners[s.id] = owners
		a.Primaries[owners[0]]++
	}
	for i, n := range m.names {
		if load[i] > 0 {
			a.Replicas[n] = load[i]
		}
	}
	return a
}

// relieve moves replicas off the hosts the greedy pass left over the
// limit (its last shards found fewer hosts with room than replicas): for
// each such host, in the shards' order, a shard it holds goes to the host
// of the highest weight for it that has room and does not hold it. There
// always is one while a host is over: the others then hold fewer shards
// than it does, and the limit leaves room for every replica.
func (m *Members) relieve(order []keyed, placed [][]int, load []int, limit int) {
	for h := range load {
		for k := 0; k < len(order) && load[h] > limit; k++ {
			at := slices.Index(placed[k], h)
			if at < 0 {
				continue
			}
			for _, g := range m.top(order[k].key, len(m.names), nil) {
				if load[g] < limit && !slices.Contains(placed[k], g) {
					placed[k][at] = g
					load[h]--
					load[g]++
					break
				}
			}
		}
	}
}

// Moves compares two assignments of the same shards: Added counts the
// replicas placed on a host that did not hold the shard before (each a
// snapshot load and a tail replay), Removed those dropped, and
// NewPrimaries the shards whose primary changed, of which ColdPrimaries
// went to a host that did not hold the shard (a primary that changes to
// a host already holding the shard costs nothing but the switch).
type Moves struct {
	Added, Removed, NewPrimaries, ColdPrimaries int
}

// Diff returns the moves from a to b.
func Diff(a, b *Assignment) Moves {
	var mv Moves
	for id, after := range b.Owners {
		before := a.Owners[id]
		for _, h := range after {
			if !slices.Contains(before, h) {
				mv.Added++
			}
		}
		for _, h := range before {
			if !slices.Contains(after, h) {
				mv.Removed++
			}
		}
		if len(before) > 0 && len(after) > 0 && before[0] != after[0] {
			mv.NewPrimaries++
			if !slices.Contains(before, after[0]) {
				mv.ColdPrimaries++
			}
		}
	}
	return mv
}
