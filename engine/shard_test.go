package engine

import "testing"

// TestShardGolden: a partition key's shard never changes (it names where
// a sharded table's records live). The values are FNV-1a 64 modulo n,
// computed apart from this package.
func TestShardGolden(t *testing.T) {
	for _, c := range []struct {
		pk   string
		n    int
		want int
	}{
		{"", 1, 0}, {"", 7, 2}, {"", 64, 37}, {"", 1024, 805},
		{"a", 7, 5}, {"a", 64, 12}, {"a", 1024, 140},
		{"Sales", 7, 2}, {"Sales", 64, 23}, {"Sales", 1024, 279},
		{"p00001", 7, 1}, {"p00001", 64, 10}, {"p00001", 1024, 458},
		{"客户", 7, 0}, {"客户", 64, 19}, {"客户", 1024, 979},
		{"anything", 0, 0}, {"anything", -3, 0},
	} {
		if got := Shard(c.pk, c.n); got != c.want {
			t.Errorf("Shard(%q, %d) = %d, want %d", c.pk, c.n, got, c.want)
		}
	}
}
