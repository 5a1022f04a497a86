package projections

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/btree"

	"github.com/cairn-dev/cairn/engine"
)

// Snapshot files. Each table incarnation has a directory of its own under
// Config.SnapshotDir, <name>-<epoch>, holding its chain: bases as
// <seq>.snap and deltas as <seq>.delta (seq in 20 digits, so that names
// sort by position). A file is written as .<name>.*.tmp, fsynced, renamed
// and its directory fsynced: a crash leaves at most a temporary file,
// which is never read and is removed at the next start. Once a base is
// written, the directory keeps it, the deltas after it and the base
// before it (a fallback should the newest be damaged); the older files
// go. The directories of incarnations the catalog no longer holds are
// removed.

const (
	snapSuffix  = ".snap"
	deltaSuffix = ".delta"
	tmpSuffix   = ".tmp"
)

// snapDirName is the directory of a table incarnation's snapshots: the
// name with any character outside [A-Za-z0-9.] replaced (table names have
// none), then the epoch.
func snapDirName(name string, epoch uint64) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b) + "-" + strconv.FormatUint(epoch, 10)
}

// snapDirEpoch returns the epoch of an incarnation's directory name.
func snapDirEpoch(dir string) (uint64, bool) {
	i := strings.LastIndexByte(dir, '-')
	if i < 0 {
		return 0, false
	}
	e, err := strconv.ParseUint(dir[i+1:], 10, 64)
	return e, err == nil
}

func (v *Views) snapDir(t *Table) string {
	return filepath.Join(v.cfg.SnapshotDir, snapDirName(t.Name(), t.Epoch()))
}

// snapshotFiles lists the snapshot files of a directory, bases and
// deltas, newest first.
func snapshotFiles(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.Type().IsRegular() && (strings.HasSuffix(n, snapSuffix) || strings.HasSuffix(n, deltaSuffix)) && !strings.HasPrefix(n, ".") {
			out = append(out, n)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out
}

// removeSnapshotsExcept removes the snapshot directories of incarnations
// not in live (by epoch) and the temporary files a crash left behind.
func (v *Views) removeSnapshotsExcept(live map[uint64]bool) {
	ents, err := os.ReadDir(v.cfg.SnapshotDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(v.cfg.SnapshotDir, e.Name())
		if epoch, ok := snapDirEpoch(e.Name()); !ok || !live[epoch] {
			if err := os.RemoveAll(dir); err == nil {
				v.log.Info("snapshots of a dropped table removed", "dir", dir)
			}
			continue
		}
		files, _ := os.ReadDir(dir)
		for _, f := range files {
			if strings.HasSuffix(f.Name(), tmpSuffix) {
				os.Remove(filepath.Join(dir, f.Name()))
			}
		}
	}
}

// removeSnapshotsOf removes the snapshots of a dropped incarnation, and
// its shared one.
func (v *Views) removeSnapshotsOf(ctx context.Context, name string, epoch uint64) {
	if v.cfg.SnapshotDir == "" {
		return
	}
	dir := filepath.Join(v.cfg.SnapshotDir, snapDirName(name, epoch))
	if err := os.RemoveAll(dir); err != nil {
		v.log.Warn("remove the snapshots of a dropped table", "dir", dir, "err", err)
	}
	if v.cfg.SnapshotStore != nil {
		v.removeSharedOf(ctx, name, epoch)
	}
}

// loadSnapshot loads into t (which has applied nothing) the best chain
// of its snapshots (snapchain.go) within the stream's records (first to
// last: the journal still has every record after it), from its files and,
// with a store, the store's objects of the incarnation. It returns the
// chain loaded (nil: none).
func (v *Views) loadSnapshot(ctx context.Context, t *Table, first, last uint64) *loadedChain {
	lc := v.loadStart(ctx, t, chainScope{first: first, last: last, upTo: last})
	if lc != nil {
		t.restoreLoaded(lc)
		if lc.floor != nil {
			v.log.Info("view started from shard bases", "table", t.Name(), "seq", lc.seq, "highest", lc.floorTop, "entities", lc.content.rows.Len())
		}
	}
	return lc
}

// snapFileName is the name of the base file at seq, deltaFileName the
// delta's: the position in 20 digits, so that names sort by position.
// fileSeqKind reads them back.
func snapFileName(seq uint64) string  { return fmt.Sprintf("%020d%s", seq, snapSuffix) }
func deltaFileName(seq uint64) string { return fmt.Sprintf("%020d%s", seq, deltaSuffix) }

// fileSeqKind returns the position a snapshot file's name gives (0 if
// none) and whether it is a base.
func fileSeqKind(name string) (seq uint64, base bool) {
	rest, base := strings.CutSuffix(name, snapSuffix)
	if !base {
		var ok bool
		if rest, ok = strings.CutSuffix(name, deltaSuffix); !ok {
			return 0, false
		}
	}
	seq, _ = strconv.ParseUint(rest, 10, 64)
	return seq, base
}

// readSnapshotFile reads the snapshot file at path for t after checking
// its header (name, epoch; its position within first to last, and seq
// when not 0), then its checksum.
func (v *Views) readSnapshotFile(path string, t *Table, first, last, seq uint64) (*snapshotContent, snapshotHeader, error) {
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return nil, snapshotHeader{}, err
	}
	defer f.Close()
	// The header is read and checked first, then the checksum (through
	// ReadAt, which leaves the header's decoder where it was), then the
	// body with that decoder.
	h, dec, err := readSnapshotHeader(bufio.NewReaderSize(f, 1<<16))
	if err == nil {
		err = checkFileOf(t, h.Name, h.Epoch, h.Seq, last)
	}
	switch {
	case err != nil:
		return nil, h, err
	case first > h.Seq+1:
		return nil, h, fmt.Errorf("at position %d, but the journal starts at %d (records purged)", h.Seq, first)
	case seq != 0 && h.Seq != seq:
		return nil, h, fmt.Errorf("at position %d, its metadata says %d", h.Seq, seq)
	}
	if err := checkFileSum(f); err != nil {
		return nil, h, err
	}
	lastLog := time.Now()
	c, err := decodeSnapshotBody(dec, h, func(n uint64) {
		if time.Since(lastLog) >= v.cfg.Progress {
			lastLog = time.Now()
			v.log.Info("loading snapshot", "table", t.Name(), "entities", n, "of", h.Entities,
				"percent", fmt.Sprintf("%.1f", 100*float64(n)/float64(max(h.Entities, 1))),
				"entities_per_s", int(float64(n)/time.Since(start).Seconds()))
		}
	})
	if err != nil {
		return nil, h, err
	}
	v.log.Info("snapshot loaded", "table", t.Name(), "file", path, "seq", h.Seq, "entities", h.Entities,
		"elapsed", time.Since(start).Round(time.Millisecond))
	return c, h, nil
}

// checkFileOf checks that a snapshot file's header (a base's or a
// delta's) names t's incarnation at a position its journal holds (last:
// the journal's last record).
func checkFileOf(t *Table, name string, epoch, seq, last uint64) error {
	switch {
	case name != t.Name():
		return fmt.Errorf("of another table: %q", name)
	case epoch != t.Epoch():
		return fmt.Errorf("of another incarnation of the table: epoch %d, the table's is %d", epoch, t.Epoch())
	case seq > last:
		return fmt.Errorf("at position %d, beyond the journal's last record %d", seq, last)
	}
	return nil
}

// checkFileSum checks the checksum of the snapshot file f, read whole.
func checkFileSum(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return checkSnapshotSum(f, fi.Size())
}

// restore sets the view (which has applied nothing) to a snapshot's
// content at seq and derives its attached projections from it. It holds
// dmu throughout: a projection attached meanwhile either is attached
// before (at position 0, active, derived here) or sees the loaded view
// (and is built from it, as on any table with records).
func (t *Table) restore(seq uint64, c *snapshotContent) {
	t.dmu.Lock()
	defer t.dmu.Unlock()
	t.rows, t.parts, t.ids, t.expiry, t.seq = c.rows, c.parts, c.ids, c.expiry, seq
	t.dirty, t.touchAll = true, true
	if t.Partial() {
		t.dropUnheld()
	}
	if len(t.derived) > 0 {
		c.rows.Scan(func(p engine.Packed) bool {
			e := p.Entity() // a change may be kept (a build's buffer)
			t.applyDerived(change{new: e, ver: e.Version, ts: e.Timestamp})
			return true
		})
	}
}

// loadStart loads what t starts from within the scope: the best chain of
// its snapshots, and, for a view holding some shards, the shard bases
// newer than it (nil: none usable).
func (v *Views) loadStart(ctx context.Context, t *Table, sc chainScope) *loadedChain {
	lc := v.loadChain(ctx, t, sc)
	if t.Partial() {
		lc = v.withShardBases(ctx, t, sc.first, sc.upTo, lc)
	}
	return lc
}

// restoreLoaded sets the view (which has applied nothing) to what lc
// holds, with the floors of its shards (snapshards.go).
func (t *Table) restoreLoaded(lc *loadedChain) {
	t.restore(lc.seq, lc.content)
	t.floor, t.floorTop = lc.floor, lc.floorTop
}

// dropUnheld removes from a loaded view the partitions of the shards it
// does not hold: their entities, their partitions' counts and their
// command ids (dmu held).
func (t *Table) dropUnheld() {
	deleteWhere(t.rows, func(e engine.Packed) bool { return !t.Holds(e.PartitionKey()) })
	deleteWhere(t.parts, func(p *Partition) bool { return !t.Holds(p.Key) })
	deleteWhere(t.ids, func(c *CommandRecord) bool { return !t.Holds(c.PartitionKey) })
	t.expiry = slices.DeleteFunc(slices.Clone(t.expiry), func(c *CommandRecord) bool { return !t.Holds(c.PartitionKey) })
}

// deleteWhere removes the items of tr that drop says to.
func deleteWhere[T any](tr *btree.BTreeG[T], drop func(T) bool) {
	var gone []T
	tr.Scan(func(x T) bool {
		if drop(x) {
			gone = append(gone, x)
		}
		return true
	})
	for _, x := range gone {
		tr.Delete(x)
	}
}

// writeBase writes snap as the table's base file, shares it when the
// views share snapshots, and removes the local files it makes useless:
// the deltas up to it and the bases before the one before it. It logs
// the outcome, with progress lines during a long write.
func (s *snapshotter) writeBase(ctx context.Context, snap *Snapshot) error {
	v, t := s.v, s.t
	start := time.Now()
	t.snapInfo.writing.Store(start.UnixNano())
	defer t.snapInfo.writing.Store(0)
	defer t.shared.putEnded(snap.Seq)
	lastLog := start
	total := uint64(snap.Len())
	dir := v.snapDir(t)
	var size int64
	path, err := writeFileAtomic(dir, snapFileName(snap.Seq), func(w io.Writer) error {
		cw := &countingWriter{w: w}
		err := encodeSnapshot(cw, snap, start.UnixNano(), func(n uint64) {
			if time.Since(lastLog) >= v.cfg.Progress {
				lastLog = time.Now()
				v.log.Info("writing snapshot", "table", t.Name(), "kind", "base", "seq", snap.Seq, "entities", n, "of", total,
					"percent", fmt.Sprintf("%.1f", 100*float64(n)/float64(max(total, 1))),
					"entities_per_s", int(float64(n)/time.Since(start).Seconds()))
			}
		})
		size = cw.n
		if err == nil {
			v.failpoint("snapshot.base-write")
		}
		return err
	})
	el := time.Since(start)
	v.stats.noteWrite(true, size, el, err)
	if err != nil {
		t.snapInfo.writeFail.Add(1)
		v.log.Warn("snapshot not written", "table", t.Name(), "kind", "base", "seq", snap.Seq, "err", err)
		return err
	}
	if dropped(t) {
		os.RemoveAll(dir) // written after the drop removed the table's files
		return nil
	}
	t.snapInfo.noteWritten(snap.Seq, start)
	v.log.Info("snapshot written", "table", t.Name(), "kind", "base", "file", path, "seq", snap.Seq, "entities", total,
		"bytes", size, "elapsed", el.Round(time.Millisecond))
	pruneLocal(dir, snap.Seq)
	if v.cfg.SnapshotStore != nil {
		v.shareSnapshot(ctx, t, path, chainLinkOf(snap.Seq, 0, true))
	}
	return nil
}

// writeDelta writes the delta from the view at prev to snap, made of what
// the applier noted in ts, and queues it to be shared when the views share
// snapshots (sharequeue.go).
func (s *snapshotter) writeDelta(snap *Snapshot, prev uint64, ts *touchedSet) error {
	v, t := s.v, s.t
	start := time.Now()
	d := makeDelta(snap, prev, ts)
	var size int64
	path, err := writeFileAtomic(v.snapDir(t), deltaFileName(snap.Seq), func(w io.Writer) error {
		cw := &countingWriter{w: w}
		err := encodeDelta(cw, snap, prev, d, start.UnixNano())
		size = cw.n
		if err == nil {
			v.failpoint("snapshot.delta-write")
		}
		return err
	})
	el := time.Since(start)
	v.stats.noteWrite(false, size, el, err)
	if err != nil {
		t.snapInfo.writeFail.Add(1)
		v.log.Warn("snapshot not written", "table", t.Name(), "kind", "delta", "seq", snap.Seq, "prev", prev, "err", err)
		return err
	}
	if dropped(t) {
		os.RemoveAll(v.snapDir(t)) // written after the drop removed the table's files
		return nil
	}
	t.snapInfo.noteWritten(snap.Seq, start)
	v.log.Info("snapshot written", "table", t.Name(), "kind", "delta", "file", path, "seq", snap.Seq, "prev", prev,
		"upserts", len(d.upserts), "deletes", len(d.deletes), "bytes", size, "elapsed", el.Round(time.Millisecond))
	if v.cfg.SnapshotStore != nil {
		s.share(shareItem{path: path, link: chainLinkOf(snap.Seq, prev, false)})
	}
	return nil
}

// dropped reports whether t's table was dropped. A drop fails the view
// before its files are removed, so a write that ends after the removal
// sees it, and removes what it wrote.
func dropped(t *Table) bool {
	return engine.ErrorCode(t.Err()) == engine.CodeTableNotFound
}

// chainLinkOf is the link of a snapshot this node wrote.
func chainLinkOf(seq, prev uint64, base bool) *chainLink {
	return &chainLink{seq: seq, prev: prev, base: base}
}

// pruneLocal removes from dir, once the base at baseSeq is written, what
// no chain needs: the deltas up to it and every base but it and the one
// before it.
func pruneLocal(dir string, baseSeq uint64) {
	var before uint64
	for _, name := range snapshotFiles(dir) { // newest first
		if seq, base := fileSeqKind(name); base && seq < baseSeq {
			before = seq
			break
		}
	}
	for _, name := range snapshotFiles(dir) {
		seq, base := fileSeqKind(name)
		if base && seq != baseSeq && seq != before || !base && seq <= baseSeq {
			os.Remove(filepath.Join(dir, name))
		}
	}
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
