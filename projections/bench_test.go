package projections_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections"
)

// liveHeap returns the bytes in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkCommandIDMemory applies records that commit one command with a
// client id of 36 characters (a UUID) and no event, all inside the dedup
// window, and reports the live heap each remembered id holds: its
// CommandRecord, the id string and its places in the B-tree and the expiry
// list. Run with -benchtime 100000x or more: the figure is an average.
func BenchmarkCommandIDMemory(b *testing.B) {
	tb := projections.NewTable("T", 1, time.Hour)
	tb.Apply(1, &engine.Record{Time: 1, PartitionKey: "p"})
	tb.Publish()
	before := liveHeap()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		tb.Apply(uint64(i+2), &engine.Record{Time: 1, PartitionKey: "p",
			Commands: []engine.CommandRef{{ID: id}}})
	}
	tb.Publish()
	b.StopTimer()
	after := liveHeap()
	b.ReportMetric(float64(after-before)/float64(b.N), "bytes/id")
	if _, ok := tb.Snapshot().Command("p", fmt.Sprintf("%08x-0000-4000-8000-%012x", 0, 0)); !ok {
		b.Fatal("the first id is not remembered")
	}
	runtime.KeepAlive(tb)
}

// BenchmarkApplyPublish applies one record (one entity written) to a view
// of n entities, publishing a snapshot after every record (the applier's
// worst case: one record per burst) or after every 256 (a replay). A
// Publish itself is O(1), a copy-on-write Copy of three B-trees; what it
// costs is that the next write copies the nodes on its path again, O(log n).
func BenchmarkApplyPublish(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		for _, every := range []int{1, 256} {
			b.Run(fmt.Sprintf("entities=%d/publish-every=%d", n, every), func(b *testing.B) {
				tb := projections.NewTable("T", 1, 0)
				put := func(seq uint64, i int) {
					tb.Apply(seq, &engine.Record{Time: int64(seq), PartitionKey: fmt.Sprintf("p%03d", i%1000),
						Events: []engine.Event{{Kind: engine.EventPut, RowKey: fmt.Sprintf("%07d", i),
							Properties: []engine.Property{{Name: "V", Value: engine.Int64(int64(i))}}}}})
				}
				for i := 0; i < n; i++ {
					put(uint64(i+1), i)
				}
				tb.Publish()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					put(uint64(n+i+1), i%n)
					if i%every == 0 {
						tb.Publish()
					}
				}
			})
		}
	}
}

// BenchmarkAsOf measures an as-of read that replays: a table of 20,000
// records, each one entity of ten 100-byte strings (about 1 KB, as in
// docs/PERFORMANCE.md's replay), read as of a position near its end that
// differs every time, so that no read is answered from the cache. It
// reports the replay's records per second (every record decoded and
// validated, as the applier does).
func BenchmarkAsOf(b *testing.B) {
	r := newRig(b)
	epoch := r.create("Bench")
	const n = 20_000
	props := make([]engine.Property, 10)
	for i := range props {
		props[i] = engine.Property{Name: fmt.Sprintf("Prop%02d", i), Value: engine.String(strings.Repeat("x", 100))}
	}
	for i := 1; i <= n; i++ {
		rec := &engine.Record{Time: int64(i), PartitionKey: fmt.Sprintf("p%06d", i), Nonce: fmt.Sprint("n", i),
			Events: []engine.Event{{Kind: engine.EventPut, RowKey: "r", Properties: props}}}
		if _, err := r.j.Append(r.ctx, "Bench", epoch, rigShards, rec, 0); err != nil {
			b.Fatal(err)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	v, done := r.start(ctx)
	if err := v.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	tb, _ := v.Table("Bench")
	records := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		seq := uint64(n - 1 - i%1000)
		s, err := v.AsOf(ctx, tb, seq)
		if err != nil || s.Len() != int(seq) {
			b.Fatalf("as of %d: %v", seq, err)
		}
		records += int(seq)
	}
	b.StopTimer()
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkGet measures a point read of a view of 100,000 entities of
// about 1 KB in 10,000 partitions, at random keys: the search of the tree,
// whose entities each live in an allocation of their own, and the decode.
func BenchmarkGet(b *testing.B) {
	const n = 100_000
	tb := projections.NewTable("T", 1, 0)
	pad := engine.String(strings.Repeat("x", 1000))
	key := func(i int) (string, string) { return fmt.Sprintf("p%05d", i%10_000), fmt.Sprintf("r%07d", i) }
	for i := range n {
		pk, rk := key(i)
		tb.Apply(uint64(i+1), &engine.Record{Time: int64(i), PartitionKey: pk,
			Events: []engine.Event{{Kind: engine.EventPut, RowKey: rk, Properties: []engine.Property{{Name: "Pad", Value: pad}}}}})
	}
	tb.Publish()
	snap := tb.Snapshot()
	r := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	for b.Loop() {
		pk, rk := key(r.IntN(n))
		if _, ok := snap.Get(pk, rk); !ok {
			b.Fatal("not found")
		}
	}
}
