package projections

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// Snapshot files. Each table incarnation has a directory of its own under
// Config.SnapshotDir, <name>-<epoch>, holding <seq>.snap files (seq in 20
// digits, so that names sort by position). A file is written as
// .<seq>.snap.tmp, fsynced, renamed and its directory fsynced: a crash
// leaves at most a temporary file, which is never read and is removed at
// the next start. The newest two files of an incarnation are kept; the
// directories of incarnations the catalog no longer holds are removed.

const (
	snapSuffix = ".snap"
	tmpSuffix  = ".tmp"
	snapKeep   = 2
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

// snapshotFiles lists the snapshot files of a directory, newest first.
func snapshotFiles(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasSuffix(n, snapSuffix) && !strings.HasPrefix(n, ".") {
			out = append(out, n)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out
}

// writeSnapshot writes s to the table's directory (temporary file, fsync,
// rename, fsync of the directory) and removes all but the newest files.
func (v *Views) writeSnapshot(t *Table, s *Snapshot) (string, error) {
	dir := v.snapDir(t)
	path, err := writeFileAtomic(dir, snapFileName(s.Seq), func(w io.Writer) error {
		return encodeSnapshot(w, s, time.Now().UnixNano(), nil)
	})
	if err != nil {
		return "", err
	}
	for i, old := range snapshotFiles(dir) {
		if i >= snapKeep {
			os.Remove(filepath.Join(dir, old))
		}
	}
	return path, nil
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

// loadSnapshot loads into t (which has applied nothing) the newest of its
// snapshot files that is whole, of this incarnation, of a format this code
// reads, and within the stream's records (first to last: the journal
// still has every record after it). With a shared store, the store's
// snapshot of the incarnation takes its place among the files by its
// position (a local file of the same position first) and is downloaded
// only when its turn comes. Each file or object it passes over is logged
// with the reason. It returns the position loaded (0: none).
func (v *Views) loadSnapshot(ctx context.Context, t *Table, first, last uint64) uint64 {
	dir := v.snapDir(t)
	var shared *sharedSnapshot
	if v.cfg.SnapshotStore != nil {
		shared = v.findShared(ctx, t, first, last)
	}
	files := snapshotFiles(dir)
	for i := 0; ; i++ {
		if shared != nil && (i == len(files) || shared.seq > fileSeq(files[i])) {
			if seq := v.loadShared(ctx, t, shared, first, last); seq > 0 {
				return seq
			}
			shared = nil
		}
		if i == len(files) {
			return 0
		}
		name := files[i]
		path := filepath.Join(dir, name)
		c, h, err := v.readSnapshotFile(path, t, first, last, 0)
		if err != nil {
			v.log.Warn("snapshot ignored", "table", t.Name(), "file", path, "why", err)
			continue
		}
		t.restore(h.Seq, c)
		return h.Seq
	}
}

// snapFileName is the name of the snapshot file at seq: the position in
// 20 digits, so that names sort by position. fileSeq reads it back.
func snapFileName(seq uint64) string {
	return fmt.Sprintf("%020d%s", seq, snapSuffix)
}

// fileSeq returns the position a snapshot file's name gives (0 if none).
func fileSeq(name string) uint64 {
	seq, _ := strconv.ParseUint(strings.TrimSuffix(name, snapSuffix), 10, 64)
	return seq
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
	switch {
	case err != nil:
		return nil, h, err
	case h.Name != t.Name():
		return nil, h, fmt.Errorf("of another table: %q", h.Name)
	case h.Epoch != t.Epoch():
		return nil, h, fmt.Errorf("of another incarnation of the table: epoch %d, the table's is %d", h.Epoch, t.Epoch())
	case h.Seq > last:
		return nil, h, fmt.Errorf("at position %d, beyond the journal's last record %d", h.Seq, last)
	case first > h.Seq+1:
		return nil, h, fmt.Errorf("at position %d, but the journal starts at %d (records purged)", h.Seq, first)
	case seq != 0 && h.Seq != seq:
		return nil, h, fmt.Errorf("at position %d, its metadata says %d", h.Seq, seq)
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, h, err
	}
	if err := checkSnapshotSum(f, fi.Size()); err != nil {
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
	c.rows.Scan(func(e *engine.Entity) bool {
		t.intern(e.Properties)
		return true
	})
	if len(t.derived) > 0 {
		c.rows.Scan(func(e *engine.Entity) bool {
			t.applyDerived(change{new: e, ver: e.Version, ts: e.Timestamp})
			return true
		})
	}
}

// snapshotter decides when an applier writes its view's snapshot: after
// Config.SnapshotEvery records since the last one, at most every
// Config.SnapshotInterval, one at a time, in a goroutine of its own.
type snapshotter struct {
	v       *Views
	t       *Table
	lastSeq uint64    // the position of the last snapshot written or loaded
	lastAt  time.Time // when the last write started
	running chan struct{}
}

// maybe starts a write if one is due (applier goroutine).
func (s *snapshotter) maybe() {
	if s.v.cfg.SnapshotDir == "" || s.t.seq-s.lastSeq < uint64(s.v.cfg.SnapshotEvery) ||
		time.Since(s.lastAt) < s.v.cfg.SnapshotInterval {
		return
	}
	if s.running != nil {
		select {
		case <-s.running:
			s.running = nil
		default:
			return // the previous one is still being written
		}
	}
	s.t.Publish()
	snap := s.t.Snapshot()
	s.lastSeq, s.lastAt = snap.Seq, time.Now()
	done := make(chan struct{})
	s.running = done
	s.v.wg.Add(1)
	go func() {
		defer s.v.wg.Done()
		defer close(done)
		s.write(s.v.baseContext(), snap)
	}()
}

// write writes snap, shares it when the views share snapshots (ctx bounds
// the upload) and logs the outcome.
func (s *snapshotter) write(ctx context.Context, snap *Snapshot) {
	start := time.Now()
	path, err := s.v.writeSnapshot(s.t, snap)
	if err != nil {
		s.v.log.Warn("snapshot not written", "table", s.t.Name(), "seq", snap.Seq, "err", err)
		return
	}
	s.v.log.Info("snapshot written", "table", s.t.Name(), "file", path, "seq", snap.Seq, "entities", snap.Len(),
		"elapsed", time.Since(start).Round(time.Millisecond))
	if s.v.cfg.SnapshotStore != nil {
		s.v.shareSnapshot(ctx, s.t, path, snap.Seq)
	}
}

// final writes a last snapshot when the views stop cleanly and the view
// applied records since its last one (after the applier returned).
func (s *snapshotter) final() {
	if s.v.cfg.SnapshotDir == "" || s.v.cfg.NoSnapshotOnStop || s.t.Fault() != nil || s.t.Err() != nil {
		return
	}
	if s.running != nil {
		<-s.running
	}
	s.t.Publish()
	snap := s.t.Snapshot()
	if snap.Seq <= s.lastSeq {
		return
	}
	// The views are stopping (Run's context has ended): the upload of
	// this last snapshot has a bound of its own, short, so that a store
	// out of reach (a cluster going down with the node) does not hold
	// the stop.
	ctx, cancel := context.WithTimeout(context.Background(), shareOnStopTimeout)
	defer cancel()
	s.write(ctx, snap)
}
