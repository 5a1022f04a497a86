package engine

import "hash/fnv"

// A table's partitions are cut into view shards, a number fixed when the
// table is created and recorded in its catalog record (docs/SCALE.md,
// decision A). The shard of a partition names where its records live in
// the journal (the shard's token in the partition's subject) and which
// hosts hold its entities.
const (
	// DefaultShards is the number of shards a table is created with
	// unless the node is told otherwise: enough for 3 hosts holding 2
	// replicas each to hold about 0.7 of a table each, few enough that a
	// host's consumer of a table filters on a few dozen subjects.
	DefaultShards = 64
	// MaxShards is the most shards a table may have.
	MaxShards = 4096
)

// Shard returns the shard of a partition key among n shards: the 64-bit
// FNV-1a hash of the key's bytes modulo n, and 0 when n ≤ 1 (a table
// created before shards is one). It names where every partition's records
// live in the journal: never change it (TestShardGolden keeps its
// values).
func Shard(pk string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(pk))
	return int(h.Sum64() % uint64(n))
}
