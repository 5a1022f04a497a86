package projections

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// BenchmarkSnapshotKinds measures, per entity, what writing and loading a
// base and a delta cost, without a disk (encoding into memory, decoding
// from it, the checksum checked): the figures the compaction fraction is
// chosen from (docs/INTERNALS.md, Views). The view holds 200,000
// entities of ten properties and about 1 KB of values; the delta holds a
// tenth of them, rewritten. Run with -benchtime 3x.
func BenchmarkSnapshotKinds(b *testing.B) {
	const (
		entities = 200_000
		touched  = entities / 10
		// partitions the entities spread over, as the benchmarks' loads do.
		partitions = 256
	)
	tb := NewTable("Bench", 1, time.Minute)
	note := strings.Repeat("quarterly review notes ", 26)
	record := func(i, version int) *engine.Record {
		return &engine.Record{Time: int64(i), PartitionKey: fmt.Sprintf("p%03d", i%partitions), Events: []engine.Event{{Kind: engine.EventPut,
			RowKey: fmt.Sprintf("r%08d", i), Properties: []engine.Property{
				{Name: "Active", Value: engine.Bool(true)},
				{Name: "Address", Value: engine.String(strings.Repeat("12 Market Street, ", 10))},
				{Name: "Age", Value: engine.Int32(38)},
				{Name: "Department", Value: engine.String("Sales")},
				{Name: "Email", Value: engine.String("margaret.jones@contoso.example")},
				{Name: "Hired", Value: engine.DateTimeTicks(638_000_000_000_000_000)},
				{Name: "Id", Value: engine.Guid([16]byte{1, 2, 3})},
				{Name: "Name", Value: engine.String("Jones, Margaret Anne (Sales)")},
				{Name: "Notes", Value: engine.String(note)},
				{Name: "Version", Value: engine.Int64(int64(version))},
			}}}}
	}
	seq := uint64(0)
	for i := 0; i < entities; i++ {
		seq++
		tb.Apply(seq, record(i, 1))
	}
	tb.Publish()
	base := tb.Snapshot()
	ts := newTouchedSet()
	for k := 0; k < touched; k++ {
		seq++
		rec := record(k*(entities/touched), 2)
		tb.Apply(seq, rec)
		ts.note(rec)
	}
	tb.Publish()
	after := tb.Snapshot()

	// The files once, so that each round writes into a buffer of their size.
	var first, dfirst bytes.Buffer
	if err := encodeSnapshot(&first, base, 1, nil); err != nil {
		b.Fatal(err)
	}
	if err := encodeDelta(&dfirst, after, base.Seq, makeDelta(after, base.Seq, ts), 1); err != nil {
		b.Fatal(err)
	}
	baseBytes, deltaBytes := first.Bytes(), dfirst.Bytes()
	var baseWrite, baseLoad, deltaWrite, deltaLoad time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Buffers of the files' size: growing them would be measured.
		buf := bytes.NewBuffer(make([]byte, 0, len(baseBytes)))
		dbuf := bytes.NewBuffer(make([]byte, 0, len(deltaBytes)))
		start := time.Now()
		if err := encodeSnapshot(buf, base, 1, nil); err != nil {
			b.Fatal(err)
		}
		baseWrite += time.Since(start)
		baseBytes = buf.Bytes()

		start = time.Now()
		if err := checkSnapshotSum(bytes.NewReader(baseBytes), int64(len(baseBytes))); err != nil {
			b.Fatal(err)
		}
		h, dec, err := readSnapshotHeader(bufio.NewReader(bytes.NewReader(baseBytes)))
		if err != nil {
			b.Fatal(err)
		}
		c, err := decodeSnapshotBody(dec, h, nil)
		if err != nil {
			b.Fatal(err)
		}
		baseLoad += time.Since(start)

		start = time.Now()
		if err := encodeDelta(dbuf, after, base.Seq, makeDelta(after, base.Seq, ts), 1); err != nil {
			b.Fatal(err)
		}
		deltaWrite += time.Since(start)
		deltaBytes = dbuf.Bytes()

		start = time.Now()
		if _, got, err := deltaFromBytes(deltaBytes, c); err != nil {
			b.Fatal(err)
		} else if got.rows.Len() != entities {
			b.Fatalf("%d entities after the delta", got.rows.Len())
		}
		deltaLoad += time.Since(start)
	}
	per := func(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / float64(b.N) / float64(n) }
	b.StopTimer()
	b.ReportMetric(per(baseWrite, entities), "base-write-ns/entity")
	b.ReportMetric(per(baseLoad, entities), "base-load-ns/entity")
	b.ReportMetric(per(deltaWrite, touched), "delta-write-ns/entity")
	b.ReportMetric(per(deltaLoad, touched), "delta-load-ns/entity")
	b.ReportMetric(float64(len(baseBytes))/entities, "base-bytes/entity")
	b.ReportMetric(float64(len(deltaBytes))/touched, "delta-bytes/entity")
}
