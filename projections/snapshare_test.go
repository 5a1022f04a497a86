package projections_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/projections"
)

// snapshotStore opens the rig's bucket of shared snapshots.
func (r *rig) snapshotStore() *projections.SnapshotStore {
	r.t.Helper()
	js, err := jetstream.New(r.nc)
	if err != nil {
		r.t.Fatal(err)
	}
	obj, err := projections.OpenSnapshotStore(r.ctx, js, "cairn", 1)
	if err != nil {
		r.t.Fatal(err)
	}
	return obj
}

// sharedObj is a snapshot object of the store, by its metadata.
type sharedObj struct {
	name string
	seq  uint64
	kind string // "base" or "delta" ("" for the single object of earlier versions)
}

// sharedOf returns the store's snapshots of a table incarnation, by position.
func (r *rig) sharedOf(obj jetstream.ObjectStore, name string, epoch uint64) []sharedObj {
	r.t.Helper()
	infos, err := obj.List(r.ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	prefix := projections.SharedSnapshotName(name, epoch)
	var out []sharedObj
	for _, info := range infos {
		if info.Deleted || info.Name != prefix && !strings.HasPrefix(info.Name, prefix+".") {
			continue
		}
		seq, err := strconv.ParseUint(info.Metadata["cairn-seq"], 10, 64)
		if err != nil {
			r.t.Fatalf("object %s: %v", info.Name, err)
		}
		out = append(out, sharedObj{name: info.Name, seq: seq, kind: info.Metadata["cairn-kind"]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// sharedSeq returns the newest position of the store's snapshots of a
// table incarnation (0: none).
func (r *rig) sharedSeq(obj jetstream.ObjectStore, name string, epoch uint64) uint64 {
	r.t.Helper()
	objs := r.sharedOf(obj, name, epoch)
	if len(objs) == 0 {
		return 0
	}
	return objs[len(objs)-1].seq
}

// waitNoShared waits until the store holds no snapshot of the incarnation.
func (r *rig) waitNoShared(obj jetstream.ObjectStore, name string, epoch uint64) {
	r.t.Helper()
	for r.sharedSeq(obj, name, epoch) != 0 {
		select {
		case <-r.ctx.Done():
			r.t.Fatalf("the shared snapshots of %s (epoch %d) were not removed", name, epoch)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestSharedSnapshotNewNode: views with an empty snapshot directory
// sharing the store of views that ran before start from the chain those
// shared (up to their stop), replay only the records after it, and are
// exactly what a replay of the whole journal gives, the declared
// projection included. Views whose own chain is older take the store's
// newer delta after it. A shared object beyond the journal is refused.
// Run it with -count=10.
func TestSharedSnapshotNewNode(t *testing.T) {
	r := newRig(t)
	obj := r.snapshotStore()
	r.cfg = snapConfig(t)
	epoch := r.create("Snap")
	h := newHistory(r, "Snap", epoch, uint64(time.Now().UnixNano()))
	h.write(230)

	cfg := r.cfg
	cfg.SnapshotStore = obj
	log1 := &logSink{}
	r.startViews(cfg, log1, byName).stop() // the snapshot on stop at 230, shared
	if got := r.sharedSeq(obj, "Snap", epoch); got != 230 {
		t.Fatalf("the store's chain reaches %d, want 230:\n%s", got, log1)
	}
	h.write(20) // the tail, while no view runs

	log2 := &logSink{}
	cfg2 := cfg
	cfg2.SnapshotDir = t.TempDir() // a new node
	second := r.startViews(cfg2, log2, byName)
	if len(log2.find("shared snapshot loaded", "kind=base")) != 1 ||
		len(log2.find("view replayed", "table=Snap", "records=20", "from_snapshot=230")) != 1 {
		t.Fatalf("the new views did not start from the shared chain at 230 and replay 20 records:\n%s", log2)
	}
	if files := snapFiles(t, cfg2.SnapshotDir); len(files) == 0 || !strings.HasPrefix(filepath.Base(files[len(files)-1]), fmt.Sprintf("%020d.", 230)) {
		t.Fatalf("files after the download: %v", files)
	}
	full := r.fullReplay("Snap", byName)
	got, _ := second.v.Table("Snap")
	want, _ := full.v.Table("Snap")
	sameView(t, "table", got.Snapshot(), want.Snapshot())
	pGot, ok, err := second.v.Readable(r.ctx, "ByName")
	if err != nil || !ok {
		t.Fatalf("projection: %v %v", ok, err)
	}
	pWant, _, _ := full.v.Readable(r.ctx, "ByName")
	if a, b := pGot.Snapshot(), pWant.Snapshot(); a.Seq != 250 || a.Seq != b.Seq || a.Len() != b.Len() {
		t.Fatalf("projection at %d with %d entities, the full replay's at %d with %d", a.Seq, a.Len(), b.Seq, b.Len())
	}
	second.stop() // shares its delta at 250
	if got := r.sharedSeq(obj, "Snap", epoch); got != 250 {
		t.Fatalf("the store's chain reaches %d, want 250", got)
	}

	// The first node's directory holds its chain to 230: it loads the
	// store's delta at 250 after it, and on a stop with nothing new,
	// shares nothing.
	log3 := &logSink{}
	cfg3 := cfg
	cfg3.NoSnapshotOnStop = true
	r.startViews(cfg3, log3).stop()
	if len(log3.find("shared snapshot loaded", "kind=delta", "seq=250")) != 1 || len(log3.find("view replayed", "records=0", "from_snapshot=250")) != 1 {
		t.Fatalf("the first views did not take the store's newer delta:\n%s", log3)
	}

	// A base beyond the journal (one the store says is at 1,000,000) is
	// refused, and the chain goes on after 250.
	objs := r.sharedOf(obj, "Snap", epoch)
	base, err := obj.GetBytes(r.ctx, objs[0].name)
	if err != nil {
		t.Fatal(err)
	}
	forged := fmt.Sprintf("%s.%020d.base", projections.SharedSnapshotName("Snap", epoch), 1_000_000)
	if _, err := obj.Put(r.ctx, jetstream.ObjectMeta{Name: forged, Metadata: map[string]string{"cairn-seq": "1000000", "cairn-kind": "base"}}, bytes.NewReader(base)); err != nil {
		t.Fatal(err)
	}
	h.write(10)
	log4 := &logSink{}
	r.startViews(cfg, log4).stop()
	if len(log4.find("shared snapshot ignored", "object="+forged, "beyond the journal's last record 260")) != 1 ||
		len(log4.find("view replayed", "records=10", "from_snapshot=250")) != 1 {
		t.Fatalf("the forged base was not refused, or the chain to 250 not loaded:\n%s", log4)
	}
}

// TestSharedSnapshotBadObjects: a shared snapshot that is damaged, of
// another table, at a position other than its metadata's, beyond the
// journal or without a position is never used: a line names the object
// and why, the downloaded file is removed, and the views fall back to
// their own file or the whole journal, exact either way. The objects are
// the single object per incarnation that earlier versions shared, which
// is still read as a base.
func TestSharedSnapshotBadObjects(t *testing.T) {
	r := newRig(t)
	obj := r.snapshotStore()
	r.cfg = snapConfig(t)
	r.cfg.SnapshotEvery = 1 << 30 // only the base each run writes on stop
	epoch := r.create("Snap")
	other := r.create("Other")
	h := newHistory(r, "Snap", epoch, 11)
	h.write(200)
	newHistory(r, "Other", other, 12).write(60)
	r.startViews(r.cfg, nil).stop() // bases of Snap at 200 and of Other at 60
	owns, _ := filepath.Glob(filepath.Join(r.cfg.SnapshotDir, fmt.Sprintf("Snap-%d", epoch), "*.snap"))
	foreigns, _ := filepath.Glob(filepath.Join(r.cfg.SnapshotDir, fmt.Sprintf("Other-%d", other), "*.snap"))
	if len(owns) != 1 || len(foreigns) != 1 {
		t.Fatalf("snapshot files %v and %v, want a base of each table", owns, foreigns)
	}
	own := owns[0]
	ownData, err := os.ReadFile(own)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := os.ReadFile(foreigns[0])
	if err != nil {
		t.Fatal(err)
	}
	h.write(30)
	cfg := r.cfg
	cfg.SnapshotDir = t.TempDir()
	r.startViews(cfg, nil).stop() // a base of Snap at 230: what the store would hold
	goods, _ := filepath.Glob(filepath.Join(cfg.SnapshotDir, fmt.Sprintf("Snap-%d", epoch), "*.snap"))
	if len(goods) != 1 || !strings.HasSuffix(goods[0], fmt.Sprintf("%020d.snap", 230)) {
		t.Fatalf("snapshot files %v, want a base at 230", goods)
	}
	good, err := os.ReadFile(goods[0])
	if err != nil {
		t.Fatal(err)
	}
	h.write(20)
	full := r.fullReplay("Snap")
	want, _ := full.v.Table("Snap")
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 1
	name := projections.SharedSnapshotName("Snap", epoch)
	cfg.SnapshotStore = obj

	for _, c := range []struct {
		name  string
		data  []byte
		seq   string // the metadata's position ("": none)
		why   string
		local bool // the views have their own file at 200 (and fall back to it)
	}{
		{"flipped byte", flipped, "230", "checksum mismatch", false},
		{"flipped byte, own file", flipped, "230", "checksum mismatch", true},
		{"truncated", good[:len(good)/2], "230", "checksum mismatch", false},
		{"another table", foreign, "240", `another table: "Other"`, false},
		{"metadata's position", good, "240", "its metadata says 240", true},
		{"beyond the journal", good, "251", "beyond the journal's last record 250", false},
		{"no position", good, "", "no cairn-seq", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			meta := jetstream.ObjectMeta{Name: name}
			if c.seq != "" {
				meta.Metadata = map[string]string{"cairn-seq": c.seq}
			}
			if _, err := obj.Put(r.ctx, meta, bytes.NewReader(c.data)); err != nil {
				t.Fatal(err)
			}
			cfg := cfg // reads, writes and shares nothing
			cfg.SnapshotDir, cfg.NoSnapshotOnStop = t.TempDir(), true
			dir := filepath.Join(cfg.SnapshotDir, fmt.Sprintf("Snap-%d", epoch))
			if c.local {
				os.MkdirAll(dir, 0o755)
				if err := os.WriteFile(filepath.Join(dir, filepath.Base(own)), ownData, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			log := &logSink{}
			run := r.startViews(cfg, log)
			defer run.stop()
			if len(log.find("shared snapshot ignored", "object="+name, c.why)) != 1 || len(log.find("shared snapshot loaded", "table=Snap ")) != 0 {
				t.Fatalf("no line says the object %s is ignored (%s):\n%s", name, c.why, log)
			}
			loaded := log.find("snapshot loaded", "table=Snap ")
			switch {
			case c.local && (len(loaded) != 1 || len(log.find("view replayed", "table=Snap", "from_snapshot=200")) != 1):
				t.Fatalf("the views' own file was not loaded:\n%s", log)
			case !c.local && len(loaded) != 0:
				t.Fatalf("a snapshot was loaded:\n%s", log)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "*"))
			if c.local && len(files) != 1 || !c.local && len(files) != 0 {
				t.Fatalf("files left: %v", files)
			}
			got, _ := run.v.Table("Snap")
			sameView(t, c.name, got.Snapshot(), want.Snapshot())
		})
	}
}

// TestSharedSnapshotDroppedTable: the shared snapshot of a table dropped
// while no views ran is removed at the next start (the live table's
// stays), and that of a table dropped while the views run at the drop.
func TestSharedSnapshotDroppedTable(t *testing.T) {
	r := newRig(t)
	obj := r.snapshotStore()
	r.cfg = snapConfig(t)
	a, b := r.create("Alpha"), r.create("Beta")
	newHistory(r, "Alpha", a, 13).write(30)
	newHistory(r, "Beta", b, 14).write(30)
	cfg := r.cfg
	cfg.SnapshotStore = obj
	log := &logSink{}
	r.startViews(cfg, log).stop()
	if r.sharedSeq(obj, "Alpha", a) != 30 || r.sharedSeq(obj, "Beta", b) != 30 {
		t.Fatalf("the snapshots were not shared:\n%s", log)
	}
	r.drop("Alpha")
	cfg.SnapshotDir = t.TempDir() // not only the node that had the files
	run := r.startViews(cfg, nil)
	r.waitNoShared(obj, "Alpha", a)
	if r.sharedSeq(obj, "Beta", b) != 30 {
		t.Fatal("the live table's shared snapshot was removed")
	}
	seq := r.drop("Beta")
	if err := run.v.WaitCatalog(r.ctx, seq); err != nil {
		t.Fatal(err)
	}
	r.waitNoShared(obj, "Beta", b)
}

// TestSharedRetentionHorizon: the store keeps the newest two bases of a
// table whose journal starts at 1, and removes the older ones with the
// deltas before them; once the journal is pruned after a base it lists
// (as the journal's pruning does), that base is kept too, where the
// journal starts, however many newer ones come (sharedKept decides the
// bases kept for the pruner's next cuts).
func TestSharedRetentionHorizon(t *testing.T) {
	r := newRig(t)
	obj := r.snapshotStore()
	r.cfg = snapConfig(t)
	r.cfg.SnapshotCompact = 0.1 // a base every few snapshots
	r.cfg.HistoryCheck = time.Hour
	kept, pruned := r.create("Kept"), r.create("Pruned")
	hk, hp := newHistory(r, "Kept", kept, 21), newHistory(r, "Pruned", pruned, 22)
	cfg := r.cfg
	cfg.SnapshotStore = obj
	run := r.startViews(cfg, nil)
	bases := func(name string, epoch uint64) []uint64 {
		t.Helper()
		b, err := run.v.SharedBases(r.ctx, name, epoch)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// waitBases writes to a table until the store lists a base past
	// after, and returns the bases listed then.
	waitBases := func(h *history, name string, epoch, after uint64) []uint64 {
		t.Helper()
		for {
			h.write(20)
			if b := bases(name, epoch); len(b) > 0 && b[len(b)-1] > after {
				return b
			}
			if r.ctx.Err() != nil {
				t.Fatalf("no base of %s after %d in the store", name, after)
			}
		}
	}
	b := waitBases(hp, "Pruned", pruned, 0)
	horizon := b[0]
	if err := r.stream("Pruned", pruned).Purge(r.ctx, jetstream.WithPurgeSequence(horizon+1)); err != nil {
		t.Fatal(err)
	}
	hp.purged(horizon + 1)
	last := horizon
	for range 4 { // four bases more at least, each put followed by a collection
		b = waitBases(hp, "Pruned", pruned, last)
		last = b[len(b)-1]
	}
	// The collection after the newest base's put may still run (and a
	// base of the tail come after it): wait for a listing it ended.
	for b = bases("Pruned", pruned); len(b) > 3 && r.ctx.Err() == nil; b = bases("Pruned", pruned) {
		time.Sleep(10 * time.Millisecond)
	}
	if len(b) != 3 || b[0] != horizon {
		t.Fatalf("the store lists the bases %v of a journal pruned after %d: want %d and the newest two", b, horizon, horizon)
	}
	for _, o := range r.sharedOf(obj, "Pruned", pruned) {
		if o.seq < horizon || o.kind == "delta" && o.seq == horizon {
			t.Fatalf("the store keeps %s, before the horizon base at %d", o.name, horizon)
		}
	}

	last = 0
	for range 4 {
		b = waitBases(hk, "Kept", kept, last)
		last = b[len(b)-1]
	}
	// The collection after the newest base's put may still run: wait for it.
	for len(bases("Kept", kept)) > 2 {
		select {
		case <-r.ctx.Done():
			t.Fatalf("the store keeps the bases %v of a journal never pruned, want two", bases("Kept", kept))
		case <-time.After(10 * time.Millisecond):
		}
	}
	b = bases("Kept", kept)
	for _, o := range r.sharedOf(obj, "Kept", kept) {
		if o.seq < b[0] || o.kind == "delta" && o.seq == b[0] {
			t.Fatalf("the store keeps %s, before the older of its two bases %v", o.name, b)
		}
	}
}

// TestSharedListRacingChanges: listing the store while a put and a delete
// run ends with what it found. The client library's List waited for its
// context in about 7 lists in 1,000 of this race (the description that
// was last when its watch started was replaced before it was delivered).
func TestSharedListRacingChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("500 lists")
	}
	r := newRig(t)
	obj := r.snapshotStore()
	put := func(i int) {
		if _, err := obj.Put(r.ctx, jetstream.ObjectMeta{Name: fmt.Sprintf("o%d", i)}, bytes.NewReader(make([]byte, 100))); err != nil {
			t.Error(err)
		}
	}
	const kept = 5
	for i := range kept {
		put(i)
	}
	for i := kept; i < kept+500; i++ {
		done := make(chan struct{})
		go func() {
			defer close(done)
			put(i)
			if err := obj.Delete(r.ctx, fmt.Sprintf("o%d", i-kept)); err != nil {
				t.Error(err)
			}
		}()
		ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
		infos, err := obj.List(ctx)
		cancel()
		<-done
		if err != nil {
			t.Fatalf("list %d: %v", i-kept, err)
		}
		// What the race leaves: the objects before, one put or one
		// deleted more or less.
		if n := len(infos); n < kept-1 || n > kept+1 {
			t.Fatalf("list %d: %d objects, want %d±1", i-kept, n, kept)
		}
	}
}

// TestSharedListManyObjects: a store of more objects than one batch
// direct get returns (1,024) is listed whole.
func TestSharedListManyObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("1,030 objects")
	}
	r := newRig(t)
	obj := r.snapshotStore()
	const n = 1030
	for i := range n {
		if _, err := obj.Put(r.ctx, jetstream.ObjectMeta{Name: fmt.Sprintf("o%d", i)}, bytes.NewReader(nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := obj.Delete(r.ctx, "o0"); err != nil {
		t.Fatal(err)
	}
	infos, err := obj.List(r.ctx)
	if err != nil || len(infos) != n-1 {
		t.Fatalf("listed %d objects (%v), want %d", len(infos), err, n-1)
	}
}
