package projections

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Shared snapshots. With Config.SnapshotStore set (and SnapshotDir), every
// snapshot file a view writes is also put in that JetStream object store,
// one object per table incarnation named <lowercase full name>.<epoch>,
// with the journal position in the object's metadata; a node starting a
// view fetches the object when it is newer than its newest usable file,
// so that a new node (or one that lost its data directory) starts from the
// newest snapshot any node shared and replays only the tail.
//
// An object is a file like any other: it is downloaded into the table's
// snapshot directory (temporary name, fsync, rename) and loaded with the
// same checks (header name and epoch, position within the stream, nothing
// purged, checksum), plus its position matching its metadata's. One that
// fails is ignored with a warning naming the object and why, and removed
// from the directory; the views fall back to the local files, then to the
// whole journal.
//
// Several nodes upload the same incarnation's object: each reads the
// object's position first and uploads only a newer one. The read and the
// put are not one atomic step, so two uploads racing may leave the older
// of the two; the next upload replaces it.

// SnapshotBucket is the name of the object store bucket of the shared
// snapshots for a subject prefix.
func SnapshotBucket(prefix string) string { return strings.ToUpper(prefix) + "_SNAPSHOTS" }

// OpenSnapshotStore creates or opens the bucket of the shared snapshots.
func OpenSnapshotStore(ctx context.Context, js jetstream.JetStream, prefix string, replicas int) (jetstream.ObjectStore, error) {
	obj, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      SnapshotBucket(prefix),
		Description: "Cairn view snapshots shared by the nodes, one per table incarnation",
		Replicas:    max(replicas, 1),
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("projections: bucket %s: %w", SnapshotBucket(prefix), err)
	}
	return obj, nil
}

// SharedSnapshotName is the object name of a table incarnation's shared
// snapshot.
func SharedSnapshotName(name string, epoch uint64) string {
	return Lower(name) + "." + strconv.FormatUint(epoch, 10)
}

// sharedNameEpoch returns the epoch of a shared snapshot's object name.
func sharedNameEpoch(name string) (uint64, bool) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return 0, false
	}
	e, err := strconv.ParseUint(name[i+1:], 10, 64)
	return e, err == nil
}

// Metadata keys of a shared snapshot object.
const (
	metaTable = "cairn-table"
	metaEpoch = "cairn-epoch"
	metaSeq   = "cairn-seq"
)

// shareTimeout bounds one upload or download of a shared snapshot, and a
// look at the store's position of one.
const shareTimeout = time.Minute

// shareOnStopTimeout bounds the upload of the snapshot the views write
// when they stop.
const shareOnStopTimeout = 10 * time.Second

// sharedSeq returns the position an object's metadata gives.
func sharedSeq(info *jetstream.ObjectInfo) (uint64, error) {
	s, ok := info.Metadata[metaSeq]
	if !ok {
		return 0, fmt.Errorf("no %s in its metadata", metaSeq)
	}
	seq, err := strconv.ParseUint(s, 10, 64)
	if err != nil || seq == 0 {
		return 0, fmt.Errorf("bad %s in its metadata: %q", metaSeq, s)
	}
	return seq, nil
}

// shareSnapshot puts the snapshot file at path (of t at seq) in the store
// unless the store already holds one of this incarnation at seq or later.
func (v *Views) shareSnapshot(ctx context.Context, t *Table, path string, seq uint64) {
	obj := v.cfg.SnapshotStore
	name := SharedSnapshotName(t.Name(), t.Epoch())
	ctx, cancel := context.WithTimeout(ctx, shareTimeout)
	defer cancel()
	start := time.Now()
	info, err := obj.GetInfo(ctx, name)
	switch {
	case err == nil:
		if have, err := sharedSeq(info); err == nil && have >= seq {
			v.log.Debug("snapshot not shared: the store holds one as new", "table", t.Name(), "object", name, "seq", seq, "store_seq", have)
			return
		}
	case errors.Is(err, jetstream.ErrObjectNotFound):
	default:
		v.log.Warn("snapshot not shared", "table", t.Name(), "object", name, "seq", seq, "err", err)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		v.log.Warn("snapshot not shared", "table", t.Name(), "object", name, "seq", seq, "err", err)
		return
	}
	defer f.Close()
	put, err := obj.Put(ctx, jetstream.ObjectMeta{
		Name:        name,
		Description: fmt.Sprintf("snapshot of table %s (epoch %d) at journal position %d", t.Name(), t.Epoch(), seq),
		Metadata: map[string]string{
			metaTable: t.Name(),
			metaEpoch: strconv.FormatUint(t.Epoch(), 10),
			metaSeq:   strconv.FormatUint(seq, 10),
		},
	}, f)
	if err != nil {
		v.log.Warn("snapshot not shared", "table", t.Name(), "object", name, "seq", seq, "err", err)
		return
	}
	v.log.Info("snapshot shared", "table", t.Name(), "object", name, "seq", seq, "bytes", put.Size,
		"elapsed", time.Since(start).Round(time.Millisecond))
}

// sharedSnapshot is what the store holds for a table incarnation.
type sharedSnapshot struct {
	name string
	seq  uint64
}

// findShared returns the store's snapshot of t if it is one worth
// downloading: within the stream's records (first to last), by its
// metadata. nil when there is none, the store cannot be read (logged) or
// it is of no use (logged: the object and why).
func (v *Views) findShared(ctx context.Context, t *Table, first, last uint64) *sharedSnapshot {
	name := SharedSnapshotName(t.Name(), t.Epoch())
	ctx, cancel := context.WithTimeout(ctx, shareTimeout)
	defer cancel()
	info, err := v.cfg.SnapshotStore.GetInfo(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil
	}
	if err != nil {
		v.log.Warn("shared snapshots not read", "table", t.Name(), "object", name, "err", err)
		return nil
	}
	seq, err := sharedSeq(info)
	switch {
	case err != nil:
	case seq > last:
		err = fmt.Errorf("at position %d, beyond the journal's last record %d", seq, last)
	case first > seq+1:
		err = fmt.Errorf("at position %d, but the journal starts at %d (records purged)", seq, first)
	}
	if err != nil {
		v.log.Warn("shared snapshot ignored", "table", t.Name(), "object", name, "why", err)
		return nil
	}
	return &sharedSnapshot{name: name, seq: seq}
}

// loadShared downloads s into t's snapshot directory and loads it into t
// with the checks of a local file. It returns the position loaded (0:
// none; the object is ignored with a warning and its file removed).
func (v *Views) loadShared(ctx context.Context, t *Table, s *sharedSnapshot, first, last uint64) uint64 {
	start := time.Now()
	path, size, err := v.downloadShared(ctx, t, s)
	if err == nil {
		var c *snapshotContent
		var h snapshotHeader
		c, h, err = v.readSnapshotFile(path, t, first, last, s.seq)
		if err == nil {
			v.log.Info("shared snapshot loaded", "table", t.Name(), "object", s.name, "seq", s.seq, "bytes", size,
				"file", path, "elapsed", time.Since(start).Round(time.Millisecond))
			t.restore(h.Seq, c)
			return h.Seq
		}
		os.Remove(path)
	}
	v.log.Warn("shared snapshot ignored", "table", t.Name(), "object", s.name, "seq", s.seq, "why", err)
	return 0
}

// downloadShared copies the object into t's snapshot directory as
// <seq>.snap: a temporary file, fsynced and renamed.
func (v *Views) downloadShared(ctx context.Context, t *Table, s *sharedSnapshot) (string, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, shareTimeout)
	defer cancel()
	r, err := v.cfg.SnapshotStore.Get(ctx, s.name)
	if err != nil {
		return "", 0, err
	}
	defer r.Close()
	var size int64
	path, err := writeFileAtomic(v.snapDir(t), snapFileName(s.seq), func(w io.Writer) error {
		// The object store checks the object's digest at its end.
		var err error
		size, err = io.Copy(w, r)
		return err
	})
	return path, size, err
}

// removeSharedOf deletes a dropped incarnation's shared snapshot.
func (v *Views) removeSharedOf(ctx context.Context, name string, epoch uint64) {
	obj := SharedSnapshotName(name, epoch)
	ctx, cancel := context.WithTimeout(ctx, shareTimeout)
	defer cancel()
	err := v.cfg.SnapshotStore.Delete(ctx, obj)
	switch {
	case err == nil:
		v.log.Info("shared snapshot of a dropped table removed", "object", obj)
	case errors.Is(err, jetstream.ErrObjectNotFound), ctx.Err() != nil:
	default:
		v.log.Warn("remove the shared snapshot of a dropped table", "object", obj, "err", err)
	}
}

// removeSharedExcept deletes the shared snapshots of incarnations up to
// the catalog position upTo that are not in live (by epoch): those of
// tables dropped while no node removed them. Objects of later epochs
// (tables created since) and names that are not Cairn's are left alone.
func (v *Views) removeSharedExcept(ctx context.Context, live map[uint64]bool, upTo uint64) {
	ctx, cancel := context.WithTimeout(ctx, shareTimeout)
	defer cancel()
	infos, err := v.cfg.SnapshotStore.List(ctx)
	if err != nil {
		if !errors.Is(err, jetstream.ErrNoObjectsFound) && ctx.Err() == nil {
			v.log.Warn("shared snapshots not listed", "err", err)
		}
		return
	}
	for _, info := range infos {
		epoch, ok := sharedNameEpoch(info.Name)
		if !ok || live[epoch] || epoch > upTo || info.Deleted {
			continue
		}
		if _, err := sharedSeq(info); err != nil {
			continue // not one Cairn wrote
		}
		v.removeSharedOf(ctx, info.Name[:strings.LastIndexByte(info.Name, '.')], epoch)
	}
}

// writeFileAtomic writes a file of dir named name through fill: a
// temporary file, fsynced, renamed, and the directory fsynced. A failure
// leaves no file.
func writeFileAtomic(dir, name string, fill func(io.Writer) error) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "."+name+".*"+tmpSuffix)
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a failure; a no-op after the rename
	err = fill(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return "", err
		}
	}
	return path, nil
}
