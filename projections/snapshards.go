package projections

import (
	"bufio"
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidwall/btree"

	"github.com/cairn-dev/cairn/engine"
)

// Shard bases. A view holding only some shards of its table (Partial)
// cannot write a base or a delta that another host would take for the
// whole table. It writes shard bases instead: a base of its shards alone
// (ShardSnapshotFormat: the header names the table's shard count and the
// shards held), once the table has had SnapshotEvery records since the
// last, its shards' or not, and at least SnapshotCompact times the
// entities the view holds (or after SnapshotInterval), never a delta. Each is a file of the table's snapshot directory,
// <seq in 20 digits>.<set>.shards (set: 16 hex digits of FNV-1a of the
// bitmap of the shards held), and, with a store, an object
// <lowercase name>.<epoch>.<seq in 20 digits>.<set>.shards of kind
// "shards", its shards in the metadata.
//
// A view holding some shards starts, for each of its shards, from the
// newest of the whole chain it loaded and the shard bases (its files, the
// store's objects) holding that shard; each base used is read once, and
// the entities, partitions and command ids of the shards it was chosen
// for are taken from it. The view then stands at the lowest position of
// its shards' sources and, until it passes the highest, skips each record
// of a shard whose source is at or past it (Table.floor). It writes no
// snapshot until then: its shards are not all at its position.
//
// The journal's pruning may cut a table at any position at or below
// which every shard has a base, whole or shard (SharedBases). After each
// shard base it puts, a node keeps in the store, for each shard, the
// bases holding it that a whole base's retention would keep (shardsKept),
// and removes the others.

const shardsSuffix = ".shards"

// metaShards and metaHeld are a shard base object's metadata: the table's
// shard count and the shards held (hex of the bitmap); sharedShards its
// kind.
const (
	metaShards   = "cairn-shards"
	metaHeld     = "cairn-held"
	sharedShards = "shards"
)

// heldBitmap is the bitmap of held: bit i of byte i/8 for shard i.
func heldBitmap(held []bool) []byte {
	b := make([]byte, (len(held)+7)/8)
	for i, h := range held {
		if h {
			b[i/8] |= 1 << (i % 8)
		}
	}
	return b
}

// bitmapHeld reads a bitmap back, 8 shards a byte.
func bitmapHeld(b []byte) []bool {
	held := make([]bool, 8*len(b))
	for i := range held {
		held[i] = b[i/8]&(1<<(i%8)) != 0
	}
	return held
}

// shardSetKey names a set of shards held in file and object names.
func shardSetKey(held []bool) string {
	h := fnv.New64a()
	_, _ = h.Write(heldBitmap(held))
	return fmt.Sprintf("%016x", h.Sum64())
}

func shardFileName(seq uint64, held []bool) string {
	return fmt.Sprintf("%020d.%s%s", seq, shardSetKey(held), shardsSuffix)
}

// shardFileSeq returns the position and set key a shard base's file name
// gives.
func shardFileSeq(name string) (uint64, string, bool) {
	rest, ok := strings.CutSuffix(name, shardsSuffix)
	if !ok || strings.HasPrefix(name, ".") {
		return 0, "", false
	}
	seqText, key, ok := strings.Cut(rest, ".")
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if !ok || err != nil || seq == 0 || len(key) != 16 {
		return 0, "", false
	}
	return seq, key, true
}

func sharedShardName(name string, epoch, seq uint64, held []bool) string {
	return fmt.Sprintf("%s.%020d.%s%s", SharedSnapshotName(name, epoch), seq, shardSetKey(held), shardsSuffix)
}

// shardBase is a shard base a view may start from: a file, an object or
// both.
type shardBase struct {
	seq    uint64
	held   []bool
	file   string
	object string
	bad    bool
	loaded *snapshotContent
}

func (b *shardBase) holds(s uint32) bool { return int(s) < len(b.held) && b.held[s] }

// shardBases returns t's shard bases within first-1 to last: its
// directory's files (whose header is read for the shards they hold) and
// the store's objects, by position and set.
func (v *Views) shardBases(ctx context.Context, t *Table, first, last uint64) []*shardBase {
	byName := map[string]*shardBase{}
	dir := v.snapDir(t)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		seq, _, ok := shardFileSeq(e.Name())
		if !ok || !e.Type().IsRegular() || seq > last || first > seq+1 {
			continue
		}
		path := filepath.Join(dir, e.Name())
		h, err := shardFileHeader(path)
		if err == nil && (h.Shards != uint64(t.shards) || h.Seq != seq || shardFileName(seq, h.Held) != e.Name()) {
			err = fmt.Errorf("of %d shards at %d, its name says %s", h.Shards, h.Seq, e.Name())
		}
		if err != nil {
			v.log.Warn("snapshot ignored", "table", t.Name(), "file", path, "why", err)
			continue
		}
		byName[e.Name()] = &shardBase{seq: seq, held: h.Held, file: path}
	}
	if v.cfg.SnapshotStore != nil {
		for _, o := range v.listShared(ctx, t) {
			if o.held == nil || o.seq > last || first > o.seq+1 || len(o.held) != int(t.shards) {
				continue
			}
			name := shardFileName(o.seq, o.held)
			b := byName[name]
			if b == nil {
				b = &shardBase{seq: o.seq, held: o.held}
				byName[name] = b
			}
			b.object = o.name
		}
	}
	out := make([]*shardBase, 0, len(byName))
	for _, b := range byName {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq > out[j].seq })
	return out
}

// shardFileHeader reads the header of the shard base file at path.
func shardFileHeader(path string) (snapshotHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return snapshotHeader{}, err
	}
	defer f.Close()
	h, _, err := readSnapshotHeader(bufio.NewReaderSize(f, 512))
	if err == nil && h.Held == nil {
		err = errors.New("not a shard base")
	}
	return h, err
}

// withShardBases completes the start of t, a view holding some shards:
// for each shard it holds, the newest source among the whole chain lc
// (nil: none) and the shard bases holding it. It returns the chain to
// restore: lc itself when no shard base is newer, else the merged
// content at the lowest of the sources' positions with the floors of its
// shards (nil: nothing to start from).
func (v *Views) withShardBases(ctx context.Context, t *Table, first, last uint64, lc *loadedChain) *loadedChain {
	var whole uint64
	if lc != nil {
		whole = lc.seq
	}
	cands := v.shardBases(ctx, t, first, last)
	for {
		// The newest source of each shard held (nil: the whole chain).
		src := make([]*shardBase, t.shards)
		used := map[*shardBase]bool{}
		for s := range t.shards {
			if !t.HoldsShard(s) {
				continue
			}
			for _, b := range cands { // newest first
				if !b.bad && b.seq > whole && b.holds(s) {
					src[s] = b
					used[b] = true
					break
				}
			}
		}
		if len(used) == 0 {
			return lc
		}
		failed := false
		for b := range used {
			if b.loaded == nil && !v.loadShardBase(ctx, t, b, first, last) {
				b.bad, failed = true, true
			}
		}
		if failed {
			continue // the next best sources of those shards
		}
		return mergeShardSources(t, lc, src)
	}
}

// loadShardBase reads b (its file, else its object, kept as a file) into
// b.loaded, with the checks of any base and that it holds what its name
// says.
func (v *Views) loadShardBase(ctx context.Context, t *Table, b *shardBase, first, last uint64) bool {
	read := func(path string) error {
		c, h, err := v.readSnapshotFile(path, t, first, last, b.seq)
		if err == nil && (h.Held == nil || h.Shards != uint64(t.shards) || !slices.Equal(h.Held, b.held)) {
			err = fmt.Errorf("holds other shards than its name says")
		}
		if err == nil {
			b.loaded = c
		}
		return err
	}
	if b.file != "" {
		err := read(b.file)
		if err == nil {
			return true
		}
		v.log.Warn("snapshot ignored", "table", t.Name(), "file", b.file, "why", err)
	}
	if b.object == "" {
		return false
	}
	// Downloaded to a temporary file, which no writer's pruning removes
	// (pruneShardFiles), and kept under its name once read.
	start := time.Now()
	path, size, err := v.downloadShared(ctx, t, &chainLink{seq: b.seq, base: true, object: b.object}, true)
	if err == nil {
		if err = read(path); err != nil || os.Rename(path, filepath.Join(v.snapDir(t), shardFileName(b.seq, b.held))) != nil {
			os.Remove(path)
		}
	}
	if err != nil {
		v.log.Warn("shared snapshot ignored", "table", t.Name(), "object", b.object, "seq", b.seq, "why", err)
		return false
	}
	v.log.Info("shared snapshot loaded", "table", t.Name(), "kind", sharedShards, "object", b.object, "seq", b.seq, "bytes", size,
		"elapsed", time.Since(start).Round(time.Millisecond))
	return true
}

// mergeShardSources builds the content t starts from: each shard's
// entities, partitions and command ids from its source (src[s], or the
// whole chain lc when nil), at the lowest source position, with floors.
func mergeShardSources(t *Table, lc *loadedChain, src []*shardBase) *loadedChain {
	opts := btree.Options{NoLocks: true}
	c := &snapshotContent{
		rows:  newRows(),
		parts: btree.NewBTreeGOptions(lessPartition, opts),
		ids:   btree.NewBTreeGOptions(lessCommand, opts),
	}
	n := int(t.shards)
	floor := make([]uint64, n)
	var whole uint64
	if lc != nil {
		whole = lc.seq
	}
	lowest, highest := uint64(0), uint64(0)
	first := true
	for s := range t.shards {
		if !t.HoldsShard(s) {
			continue
		}
		pos := whole
		if src[s] != nil {
			pos = src[s].seq
		}
		floor[s] = pos
		if first || pos < lowest {
			lowest = pos
		}
		highest = max(highest, pos)
		first = false
	}
	// from reports whether content of source b (nil: the whole chain)
	// is taken for partition pk.
	from := func(b *shardBase) func(pk string) bool {
		return func(pk string) bool {
			s := engine.Shard(pk, n)
			return t.HoldsShard(uint32(s)) && src[s] == b
		}
	}
	take := func(sc *snapshotContent, keep func(string) bool) {
		sc.rows.Scan(func(e engine.Packed) bool {
			if keep(e.PartitionKey()) {
				c.rows.Set(e)
			}
			return true
		})
		sc.parts.Scan(func(p *Partition) bool {
			if keep(p.Key) {
				c.parts.Set(p)
			}
			return true
		})
		for _, cr := range sc.expiry {
			if keep(cr.PartitionKey) {
				c.expiry = append(c.expiry, cr)
				c.ids.Set(cr)
			}
		}
	}
	if lc != nil {
		take(lc.content, from(nil))
	}
	seen := map[*shardBase]bool{}
	for _, b := range src {
		if b != nil && !seen[b] {
			seen[b] = true
			take(b.loaded, from(b))
		}
	}
	// Command ids are evicted in the order they were applied.
	slices.SortStableFunc(c.expiry, func(a, b *CommandRecord) int { return cmp.Compare(a.Seq, b.Seq) })
	out := &loadedChain{content: c, seq: lowest, at: time.Now(), baseSeq: lowest, baseAt: time.Now(), baseEnts: c.rows.Len()}
	if lc != nil {
		out.at, out.baseAt = lc.at, lc.baseAt
	}
	if highest > lowest {
		out.floor, out.floorTop = floor, highest
	}
	return out
}

// writeShardBase writes snap, of a view holding some shards, as a shard
// base, shares it when the views share snapshots, and removes the shard
// bases of this directory it makes useless: all but the newest two of
// the same shards.
func (s *snapshotter) writeShardBase(ctx context.Context, snap *Snapshot) error {
	v, t := s.v, s.t
	start := time.Now()
	t.snapInfo.writing.Store(start.UnixNano())
	defer t.snapInfo.writing.Store(0)
	dir := v.snapDir(t)
	held := t.held
	var size int64
	path, err := writeFileAtomic(dir, shardFileName(snap.Seq, held), func(w io.Writer) error {
		cw := &countingWriter{w: w}
		err := encodeSnapshotOf(cw, snap, start.UnixNano(), nil, t.shards, held)
		size = cw.n
		return err
	})
	el := time.Since(start)
	v.stats.noteWrite(true, size, el, err)
	if err != nil {
		t.snapInfo.writeFail.Add(1)
		v.log.Warn("snapshot not written", "table", t.Name(), "kind", sharedShards, "seq", snap.Seq, "err", err)
		return err
	}
	if dropped(t) {
		os.RemoveAll(dir)
		return nil
	}
	t.snapInfo.noteWritten(snap.Seq, start)
	t.snapInfo.noteChain(chainBook{baseSeq: snap.Seq})
	v.log.Info("snapshot written", "table", t.Name(), "kind", sharedShards, "file", path, "seq", snap.Seq, "entities", snap.Len(),
		"shards", t.heldCount(), "of", t.shards, "bytes", size, "elapsed", el.Round(time.Millisecond))
	pruneShardFiles(dir, held)
	if v.cfg.SnapshotStore != nil {
		v.shareShardBase(ctx, t, path, snap.Seq, held)
	}
	return nil
}

// pruneShardFiles removes from dir the shard bases but the newest two of
// the shards held (another set's are of an earlier placement).
func pruneShardFiles(dir string, held []bool) {
	key := shardSetKey(held)
	ents, _ := os.ReadDir(dir)
	var mine []string
	for _, e := range ents {
		if _, k, ok := shardFileSeq(e.Name()); ok {
			if k == key {
				mine = append(mine, e.Name())
			} else {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	slices.Sort(mine) // by position: the names start with it
	for _, name := range mine[:max(0, len(mine)-2)] {
		os.Remove(filepath.Join(dir, name))
	}
}

// shareShardBase puts the shard base at path in the store unless it holds
// it, then removes the shard bases the store no longer needs.
func (v *Views) shareShardBase(ctx context.Context, t *Table, path string, seq uint64, held []bool) {
	obj := v.cfg.SnapshotStore
	name := sharedShardName(t.Name(), t.Epoch(), seq, held)
	ctx, cancel := context.WithTimeout(ctx, shareTimeout)
	defer cancel()
	switch _, err := obj.GetInfo(ctx, name); {
	case err == nil:
		return
	case !errors.Is(err, jetstream.ErrObjectNotFound):
		v.log.Warn("snapshot not shared", "table", t.Name(), "object", name, "err", err)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		v.log.Warn("snapshot not shared", "table", t.Name(), "object", name, "err", err)
		return
	}
	defer f.Close()
	start := time.Now()
	put, err := obj.Put(ctx, jetstream.ObjectMeta{
		Name:        name,
		Description: fmt.Sprintf("snapshot of %d of the %d shards of table %s (epoch %d) at journal position %d", t.heldCount(), t.shards, t.Name(), t.Epoch(), seq),
		Metadata: map[string]string{
			metaTable:  t.Name(),
			metaEpoch:  strconv.FormatUint(t.Epoch(), 10),
			metaSeq:    strconv.FormatUint(seq, 10),
			metaKind:   sharedShards,
			metaShards: strconv.FormatUint(uint64(t.shards), 10),
			metaHeld:   hex.EncodeToString(heldBitmap(held)),
		},
	}, f)
	if err != nil {
		v.log.Warn("snapshot not shared", "table", t.Name(), "object", name, "err", err)
		return
	}
	v.stats.noteShared(true, int64(put.Size))
	v.log.Info("snapshot shared", "table", t.Name(), "kind", sharedShards, "object", name, "seq", seq, "bytes", put.Size,
		"elapsed", time.Since(start).Round(time.Millisecond))
	v.collectShared(ctx, t.Name(), t.Epoch(), t.PruneCut())
}

// parseSharedHeld reads a shard base object's shards from its metadata.
func parseSharedHeld(info *jetstream.ObjectInfo) ([]bool, error) {
	n, err := metaUint(info, metaShards)
	if err != nil {
		return nil, err
	}
	b, err := hex.DecodeString(info.Metadata[metaHeld])
	if err != nil || n > engine.MaxShards || uint64(len(b)) != (n+7)/8 {
		return nil, fmt.Errorf("bad %s in its metadata", metaHeld)
	}
	held := bitmapHeld(b)
	if slices.Contains(held[n:], true) {
		return nil, fmt.Errorf("bad %s in its metadata", metaHeld)
	}
	return held[:n], nil
}

// shardsKept returns the names of the shard bases among objs that some
// shard they hold keeps: for each shard, the positions of the bases
// holding it are kept as a whole base's are (sharedKept: the newest two,
// the horizon's, and, with cut, the newest before it and some spread
// after, where the next prunes cut). A shard held by fewer than two
// positions keeps them all.
func shardsKept(objs []sharedObject, first, cut uint64) map[string]bool {
	positions := map[int][]uint64{} // by shard, ascending
	for _, o := range objs {
		for s, held := range o.held {
			if held && !slices.Contains(positions[s], o.seq) {
				positions[s] = append(positions[s], o.seq)
			}
		}
	}
	kept := map[int]map[uint64]bool{}
	for s, ps := range positions {
		if keep, _, ok := sharedKept(ps, first, cut); ok {
			kept[s] = keep
		}
	}
	out := map[string]bool{}
	for _, o := range objs {
		for s, held := range o.held {
			if held && (kept[s] == nil || kept[s][o.seq]) {
				out[o.name] = true
				break
			}
		}
	}
	return out
}

// coveredBases returns, from a table incarnation's shared snapshots, the
// positions the journal may be cut after: every whole base's, and, when
// shard bases are there too, every position of a base at or below the
// highest position every shard has a base at or after (that position
// included).
func coveredBases(objs []sharedObject) []uint64 {
	var wholes, all []uint64
	var newestWhole uint64
	newest := map[int]uint64{} // by shard: its newest shard base
	shards := 0
	for _, o := range objs {
		switch {
		case o.held != nil:
			shards = max(shards, len(o.held))
			for s, h := range o.held {
				if h {
					newest[s] = max(newest[s], o.seq)
				}
			}
		case o.base:
			wholes = append(wholes, o.seq)
			newestWhole = max(newestWhole, o.seq)
		default:
			continue
		}
		all = append(all, o.seq)
	}
	out := wholes
	if shards > 0 {
		cover := uint64(0)
		for s := range shards {
			c := max(newest[s], newestWhole)
			if s == 0 || c < cover {
				cover = c
			}
		}
		if cover > 0 {
			for _, p := range all {
				if p <= cover {
					out = append(out, p)
				}
			}
			out = append(out, cover)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
