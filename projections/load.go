package projections

import (
	"sort"
	"sync"
	"sync/atomic"
)

// maxReadCounters bounds the partitions whose reads a view counts one by
// one; reads of further partitions are counted in the table's total only.
const maxReadCounters = 100_000

// readLoad counts the entities read from a table's view, per partition.
// Writes need no counter of their own: every Partition in the view already
// counts its records and entity writes (journal truth, the same on every
// host).
type readLoad struct {
	total atomic.Uint64
	n     atomic.Int64
	parts sync.Map // partition key → *atomic.Uint64
}

// NoteRead counts n entities read from partition pk (queries and point
// reads call it, so that a hot partition shows in the load).
func (t *Table) NoteRead(pk string, n int) {
	if n <= 0 {
		return
	}
	t.reads.total.Add(uint64(n))
	if c, ok := t.reads.parts.Load(pk); ok {
		c.(*atomic.Uint64).Add(uint64(n))
		return
	}
	if t.reads.n.Load() >= maxReadCounters {
		return
	}
	c, loaded := t.reads.parts.LoadOrStore(pk, new(atomic.Uint64))
	if !loaded {
		t.reads.n.Add(1)
	}
	c.(*atomic.Uint64).Add(uint64(n))
}

// PartitionLoad is the load of one partition.
type PartitionLoad struct {
	Key      string `json:"partitionKey"`
	Records  uint64 `json:"records"`  // journal records (commits)
	Writes   uint64 `json:"writes"`   // entity writes
	Reads    uint64 `json:"reads"`    // entities read from this host's view
	Entities int64  `json:"entities"` // entities now present
}

// Load is the load of a table: totals and its hottest partitions.
type Load struct {
	Table      string          `json:"table"`
	Partitions int             `json:"partitions"`
	Entities   int64           `json:"entities"`
	Records    uint64          `json:"records"`
	Writes     uint64          `json:"writes"`
	Reads      uint64          `json:"reads"`
	Hot        []PartitionLoad `json:"hot"`
	// Horizon is the first journal position the table keeps (1: nothing
	// pruned), as this node last saw it; Retention the table's own ("":
	// the node's default).
	Horizon   uint64 `json:"horizon"`
	Retention string `json:"retention,omitempty"`
	// Fault is why the table's view stopped for good, if it did: the
	// record, its journal position and the time (see Fault).
	Fault *Fault `json:"fault,omitempty"`
}

// Load returns the table's totals and its top partitions by writes plus
// reads. Writes count every commit in the journal since the table was
// created; reads count this host's reads since it started. It walks every
// partition of the snapshot: an operator's call, not a hot path.
func (t *Table) Load(top int) Load {
	snap := t.Snapshot()
	h := t.History()
	l := Load{Table: t.name, Reads: t.reads.total.Load(), Fault: t.Fault(), Horizon: max(h.Horizon, 1), Retention: h.Retention}
	var all []PartitionLoad
	snap.parts.Scan(func(p *Partition) bool {
		pl := PartitionLoad{Key: p.Key, Records: p.Records, Writes: p.Writes, Entities: p.Entities}
		if c, ok := t.reads.parts.Load(p.Key); ok {
			pl.Reads = c.(*atomic.Uint64).Load()
		}
		l.Partitions++
		l.Entities += p.Entities
		l.Records += p.Records
		l.Writes += p.Writes
		all = append(all, pl)
		return true
	})
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i].Writes+all[i].Reads, all[j].Writes+all[j].Reads
		if a != b {
			return a > b
		}
		return all[i].Key < all[j].Key
	})
	if len(all) > top {
		all = all[:top]
	}
	l.Hot = all
	return l
}
