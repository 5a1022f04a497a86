package projections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Shared snapshots. With Config.SnapshotStore set (and SnapshotDir), every
// snapshot file a view writes is also put in that JetStream object store,
// bases and deltas as objects of their own, named
// <lowercase full name>.<epoch>.<seq in 20 digits>.base or .delta, with
// the table, epoch, position, kind and (a delta's) the position it
// follows in the object's metadata. A node starting a view takes the
// store's objects of the incarnation as candidates of its chain beside
// its files (snapchain.go), so that a new node (or one that lost its data
// directory) starts from the newest chain any node shared and replays
// only the tail. The single object per incarnation of earlier versions,
// <lowercase full name>.<epoch> (SharedSnapshotName), is read as a base.
//
// An object is a file like any other: it is downloaded into the table's
// snapshot directory (temporary name, fsync, rename) and loaded with the
// same checks (header name and epoch, position within the stream, nothing
// purged, the position it follows, checksum), plus its position matching
// its metadata's. One that fails is ignored with a warning naming the
// object and why, and removed from the directory; the views fall back to
// the next candidate, then to the whole journal.
//
// A node puts a base unless the store holds it, and a delta only when
// the store holds what it follows (or it follows the base this node is
// putting): a delta alone is of no use. Several nodes share one
// incarnation's chains; since a view at a position is the same whoever
// made it, a delta of one node may follow another's base.
//
// Retention, after each base put: the store keeps every base at or after
// the horizon base — the newest base before the stream's first sequence,
// read then with a stream-info request, for a journal pruned up to a base
// (none while the stream starts at 1) — and the newest two bases, and the
// deltas after the oldest base kept; the rest is removed. The journal's
// pruning cuts the journal only at a base the store lists as complete
// (SharedBases), so a new node always finds a base the journal follows.

// SnapshotBucket is the name of the object store bucket of the shared
// snapshots for a subject prefix.
func SnapshotBucket(prefix string) string { return strings.ToUpper(prefix) + "_SNAPSHOTS" }

// OpenSnapshotStore creates or opens the bucket of the shared snapshots.
func OpenSnapshotStore(ctx context.Context, js jetstream.JetStream, prefix string, replicas int) (*SnapshotStore, error) {
	bucket := SnapshotBucket(prefix)
	obj, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      bucket,
		Description: "Cairn view snapshots shared by the nodes, one per table incarnation",
		Replicas:    max(replicas, 1),
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("projections: bucket %s: %w", bucket, err)
	}
	return &SnapshotStore{ObjectStore: obj, nc: js.Conn(), bucket: bucket}, nil
}

// SnapshotStore is the object store of the shared snapshots, with a
// List that ends.
type SnapshotStore struct {
	jetstream.ObjectStore
	nc     *nats.Conn
	bucket string
}

// List returns the descriptions of the store's objects that are not
// deleted, or jetstream.ErrNoObjectsFound, as the client library's List.
//
// The library's List watches the descriptions and ends at the one
// delivered with nothing pending after it. When a put or a delete races
// the watch's start, the server's count of what is pending can stay above
// zero until the next change, and that one never comes: List waits for
// its context (measured: 7 lists in 1,000 racing a put and a delete, and
// a watch made again met the same count; a view's start, an as-of read
// or a collection then waited a minute). Here one batch direct get reads
// the last description of every object, as of one position of the
// stream, and the server ends it with an end-of-batch mark: nothing is
// counted. A store of more objects than the server returns in one batch
// (1,024) is listed by the library's List, each try bounded (listTry,
// doubled each time).
func (s *SnapshotStore) List(ctx context.Context, opts ...jetstream.ListObjectsOpt) ([]*jetstream.ObjectInfo, error) {
	infos, err := s.listDirect(ctx)
	if !errors.Is(err, errTooManyObjects) {
		return infos, err
	}
	for bound := listTry; ; bound *= 2 {
		tctx, cancel := context.WithTimeout(ctx, bound)
		infos, err := s.ObjectStore.List(tctx, opts...)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return infos, err
		}
	}
}

// listTry is the first bound of a try of the library's List.
const listTry = 2 * time.Second

// errTooManyObjects is a store with more objects than one batch returns.
var errTooManyObjects = errors.New("more objects than a batch direct get returns")

// listDirect lists the store with one batch direct get of the last
// message of each description subject.
func (s *SnapshotStore) listDirect(ctx context.Context) ([]*jetstream.ObjectInfo, error) {
	req, err := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
	}{[]string{"$O." + s.bucket + ".M.>"}})
	if err != nil {
		return nil, err
	}
	inbox := s.nc.NewRespInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := s.nc.PublishRequest("$JS.API.DIRECT.GET.OBJ_"+s.bucket, inbox, req); err != nil {
		return nil, err
	}
	var infos []*jetstream.ObjectInfo
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, fmt.Errorf("projections: list %s: %w", s.bucket, err)
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "204": // the end of the batch
			if len(infos) == 0 {
				return nil, jetstream.ErrNoObjectsFound
			}
			return infos, nil
		case "404":
			return nil, jetstream.ErrNoObjectsFound
		case "413":
			return nil, errTooManyObjects
		default:
			return nil, fmt.Errorf("projections: list %s: status %s %s", s.bucket, status, m.Header.Get("Description"))
		}
		var info jetstream.ObjectInfo
		if err := json.Unmarshal(m.Data, &info); err != nil || info.Deleted {
			continue // a removed object, or not a description: as the library's List
		}
		if ts, err := time.Parse(time.RFC3339Nano, m.Header.Get("Nats-Time-Stamp")); err == nil {
			info.ModTime = ts
		}
		infos = append(infos, &info)
	}
}

// SharedSnapshotName is the name of the single object per table
// incarnation that versions before chains wrote (one base, replaced by
// newer ones). It is still read, as a base, and removed by the retention
// once newer bases are there.
func SharedSnapshotName(name string, epoch uint64) string {
	return Lower(name) + "." + strconv.FormatUint(epoch, 10)
}

// sharedObjectName is the object name of a base or a delta of a table
// incarnation at seq.
func sharedObjectName(name string, epoch, seq uint64, base bool) string {
	return fmt.Sprintf("%s.%020d.%s", SharedSnapshotName(name, epoch), seq, sharedKind(base))
}

// sharedKind is the kind of a shared snapshot, as its name and metadata
// say it.
func sharedKind(base bool) string {
	if base {
		return sharedBase
	}
	return sharedDelta
}

// Metadata keys of a shared snapshot object, and the kinds.
const (
	metaTable   = "cairn-table"
	metaEpoch   = "cairn-epoch"
	metaSeq     = "cairn-seq"
	metaKind    = "cairn-kind"
	metaPrev    = "cairn-prev"
	sharedBase  = "base"
	sharedDelta = "delta"
)

// shareTimeout bounds one upload or download of a shared snapshot, and a
// look at the store.
const shareTimeout = time.Minute

// shareOnStopTimeout bounds the upload of the snapshot the views write
// when they stop.
const shareOnStopTimeout = 10 * time.Second

// sharedObject is a snapshot the store holds.
type sharedObject struct {
	name   string
	seq    uint64
	prev   uint64 // a delta's
	base   bool
	legacy bool // the single object of earlier versions
	size   uint64
	held   []bool // a shard base's shards (snapshards.go); nil for the others
}

// parseShared reads an object's metadata: whether it is a snapshot of
// the incarnation (lower, epoch), and which. An object of the incarnation
// whose metadata is unusable is returned with an error.
func parseShared(info *jetstream.ObjectInfo, lower string, epoch uint64) (sharedObject, bool, error) {
	legacy := SharedSnapshotName(lower, epoch)
	o := sharedObject{name: info.Name, size: info.Size}
	switch {
	case info.Deleted:
		return o, false, nil
	case info.Name == legacy:
		o.base, o.legacy = true, true
	case strings.HasPrefix(info.Name, legacy+"."):
		switch info.Metadata[metaKind] {
		case sharedBase:
			o.base = true
		case sharedDelta:
		case sharedShards:
			var err error
			if o.held, err = parseSharedHeld(info); err != nil {
				return o, true, err
			}
			o.base = true
		default:
			return o, true, fmt.Errorf("bad %s in its metadata: %q", metaKind, info.Metadata[metaKind])
		}
	default:
		return o, false, nil
	}
	if e := info.Metadata[metaEpoch]; e != "" && e != strconv.FormatUint(epoch, 10) {
		return o, true, fmt.Errorf("of epoch %s by its metadata", e)
	}
	var err error
	if o.seq, err = metaUint(info, metaSeq); err != nil {
		return o, true, err
	}
	if !o.base {
		if o.prev, err = metaUint(info, metaPrev); err != nil || o.prev >= o.seq {
			return o, true, fmt.Errorf("bad %s in its metadata: %q", metaPrev, info.Metadata[metaPrev])
		}
	}
	return o, true, nil
}

// metaUint reads a positive number from an object's metadata.
func metaUint(info *jetstream.ObjectInfo, key string) (uint64, error) {
	s, ok := info.Metadata[key]
	if !ok {
		return 0, fmt.Errorf("no %s in its metadata", key)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 && key != metaPrev {
		return 0, fmt.Errorf("bad %s in its metadata: %q", key, s)
	}
	return n, nil
}

// listSharedOf returns the store's snapshots of an incarnation, in
// position order. Objects of the incarnation with unusable metadata are
// in bad, with why.
func (v *Views) listSharedOf(ctx context.Context, name string, epoch uint64) (objs []sharedObject, bad map[string]error, err error) {
	ctx, cancel := context.WithTimeout(ctx, shareTimeout)
	defer cancel()
	infos, err := v.cfg.SnapshotStore.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	lower := Lower(name)
	for _, info := range infos {
		o, ours, err := parseShared(info, lower, epoch)
		if !ours {
			continue
		}
		if err != nil {
			if bad == nil {
				bad = map[string]error{}
			}
			bad[o.name] = err
			continue
		}
		objs = append(objs, o)
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].seq < objs[j].seq })
	return objs, bad, nil
}

// listShared returns the store's snapshots of t's incarnation; those it
// cannot use, and a store it cannot read, are logged.
func (v *Views) listShared(ctx context.Context, t *Table) []sharedObject {
	objs, bad, err := v.listSharedOf(ctx, t.Name(), t.Epoch())
	if err != nil {
		v.log.Warn("shared snapshots not read", "table", t.Name(), "err", err)
		return nil
	}
	for name, why := range bad {
		v.log.Warn("shared snapshot ignored", "table", t.Name(), "object", name, "why", why)
	}
	return objs
}

// SharedBases returns the positions of the bases of the table
// incarnation that the store holds, complete (an object is listed once
// its upload ended) and durable as the store's stream is, in ascending
// order: the positions the journal's pruning may cut the journal after.
// The store keeps every base at or after the newest one before the
// stream's first sequence (see the retention above). Without a store it
// returns none.
func (v *Views) SharedBases(ctx context.Context, table string, epoch uint64) ([]uint64, error) {
	if v.cfg.SnapshotStore == nil {
		return nil, nil
	}
	objs, _, err := v.listSharedOf(ctx, table, epoch)
	if err != nil {
		return nil, fmt.Errorf("projections: shared bases of %s: %w", table, err)
	}
	return coveredBases(objs), nil
}

// shareSnapshot puts the snapshot file at path, l of t, in the store: a
// base unless the store holds it, a delta when the store holds what it
// follows or it follows the base this node is putting. What it could not
// do is logged; nothing waits for it.
func (v *Views) shareSnapshot(ctx context.Context, t *Table, path string, l *chainLink) {
	obj := v.cfg.SnapshotStore
	name := sharedObjectName(t.Name(), t.Epoch(), l.seq, l.base)
	ctx, cancel := context.WithTimeout(ctx, shareTimeout)
	defer cancel()
	start := time.Now()
	sb := &t.shared
	switch _, err := obj.GetInfo(ctx, name); {
	case err == nil:
		sb.known(l.seq)
		v.log.Debug("snapshot not shared: the store holds it", "table", t.Name(), "object", name)
		return
	case !errors.Is(err, jetstream.ErrObjectNotFound):
		v.log.Warn("snapshot not shared", "table", t.Name(), "object", name, "err", err)
		return
	}
	if !l.base && !sb.holds(l.prev) && !v.sharedHolds(ctx, t, l.prev) {
		v.log.Debug("snapshot not shared: the store lacks what it follows", "table", t.Name(), "object", name, "prev", l.prev)
		return
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) && !l.base {
		// A base written since removed it: the store's chain goes on
		// from that base once it is put.
		v.log.Debug("snapshot not shared: a newer base replaced it", "table", t.Name(), "object", name)
		return
	}
	if err != nil {
		v.log.Warn("snapshot not shared", "table", t.Name(), "object", name, "err", err)
		return
	}
	defer f.Close()
	kind := sharedKind(l.base)
	meta := map[string]string{
		metaTable: t.Name(),
		metaEpoch: strconv.FormatUint(t.Epoch(), 10),
		metaSeq:   strconv.FormatUint(l.seq, 10),
		metaKind:  kind,
	}
	if !l.base {
		meta[metaPrev] = strconv.FormatUint(l.prev, 10)
	}
	put, err := obj.Put(ctx, jetstream.ObjectMeta{
		Name:        name,
		Description: fmt.Sprintf("snapshot %s of table %s (epoch %d) at journal position %d", kind, t.Name(), t.Epoch(), l.seq),
		Metadata:    meta,
	}, f)
	if err != nil {
		v.log.Warn("snapshot not shared", "table", t.Name(), "object", name, "err", err)
		return
	}
	sb.known(l.seq)
	v.stats.noteShared(l.base, int64(put.Size))
	v.log.Info("snapshot shared", "table", t.Name(), "kind", kind, "object", name, "seq", l.seq, "bytes", put.Size,
		"elapsed", time.Since(start).Round(time.Millisecond))
	if l.base {
		v.collectShared(ctx, t.Name(), t.Epoch(), t.PruneCut())
	}
}

// sharedHolds looks in the store for a snapshot of t at seq, any kind
// (the single object of earlier versions too).
func (v *Views) sharedHolds(ctx context.Context, t *Table, seq uint64) bool {
	obj := v.cfg.SnapshotStore
	for _, name := range []string{sharedObjectName(t.Name(), t.Epoch(), seq, false), sharedObjectName(t.Name(), t.Epoch(), seq, true)} {
		if info, err := obj.GetInfo(ctx, name); err == nil && !info.Deleted {
			t.shared.known(seq)
			return true
		}
	}
	if info, err := obj.GetInfo(ctx, SharedSnapshotName(t.Name(), t.Epoch())); err == nil {
		if s, err := metaUint(info, metaSeq); err == nil && s == seq {
			t.shared.known(seq)
			return true
		}
	}
	return false
}

// sharedBook is what a view's writers know of the store: positions it
// holds (put or seen), and the base this node is putting.
type sharedBook struct {
	mu      sync.Mutex
	in      map[uint64]bool
	pending uint64 // a base being written and put (0: none)
}

func (sb *sharedBook) known(seq uint64) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.in == nil {
		sb.in = map[uint64]bool{}
	}
	sb.in[seq] = true
}

// holds reports whether the store holds a snapshot at seq, or will once
// this node's base there is put.
func (sb *sharedBook) holds(seq uint64) bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.in[seq] || sb.pending == seq
}

// putting notes the base this node writes and puts (applier goroutine).
func (sb *sharedBook) putting(seq uint64) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.pending = seq
}

// putEnded notes that the base at seq was put, or not: when the store
// holds it, what it knew before it goes (the deltas follow it now, and a
// delta that follows an older position is looked up in the store).
func (sb *sharedBook) putEnded(seq uint64) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.pending == seq {
		sb.pending = 0
	}
	if sb.in[seq] {
		for s := range sb.in {
			if s < seq {
				delete(sb.in, s)
			}
		}
	}
}

// collectShared removes the store's snapshots of an incarnation that the
// retention does not keep (see above; shard bases: shardsKept). The stream's first sequence is
// read now, never from a cache: the journal's pruning may have moved it.
func (v *Views) collectShared(ctx context.Context, name string, epoch uint64, cut uint64) {
	objs, _, err := v.listSharedOf(ctx, name, epoch)
	if err != nil {
		v.log.Warn("shared snapshots not collected", "table", name, "err", err)
		return
	}
	h, err := v.j.History(ctx, name, epoch)
	if err != nil {
		v.log.Warn("shared snapshots not collected", "table", name, "err", err)
		return
	}
	// The journal starts at its recorded horizon even while a purge a
	// crash left undone keeps the records below it.
	first := max(h.First, h.Horizon)
	var bases []uint64
	for _, o := range objs {
		if o.base && o.held == nil {
			bases = append(bases, o.seq)
		}
	}
	keep, deltasAfter, ok := sharedKept(bases, first, cut)
	shards := shardsKept(objs, first, cut)
	for _, o := range objs {
		switch {
		case o.held != nil && shards[o.name]:
			continue
		case o.held == nil && (!ok || o.base && keep[o.seq] || !o.base && o.seq > deltasAfter):
			continue
		}
		if err := v.cfg.SnapshotStore.Delete(ctx, o.name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			v.log.Warn("shared snapshot not removed", "table", name, "object", o.name, "err", err)
			continue
		}
		v.stats.removed.Add(1)
		v.log.Debug("shared snapshot removed", "table", name, "object", o.name)
	}
}

// downloadShared copies l's object into t's snapshot directory under its
// file name (a temporary file, fsynced and renamed), or, for scratch, to
// a temporary file there that the caller removes.
func (v *Views) downloadShared(ctx context.Context, t *Table, l *chainLink, scratch bool) (string, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, shareTimeout)
	defer cancel()
	r, err := v.cfg.SnapshotStore.Get(ctx, l.object)
	if err != nil {
		return "", 0, err
	}
	// The store's reader waits for the object's chunks until the
	// context's deadline, not its cancellation, and holds a lock its
	// Close needs meanwhile: an object removed while it is read (another
	// node's collection) stalls it. The copy runs aside and is given up on
	// as ctx ends (the views stopping), its reader closed once it returns.
	abandoned := false
	defer func() {
		if abandoned {
			go r.Close()
		} else {
			r.Close()
		}
	}()
	var size int64
	copyTo := func(w io.Writer) error {
		type copied struct {
			n   int64
			err error
		}
		done := make(chan copied, 1)
		go func() {
			n, err := io.Copy(w, r) // the object store checks the digest at its end
			done <- copied{n, err}
		}()
		select {
		case c := <-done:
			size = c.n
			return c.err
		case <-ctx.Done():
			abandoned = true
			return fmt.Errorf("download of %s given up: %w", l.object, ctx.Err())
		}
	}
	dir := v.snapDir(t)
	if scratch {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", 0, err
		}
		f, err := os.CreateTemp(dir, ".shared-*"+tmpSuffix)
		if err != nil {
			return "", 0, err
		}
		err = copyTo(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(f.Name())
			return "", 0, err
		}
		return f.Name(), size, nil
	}
	name := deltaFileName(l.seq)
	if l.base {
		name = snapFileName(l.seq)
	}
	path, err := writeFileAtomic(dir, name, copyTo)
	return path, size, err
}

// removeSharedOf deletes a dropped incarnation's shared snapshots.
func (v *Views) removeSharedOf(ctx context.Context, name string, epoch uint64) {
	objs, bad, err := v.listSharedOf(ctx, name, epoch)
	if err != nil {
		if ctx.Err() == nil {
			v.log.Warn("remove the shared snapshots of a dropped table", "table", name, "err", err)
		}
		return
	}
	names := make([]string, 0, len(objs)+len(bad))
	for _, o := range objs {
		names = append(names, o.name)
	}
	for n := range bad {
		names = append(names, n)
	}
	ctx, cancel := context.WithTimeout(ctx, shareTimeout)
	defer cancel()
	for _, obj := range names {
		err := v.cfg.SnapshotStore.Delete(ctx, obj)
		switch {
		case err == nil:
			v.log.Info("shared snapshot of a dropped table removed", "object", obj)
		case errors.Is(err, jetstream.ErrObjectNotFound), ctx.Err() != nil:
		default:
			v.log.Warn("remove the shared snapshot of a dropped table", "object", obj, "err", err)
		}
	}
}

// removeSharedExcept deletes the shared snapshots of incarnations up to
// the catalog position upTo that are not in live (by epoch): those of
// tables dropped while no node removed them. Objects of later epochs
// (tables created since) and objects that are not Cairn's are left alone.
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
		table, epoch, ok := sharedOwner(info)
		if !ok || live[epoch] || epoch > upTo || info.Deleted {
			continue
		}
		err := v.cfg.SnapshotStore.Delete(ctx, info.Name)
		switch {
		case err == nil:
			v.log.Info("shared snapshot of a dropped table removed", "table", table, "object", info.Name)
		case errors.Is(err, jetstream.ErrObjectNotFound), ctx.Err() != nil:
		default:
			v.log.Warn("remove the shared snapshot of a dropped table", "object", info.Name, "err", err)
		}
	}
}

// sharedOwner returns the table and epoch of a snapshot object Cairn
// wrote, from its metadata (ok false for anything else).
func sharedOwner(info *jetstream.ObjectInfo) (table string, epoch uint64, ok bool) {
	table = info.Metadata[metaTable]
	e, err := strconv.ParseUint(info.Metadata[metaEpoch], 10, 64)
	if table == "" || err != nil {
		// Objects of the first versions carried only the position: the
		// epoch is their name's last part.
		if _, err := metaUint(info, metaSeq); err != nil {
			return "", 0, false
		}
		i := strings.LastIndexByte(info.Name, '.')
		if i < 0 {
			return "", 0, false
		}
		if e, err = strconv.ParseUint(info.Name[i+1:], 10, 64); err != nil {
			return "", 0, false
		}
		table = info.Name[:i]
	}
	return table, e, true
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
