package projections

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// contentOf is a snapshot's state as a loaded file gives it.
func contentOf(s *Snapshot) *snapshotContent {
	return &snapshotContent{rows: s.rows, parts: s.parts, ids: s.ids, expiry: s.expiry}
}

// goldenDelta applies two more records to the golden view (at 4): a
// delete, a write, a new partition, a delete of a row that never was,
// command ids of which the window forgets some; it returns the view at 4
// and the table at 6 with what its applier noted.
func goldenDelta() (*Snapshot, *Table, *touchedSet) {
	t := goldenTable()
	at4 := t.Snapshot()
	const minute = int64(time.Minute / 100)
	ts := newTouchedSet()
	recs := []*engine.Record{
		{Time: 1_001 + 3*minute, PartitionKey: "p2", Commands: []engine.CommandRef{{ID: "c3", Count: 2}},
			Events: []engine.Event{
				{Kind: engine.EventDelete, RowKey: "b"},
				{Kind: engine.EventPut, RowKey: "c", Properties: []engine.Property{{Name: "N", Value: engine.Int64(5)}, {Name: "S", Value: engine.String("new")}}},
			}},
		{Time: 1_002 + 3*minute, PartitionKey: "p3", Commands: []engine.CommandRef{{ID: "c4", Count: 2}},
			Events: []engine.Event{
				{Kind: engine.EventPut, RowKey: "x", Properties: []engine.Property{{Name: "B", Value: engine.Bool(false)}}},
				{Kind: engine.EventDelete, RowKey: "never"},
			}},
	}
	for i, rec := range recs {
		t.Apply(uint64(5+i), rec)
		ts.note(rec)
	}
	t.Publish()
	return at4, t, ts
}

// TestDeltaGolden: the golden delta file of every format version ever
// written still decodes, applied to the golden view at 4, to the view at
// 6 it was written from, and this code still writes the current one byte
// for byte (a change of the format must raise DeltaFormat and add a
// golden file, never rewrite one).
func TestDeltaGolden(t *testing.T) {
	at4, tb, ts := goldenDelta()
	s := tb.Snapshot()
	d := makeDelta(s, 4, ts)
	if len(d.upserts) != 2 || len(d.deletes) != 2 || len(d.parts) != 2 || len(d.adds) != 2 || keepOf(s, 4) != 1 {
		t.Fatalf("the golden delta has %d upserts, %d deletes, %d partitions, %d ids added, keeps %d; want 2, 2, 2, 2, 1",
			len(d.upserts), len(d.deletes), len(d.parts), len(d.adds), keepOf(s, 4))
	}
	var buf bytes.Buffer
	if err := encodeDelta(&buf, s, 4, d, 1_700_000_000_000_000_000); err != nil {
		t.Fatal(err)
	}
	for v := uint64(1); v <= DeltaFormat; v++ {
		path := filepath.Join("testdata", fmt.Sprintf("delta-v%d.delta", v))
		want := goldenFile(t, path, buf.Bytes(), v == DeltaFormat)
		h, got := readDeltaBytes(t, want, contentOf(at4))
		if h.Version != v || h.At != 1_700_000_000_000_000_000 || h.Prev != 4 || h.Seq != 6 || h.Total != uint64(s.Len()) {
			t.Fatalf("%s: header %+v", path, h)
		}
		sameContent(t, s, snapshotHeader{Name: h.Name, Epoch: h.Epoch, Seq: h.Seq, Entities: uint64(got.rows.Len())}, got)
		if v == DeltaFormat && !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("this code no longer writes %s byte for byte: a format change needs a new version", path)
		}
	}
	// The view at 4 it was applied to is as it was.
	sameContent(t, at4, snapshotHeader{Name: at4.Table, Epoch: at4.Epoch, Seq: 4, Entities: uint64(at4.Len())}, contentOf(at4))
}

// readDeltaBytes checks, decodes and applies a delta file's bytes to c.
func readDeltaBytes(t *testing.T, data []byte, c *snapshotContent) (deltaHeader, *snapshotContent) {
	t.Helper()
	h, got, err := deltaFromBytes(data, c)
	if err != nil {
		t.Fatal(err)
	}
	return h, got
}

func deltaFromBytes(data []byte, c *snapshotContent) (deltaHeader, *snapshotContent, error) {
	if err := checkSnapshotSum(bytes.NewReader(data), int64(len(data))); err != nil {
		return deltaHeader{}, nil, err
	}
	h, dec, err := readDeltaHeader(bufio.NewReader(bytes.NewReader(data)))
	if err != nil {
		return h, nil, err
	}
	d, err := decodeDeltaBody(dec, h)
	if err != nil {
		return h, nil, err
	}
	got, err := c.applyDelta(h, d)
	return h, got, err
}

// TestDeltaFileChecks: a delta that is damaged anywhere, truncated
// anywhere, of a newer format, or that does not fit the view it is
// applied to (it keeps more command ids than the view has, or leaves
// another count of entities) is refused, and the view stays as it was.
func TestDeltaFileChecks(t *testing.T) {
	at4, tb, ts := goldenDelta()
	s := tb.Snapshot()
	var buf bytes.Buffer
	if err := encodeDelta(&buf, s, 4, makeDelta(s, 4, ts), 1); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x20
		if _, _, err := deltaFromBytes(bad, contentOf(at4)); err == nil {
			t.Fatalf("a flipped byte at %d of %d passes", i, len(good))
		}
		if _, _, err := deltaFromBytes(good[:i], contentOf(at4)); err == nil {
			t.Fatalf("a delta truncated to %d of %d bytes passes", i, len(good))
		}
	}
	newer := bytes.Clone(good)
	newer[len(deltaMagic)] = DeltaFormat + 1
	if _, _, err := readDeltaHeader(bufio.NewReader(bytes.NewReader(newer))); err == nil || !strings.Contains(err.Error(), "newer snapshot format") {
		t.Fatalf("a newer format: %v", err)
	}
	// Applied to a view that is not the one at 4: one that remembers
	// fewer ids, one with an entity more.
	c := contentOf(at4)
	short := &snapshotContent{rows: c.rows, parts: c.parts, ids: c.ids, expiry: c.expiry[:0]}
	if _, _, err := deltaFromBytes(good, short); err == nil || !strings.Contains(err.Error(), "keeps 1 command ids") {
		t.Fatalf("applied to a view with one id: %v", err)
	}
	more := &snapshotContent{rows: c.rows.Copy(), parts: c.parts, ids: c.ids, expiry: c.expiry}
	more.rows.Set(engine.Pack(&engine.Entity{PartitionKey: "p9", RowKey: "extra"}))
	if _, _, err := deltaFromBytes(good, more); err == nil || !strings.Contains(err.Error(), "entities, its header says") {
		t.Fatalf("applied to a view with an entity more: %v", err)
	}
	sameContent(t, at4, snapshotHeader{Name: at4.Table, Epoch: at4.Epoch, Seq: 4, Entities: uint64(at4.Len())}, contentOf(at4))
}

// chainPoint is a snapshot of the model test: a base or a delta, as
// bytes of its file.
type chainPoint struct {
	seq, prev uint64
	base      bool
	data      []byte
}

// TestChainModel is the model check of chains: random records (puts,
// deletes of present and absent rows, command ids that repeat and expire)
// with snapshots taken at random points, as the snapshotter takes them —
// a base, a delta after the last point, or both at one point (a
// compaction) —, then a view loaded from every chain the points make
// (each base with every delta that follows it, in order) plus the tail
// of the journal after it, and from the base at each point alone, equals
// the view a full replay builds: entities with their versions (ETags),
// partitions, command ids and their eviction order. Each point's chain
// also equals the view at that point. Run with -count=50; the seed is
// logged.
func TestChainModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 9))
	live := NewTable("Model", 3, 30*time.Second)
	var recs []*engine.Record
	var points []chainPoint
	views := map[uint64]*Snapshot{}
	ts := newTouchedSet()
	var last uint64 // the position of the last point
	n := 200 + rnd.IntN(800)
	for i := 1; i <= n; i++ {
		rec := modelRecord(rnd, i)
		recs = append(recs, rec)
		live.Apply(uint64(i), rec)
		ts.note(rec)
		if rnd.IntN(10) != 0 {
			continue
		}
		live.Publish()
		s := live.Snapshot()
		views[s.Seq] = s
		kind := rnd.IntN(3) // 0 delta, 1 base, 2 both
		if last == 0 {
			kind = 1
		}
		if kind != 1 {
			var buf bytes.Buffer
			if err := encodeDelta(&buf, s, last, makeDelta(s, last, ts), int64(i)); err != nil {
				t.Fatal(err)
			}
			points = append(points, chainPoint{seq: s.Seq, prev: last, data: buf.Bytes()})
		}
		if kind != 0 {
			var buf bytes.Buffer
			if err := encodeSnapshot(&buf, s, int64(i), nil); err != nil {
				t.Fatal(err)
			}
			points = append(points, chainPoint{seq: s.Seq, base: true, data: buf.Bytes()})
		}
		last, ts = s.Seq, newTouchedSet()
	}
	live.Publish()
	want := live.Snapshot()
	full := NewTable("Model", 3, 30*time.Second)
	for i, rec := range recs {
		full.Apply(uint64(i+1), rec)
	}
	full.Publish()
	wantHeader := snapshotHeader{Name: "Model", Epoch: 3, Seq: want.Seq, Entities: uint64(want.Len())}
	sameContent(t, full.Snapshot(), wantHeader, contentOf(want))

	chains := 0
	for bi, b := range points {
		if !b.base {
			continue
		}
		h, dec, err := readSnapshotHeader(bufio.NewReader(bytes.NewReader(b.data)))
		if err != nil {
			t.Fatal(err)
		}
		c, err := decodeSnapshotBody(dec, h, nil)
		if err != nil {
			t.Fatal(err)
		}
		pos := b.seq
		check := func() {
			t.Helper()
			s := views[pos]
			sameContent(t, s, snapshotHeader{Name: "Model", Epoch: 3, Seq: pos, Entities: uint64(s.Len())},
				&snapshotContent{rows: c.rows, parts: c.parts, ids: c.ids, expiry: c.expiry})
			// The chain plus the journal's tail.
			// restore hands the trees to the table, which writes them:
			// copies, so that c stays the chain's view at pos.
			nt := NewTable("Model", 3, 30*time.Second)
			nt.restore(pos, &snapshotContent{rows: c.rows.Copy(), parts: c.parts.Copy(), ids: c.ids.Copy(), expiry: c.expiry[:len(c.expiry):len(c.expiry)]})
			for i := pos; i < uint64(len(recs)); i++ {
				nt.Apply(i+1, recs[i])
			}
			nt.Publish()
			sameContent(t, want, snapshotHeader{Name: "Model", Epoch: 3, Seq: nt.Snapshot().Seq, Entities: uint64(nt.Snapshot().Len())}, contentOf(nt.Snapshot()))
			chains++
		}
		check()
		for _, d := range points[bi+1:] {
			if d.base || d.prev != pos {
				continue
			}
			var dh deltaHeader
			dh, c, err = deltaFromBytes(d.data, c)
			if err != nil {
				t.Fatalf("the delta %d after %d: %v", d.seq, d.prev, err)
			}
			pos = dh.Seq
			check()
		}
	}
	t.Logf("%d records, %d snapshots, %d chains loaded and compared", n, len(points), chains)
	if chains == 0 {
		t.Fatal("no chain was compared")
	}
}

// modelRecord is a random record at position i: a few puts and deletes
// over few rows of few partitions, often a command id from a small set,
// times a second apart give or take three (the 30 s window keeps and
// forgets ids, not in sequence order).
func modelRecord(rnd *rand.Rand, i int) *engine.Record {
	const second = int64(time.Second / 100)
	rec := &engine.Record{Time: 1e15 + int64(i)*second + rnd.Int64N(6*second) - 3*second, PartitionKey: fmt.Sprintf("p%d", rnd.IntN(6))}
	for k := rnd.IntN(3); k >= 0; k-- {
		rk := fmt.Sprintf("r%02d", rnd.IntN(25))
		if rnd.IntN(4) == 0 {
			rec.Events = append(rec.Events, engine.Event{Kind: engine.EventDelete, RowKey: rk})
			continue
		}
		props := []engine.Property{{Name: "Name", Value: engine.String(fmt.Sprintf("n%d", rnd.IntN(50)))}}
		if rnd.IntN(2) == 0 {
			props = append(props, engine.Property{Name: "Qty", Value: engine.Int64(rnd.Int64N(1000))})
		}
		rec.Events = append(rec.Events, engine.Event{Kind: engine.EventPut, RowKey: rk, Properties: props})
	}
	if rnd.IntN(3) > 0 {
		rec.Commands = []engine.CommandRef{{ID: fmt.Sprintf("cmd%d", rnd.IntN(200)), Count: uint32(len(rec.Events))}}
	}
	return rec
}
