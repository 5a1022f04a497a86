package projections

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// TestKeySetModel adds random keys, many of them again, to a keySet and
// to a map, and checks after each that both hold the same keys in the
// same first-added order: keys empty, short, and long enough for lengths
// of two varint bytes, across many growths of the table.
func TestKeySetModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 3))
	parts := []string{"", "p", "é", strings.Repeat("q", 130), "p\x00"}
	var s keySet
	seen := map[[2]string]bool{}
	var order []engine.Packed
	check := func(at int) {
		t.Helper()
		if s.len() != len(order) {
			t.Fatalf("after %d adds: len %d, want %d", at, s.len(), len(order))
		}
		if got := slices.Collect(s.all()); !slices.Equal(got, order) {
			t.Fatalf("after %d adds: keys %q, want %q", at, got, order)
		}
	}
	for i := range 20_000 {
		pk := parts[rnd.IntN(len(parts))]
		rk := fmt.Sprint(rnd.IntN(3_000))
		if rnd.IntN(50) == 0 {
			rk = strings.Repeat("r", 120+rnd.IntN(20)) // the length's varint: one byte or two
		}
		if !s.add(pk, rk) {
			t.Fatalf("add %d refused", i)
		}
		if k := [2]string{pk, rk}; !seen[k] {
			seen[k] = true
			order = append(order, engine.PackedKey(pk, rk))
		}
		if i%997 == 0 {
			check(i)
		}
	}
	check(20_000)
	for _, k := range order {
		pk, rk := k.Keys()
		if !s.add(pk, rk) || s.len() != len(order) {
			t.Fatalf("adding %q again: len %d, want %d", k, s.len(), len(order))
		}
	}
}

// TestKeySetLimit: a key that would take the set's bytes past its limit is
// refused and leaves the set as it was; keys there already are still
// found, and the note of a record that does not fit says so.
func TestKeySetLimit(t *testing.T) {
	s := keySet{limit: 100}
	for i := 0; s.add("p", fmt.Sprint("r", i)); i++ {
		if i > 100 {
			t.Fatal("no key refused")
		}
	}
	n, size := s.len(), len(s.keys)
	if s.add("p", "a-new-key") || s.len() != n || len(s.keys) != size {
		t.Fatalf("a refused key changed the set: %d keys, %d bytes; want %d, %d", s.len(), len(s.keys), n, size)
	}
	if !s.add("p", "r0") || s.len() != n {
		t.Fatal("a key there already was refused or added again")
	}
	ts := newTouchedSet()
	ts.keys.limit = 100
	rec := &engine.Record{PartitionKey: "p", Events: []engine.Event{{RowKey: strings.Repeat("r", 60)}, {RowKey: strings.Repeat("s", 60)}}}
	if ts.note(rec) {
		t.Fatal("a note past the limit said it was whole")
	}
}

// BenchmarkTouchedMemory notes records of one entity each, with the keys
// of the HTTP benchmark's memory workload (100 entities a partition,
// 8-byte keys, each a string of its own as a request's parser makes
// them), and reports the live heap the note holds per key, the strings
// it keeps alive included. Run with -benchtime 10000x or more: the
// figure is an average, and depends on where the table's last growth
// left it. Its time includes making the records.
func BenchmarkTouchedMemory(b *testing.B) {
	before := keySetLiveHeap()
	ts := newTouchedSet()
	for i := 0; i < b.N; i++ {
		rec := &engine.Record{PartitionKey: fmt.Sprintf("p%07d", i/100),
			Events: []engine.Event{{Kind: engine.EventPut, RowKey: fmt.Sprintf("r%07d", i)}}}
		ts.note(rec)
	}
	b.StopTimer()
	after := keySetLiveHeap()
	b.ReportMetric(float64(after-before)/float64(b.N), "bytes/key")
	runtime.KeepAlive(ts)
}

func keySetLiveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
