package projections

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

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
	if len(ga) != len(wa) {
		t.Fatalf("%d entities, want %d", len(ga), len(wa))
	}
	for i := range ga {
		if !reflect.DeepEqual(ga[i], wa[i]) {
			t.Fatalf("entity %d: %.300s, want %.300s", i, fmt.Sprintf("%+v", ga[i]), fmt.Sprintf("%+v", wa[i]))
		}
	}
	var gp, wp []Partition
	got.Partitions(func(p Partition) bool { gp = append(gp, p); return true })
	s.Partitions(func(p Partition) bool { wp = append(wp, p); return true })
	if !reflect.DeepEqual(gp, wp) {
		t.Fatalf("partitions %+v, want %+v", gp, wp)
	}
}

// TestSnapshotGolden: the golden snapshot file of every format version
// ever written still decodes to the view it was written from, and this
// code still writes the file of the current version byte for byte (a
// change of the format must raise SnapshotFormat and add a golden file,
// never rewrite one).
func TestSnapshotGolden(t *testing.T) {
	s := goldenTable().Snapshot()
	if len(s.expiry) != 4 || len(CommandIDs(s)) != 3 {
		t.Fatalf("the golden view remembers %d ids (%d in its log), want 3 (4)", len(CommandIDs(s)), len(s.expiry))
	}
	var buf bytes.Buffer
	if err := encodeSnapshot(&buf, s, 1_700_000_000_000_000_000, nil); err != nil {
		t.Fatal(err)
	}
	for v := uint64(1); v <= SnapshotFormat; v++ {
		path := filepath.Join("testdata", fmt.Sprintf("snapshot-v%d.snap", v))
		want := goldenFile(t, path, buf.Bytes(), v == SnapshotFormat)
		h, c := readSnapshotBytes(t, want)
		if h.Version != v || h.At != 1_700_000_000_000_000_000 {
			t.Fatalf("%s: header %+v", path, h)
		}
		sameContent(t, s, h, c)
		if v == SnapshotFormat && !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("this code no longer writes %s byte for byte: a format change needs a new version", path)
		}
	}
}

// goldenFile returns the golden file at path. A missing one is written
// from current with -golden-add, when it is the current version's; a
// golden file is never overwritten.
func goldenFile(t *testing.T, path string, current []byte, isCurrent bool) []byte {
	t.Helper()
	want, err := os.ReadFile(path)
	if os.IsNotExist(err) && *goldenAdd && isCurrent {
		if err := os.WriteFile(path, current, 0o644); err != nil {
			t.Fatal(err)
		}
		return current
	}
	if err != nil {
		t.Fatalf("%v (run with -golden-add to create a missing golden file)", err)
	}
	return want
}

// TestSnapshotBlocks: a base of more entities than a block holds, some
// of them large, decodes to its view, written in blocks within their
// bounds.
func TestSnapshotBlocks(t *testing.T) {
	tb := NewTable("Blocks", 1, time.Minute)
	seq := uint64(0)
	big := strings.Repeat("x", 60<<10)
	for i := 0; i < 3*blockEntities+17; i++ {
		seq++
		var props []engine.Property // in name order, as commands give them
		if i%700 == 0 {
			props = append(props, engine.Property{Name: "Big", Value: engine.String(big)})
		}
		props = append(props, engine.Property{Name: "N", Value: engine.Int64(int64(i))})
		tb.Apply(seq, &engine.Record{PartitionKey: fmt.Sprintf("p%d", i%7), Events: []engine.Event{{Kind: engine.EventPut, RowKey: fmt.Sprintf("r%06d", i), Properties: props}}})
	}
	tb.Publish()
	s := tb.Snapshot()
	var buf bytes.Buffer
	if err := encodeSnapshot(&buf, s, 1, nil); err != nil {
		t.Fatal(err)
	}
	h, c := readSnapshotBytes(t, buf.Bytes())
	sameContent(t, s, h, c)

	_, dec, err := readSnapshotHeader(bufio.NewReader(bytes.NewReader(buf.Bytes())))
	if err != nil {
		t.Fatal(err)
	}
	var counts []uint64
	for sum := uint64(0); sum < h.Entities; {
		n, err := dec.DecodeUint64()
		if err != nil {
			t.Fatal(err)
		}
		data, err := dec.DecodeBytes()
		if err != nil {
			t.Fatal(err)
		}
		if n > blockEntities || len(data) > blockBytes+len(big)+64 {
			t.Fatalf("a block of %d entities in %d bytes", n, len(data))
		}
		counts = append(counts, n)
		sum += n
	}
	if len(counts) < 4 || counts[0] == blockEntities {
		t.Fatalf("blocks of %v entities: the large entities should have cut some short", counts)
	}
}

// TestSnapshotBlocksRefused: a block that holds fewer or more entities
// than it says, one that says more than the file has left or a block
// holds, an empty one, one that says it is larger than any block, and a
// failure of the load are each an error, and nothing after them is
// loaded.
func TestSnapshotBlocksRefused(t *testing.T) {
	entity := func(i int) *engine.Entity {
		return &engine.Entity{PartitionKey: "p", RowKey: fmt.Sprintf("r%03d", i), Properties: []engine.Property{{Name: "N", Value: engine.Int64(int64(i))}}}
	}
	// blocks encodes blocks of the given counts, holding the given
	// numbers of entities.
	blocks := func(says, holds []int) *msgpack.Decoder {
		var out bytes.Buffer
		enc := msgpack.NewEncoder(&out)
		next := 0
		for k := range says {
			var blk bytes.Buffer
			benc := msgpack.NewEncoder(&blk)
			for range holds[k] {
				if err := encodeEntity(benc, entity(next)); err != nil {
					t.Fatal(err)
				}
				next++
			}
			if err := firstErr(enc.EncodeUint(uint64(says[k])), enc.EncodeBytes(blk.Bytes())); err != nil {
				t.Fatal(err)
			}
		}
		return msgpack.NewDecoder(&out)
	}
	// A block that says it is larger than any a writer makes is refused
	// before anything of its size is allocated.
	var huge bytes.Buffer
	if err := firstErr(msgpack.NewEncoder(&huge).EncodeUint(1), msgpack.NewEncoder(&huge).EncodeBytesLen(1<<30)); err != nil {
		t.Fatal(err)
	}
	err := decodeEntityBlocks(msgpack.NewDecoder(&huge), 1, func(engine.Packed) error { return nil })
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("a block of %d bytes", 1<<30)) {
		t.Fatalf("a block of 1 GiB: %v", err)
	}
	for _, tc := range []struct {
		name        string
		says, holds []int
		total       uint64
		failAt      int // load fails at this entity (0: never)
		want        string
		loaded      int
	}{
		{"whole", []int{2, 3}, []int{2, 3}, 5, 0, "", 5},
		{"fewer than it says", []int{2, 3}, []int{2, 2}, 5, 0, "entity 4", 2},
		{"more than it says", []int{2, 2}, []int{2, 3}, 4, 0, "bytes after its 2 entities", 2},
		{"more than the file has", []int{2, 4}, []int{2, 4}, 5, 0, "a block of 4 entities, 3 of 5 left", 2},
		{"more than a block holds", []int{2, blockEntities + 1}, []int{2, 1}, blockEntities + 10, 0, fmt.Sprintf("a block of %d entities", blockEntities+1), 2},
		{"empty", []int{2, 0}, []int{2, 0}, 3, 0, "a block of 0 entities", 2},
		{"cut short", []int{2}, []int{2}, 5, 0, "the block at entity 2", 2},
		{"the load fails", []int{2, 3}, []int{2, 3}, 5, 3, "load failed at 3", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loaded := 0
			err := decodeEntityBlocks(blocks(tc.says, tc.holds), tc.total, func(p engine.Packed) error {
				e := p.Entity()
				if e.RowKey != fmt.Sprintf("r%03d", loaded) {
					t.Fatalf("entity %d is %s", loaded, e.RowKey)
				}
				if tc.failAt != 0 && loaded == tc.failAt {
					return fmt.Errorf("load failed at %d", loaded)
				}
				loaded++
				return nil
			})
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if loaded != tc.loaded {
				t.Fatalf("loaded %d entities, want %d", loaded, tc.loaded)
			}
		})
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
	newer[len(snapshotMagic)] = ShardSnapshotFormat + 1
	_, _, err := readSnapshotHeader(bufio.NewReader(bytes.NewReader(newer)))
	if err == nil || !strings.Contains(err.Error(), "newer snapshot format") {
		t.Fatalf("a newer format: %v", err)
	}
}

// TestShardSnapshotGolden: the golden shard base (ShardSnapshotFormat)
// still decodes to the view it was written from, with the shards it
// holds, and this code writes it byte for byte; a shard base whose bitmap
// does not fit its shard count is refused.
func TestShardSnapshotGolden(t *testing.T) {
	s := goldenTable().Snapshot()
	held := make([]bool, 12)
	held[1], held[6], held[11] = true, true, true
	var buf bytes.Buffer
	if err := encodeSnapshotOf(&buf, s, 1_700_000_000_000_000_000, nil, 12, held); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", fmt.Sprintf("snapshot-v%d-shards.snap", ShardSnapshotFormat))
	want := goldenFile(t, path, buf.Bytes(), true)
	h, c := readSnapshotBytes(t, want)
	if h.Version != ShardSnapshotFormat || h.Shards != 12 || !slices.Equal(h.Held, held) {
		t.Fatalf("%s: header %+v", path, h)
	}
	sameContent(t, s, h, c)
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("this code no longer writes %s byte for byte: a format change needs a new version", path)
	}
	if shardFileName(7, held) != "00000000000000000007."+shardSetKey(held)+".shards" {
		t.Fatalf("file name %s", shardFileName(7, held))
	}
	if seq, key, ok := shardFileSeq(shardFileName(7, held)); !ok || seq != 7 || key != shardSetKey(held) {
		t.Fatalf("file name read back: %d %s %v", seq, key, ok)
	}
	// A bitmap with a shard past the count, or too short, is refused.
	for _, bad := range [][]bool{append(slices.Clone(held), false, false, false, true), held[:8]} {
		buf.Reset()
		if err := encodeSnapshotOf(&buf, s, 1, nil, 12, bad); err != nil {
			t.Fatal(err)
		}
		if _, _, err := readSnapshotHeader(bufio.NewReader(bytes.NewReader(buf.Bytes()))); err == nil {
			t.Fatalf("a shard base of 12 shards holding %d bits was read", len(bad))
		}
	}
}

// TestCoveredBases: the journal may be cut after any whole base, and,
// with shard bases, at any base position at or below the highest position
// every shard has a base at or after, whole or shard.
func TestCoveredBases(t *testing.T) {
	held := func(shards ...int) []bool {
		out := make([]bool, 4)
		for _, s := range shards {
			out[s] = true
		}
		return out
	}
	for _, c := range []struct {
		what string
		objs []sharedObject
		want []uint64
	}{
		{"whole bases only", []sharedObject{{seq: 10, base: true}, {seq: 15}, {seq: 20, base: true}}, []uint64{10, 20}},
		{"a shard without a base", []sharedObject{{seq: 30, base: true, held: held(0, 1)}, {seq: 40, base: true, held: held(2)}}, nil},
		{"every shard covered at 30", []sharedObject{{seq: 30, base: true, held: held(0, 1)}, {seq: 40, base: true, held: held(2, 3)}, {seq: 50, base: true, held: held(0, 1)}}, []uint64{30, 40}},
		{"a whole base covers the rest", []sharedObject{{seq: 20, base: true}, {seq: 45, base: true, held: held(0, 1, 2)}}, []uint64{20}},
		{"a newer whole base", []sharedObject{{seq: 35, base: true, held: held(0, 1)}, {seq: 40, base: true, held: held(2, 3)}, {seq: 60, base: true}}, []uint64{35, 40, 60}},
	} {
		if got := coveredBases(c.objs); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}
}
