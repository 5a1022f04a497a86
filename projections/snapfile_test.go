package projections

import (
	"bufio"
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

var goldenAdd = flag.Bool("golden-add", false, "write golden files that do not exist yet (never overwrites)")

// goldenTable is the view the golden snapshot file holds: every property
// type, two partitions, a delete, an id committed twice (both kept in the
// eviction order, the later one answered) and one evicted.
func goldenTable() *Table {
	t := NewTable("acct1.Golden", 7, time.Minute)
	const minute = int64(time.Minute / 100)
	t.Apply(1, &engine.Record{Time: 1_000, PartitionKey: "p1", Commands: []engine.CommandRef{{ID: "old", Count: 1}},
		Events: []engine.Event{{Kind: engine.EventPut, RowKey: "gone", Properties: []engine.Property{{Name: "S", Value: engine.String("x")}}}}})
	t.Apply(2, &engine.Record{Time: 1_000 + 2*minute, PartitionKey: "p1", Commands: []engine.CommandRef{{ID: "c1", First: 0, Count: 2}},
		Events: []engine.Event{
			{Kind: engine.EventPut, RowKey: "r1", Properties: []engine.Property{
				{Name: "B", Value: engine.Bool(true)},
				{Name: "Bin", Value: engine.Binary([]byte{0, 1, 2, 255})},
				{Name: "D", Value: engine.Double(-1.5)},
				{Name: "G", Value: engine.Guid([16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})},
				{Name: "I32", Value: engine.Int32(-7)},
				{Name: "I64", Value: engine.Int64(1 << 40)},
				{Name: "S", Value: engine.String("héllo")},
				{Name: "T", Value: engine.DateTimeTicks(638_000_000_000_000_000)},
			}},
			{Kind: engine.EventDelete, RowKey: "gone"},
		}})
	t.Apply(3, &engine.Record{Time: 1_001 + 2*minute, PartitionKey: "p2", Commands: []engine.CommandRef{{ID: "c1", Count: 1}, {ID: "c2", First: 1, Count: 1}},
		Events: []engine.Event{
			{Kind: engine.EventPut, RowKey: "a", Properties: []engine.Property{{Name: "S", Value: engine.String("y")}}},
			{Kind: engine.EventPut, RowKey: "b", Properties: []engine.Property{}},
		}})
	t.Apply(4, &engine.Record{Time: 1_002 + 2*minute, PartitionKey: "p2", Commands: []engine.CommandRef{{ID: "c2", Count: 1}},
		Events: []engine.Event{{Kind: engine.EventPut, RowKey: "a", Properties: []engine.Property{{Name: "S", Value: engine.String("z")}}}}})
	t.Publish()
	return t
}

func readSnapshotBytes(t *testing.T, data []byte) (snapshotHeader, *snapshotContent) {
	t.Helper()
	if err := checkSnapshotSum(bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	h, dec, err := readSnapshotHeader(bufio.NewReader(bytes.NewReader(data)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := decodeSnapshotBody(dec, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h, c
}

// sameContent fails unless the decoded content is the snapshot's.
func sameContent(t *testing.T, s *Snapshot, h snapshotHeader, c *snapshotContent) {
	t.Helper()
	if h.Name != s.Table || h.Epoch != s.Epoch || h.Seq != s.Seq || h.Entities != uint64(s.rows.Len()) {
		t.Fatalf("header %+v, want %s/%d at %d with %d entities", h, s.Table, s.Epoch, s.Seq, s.rows.Len())
	}
	got := &Snapshot{Table: h.Name, Epoch: h.Epoch, Seq: h.Seq, rows: c.rows, parts: c.parts, ids: c.ids, expiry: c.expiry}
	if a, b := CommandLog(got), CommandLog(s); !reflect.DeepEqual(a, b) {
		t.Fatalf("command log %+v, want %+v", a, b)
	}
	if a, b := CommandIDs(got), CommandIDs(s); !reflect.DeepEqual(a, b) {
		t.Fatalf("command ids %+v, want %+v", a, b)
	}
	var ga, wa []engine.Entity
	got.Scan(func(e *engine.Entity) bool { ga = append(ga, *e); return true })
	s.Scan(func(e *engine.Entity) bool { wa = append(wa, *e); return true })
	if !reflect.DeepEqual(ga, wa) {
		t.Fatalf("entities %+v, want %+v", ga, wa)
	}
	var gp, wp []Partition
	got.Partitions(func(p Partition) bool { gp = append(gp, p); return true })
	s.Partitions(func(p Partition) bool { wp = append(wp, p); return true })
	if !reflect.DeepEqual(gp, wp) {
		t.Fatalf("partitions %+v, want %+v", gp, wp)
	}
}

// TestSnapshotGolden: the golden snapshot file of format version 1 still
// decodes to the view it was written from, and this code still writes it
// byte for byte (a change of the format must raise SnapshotFormat and add
// a golden file, never rewrite one).
func TestSnapshotGolden(t *testing.T) {
	s := goldenTable().Snapshot()
	if len(s.expiry) != 4 || len(CommandIDs(s)) != 3 {
		t.Fatalf("the golden view remembers %d ids (%d in its log), want 3 (4)", len(CommandIDs(s)), len(s.expiry))
	}
	var buf bytes.Buffer
	if err := encodeSnapshot(&buf, s, 1_700_000_000_000_000_000, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "snapshot-v1.snap")
	want, err := os.ReadFile(path)
	if os.IsNotExist(err) && *goldenAdd {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		want = buf.Bytes()
	} else if err != nil {
		t.Fatalf("%v (run with -golden-add to create a missing golden file)", err)
	}
	h, c := readSnapshotBytes(t, want)
	if h.Version != 1 || h.At != 1_700_000_000_000_000_000 {
		t.Fatalf("header %+v", h)
	}
	sameContent(t, s, h, c)
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatal("this code no longer writes the golden file byte for byte: a format change needs a new version")
	}
}

// TestSnapshotFileChecks: a file that is damaged anywhere, truncated
// anywhere, or of a newer format is refused before anything of it is
// used.
func TestSnapshotFileChecks(t *testing.T) {
	var buf bytes.Buffer
	if err := encodeSnapshot(&buf, goldenTable().Snapshot(), 1, nil); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	refused := func(data []byte) error {
		if err := checkSnapshotSum(bytes.NewReader(data), int64(len(data))); err != nil {
			return err
		}
		_, _, err := readSnapshotHeader(bufio.NewReader(bytes.NewReader(data)))
		return err
	}
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x20
		if refused(bad) == nil {
			t.Fatalf("a flipped byte at %d of %d passes", i, len(good))
		}
		if refused(good[:i]) == nil {
			t.Fatalf("a file truncated to %d of %d bytes passes", i, len(good))
		}
	}
	newer := bytes.Clone(good)
	newer[len(snapshotMagic)] = SnapshotFormat + 1
	_, _, err := readSnapshotHeader(bufio.NewReader(bytes.NewReader(newer)))
	if err == nil || !strings.Contains(err.Error(), "newer snapshot format") {
		t.Fatalf("a newer format: %v", err)
	}
}
