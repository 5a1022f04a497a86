package projections_test

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections"
)

// logSink keeps log lines, each as its message and its attributes.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (l *logSink) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logSink) WithGroup(string) slog.Handler            { return l }

func (l *logSink) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}

// find returns the lines that contain every one of parts.
func (l *logSink) find(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range l.lines {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// running is views started by startViews.
type running struct {
	v    *projections.Views
	stop func() // stops them and waits for Run
}

// startViews runs views with cfg (PublishEvery 7) logging to log (nothing
// when nil) and the projections defs, and waits until they are ready.
func (r *rig) startViews(cfg projections.Config, log *logSink, defs ...*projections.Definition) running {
	r.t.Helper()
	h := slog.Handler(slog.NewTextHandler(io.Discard, nil))
	if log != nil {
		h = log
	}
	cfg.PublishEvery = 7
	v := projections.NewViews(r.j, slog.New(h), cfg)
	v.Declare(defs)
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				r.t.Errorf("Run: %v", err)
			}
		}
	}
	r.t.Cleanup(stop)
	if err := v.WaitReady(r.ctx); err != nil {
		r.t.Fatal(err)
	}
	return running{v: v, stop: stop}
}

// history writes random records to a table as the committer would: puts
// (an update or a decided merge: the entity whole) and deletes over a few
// partitions and rows, with command ids of which some repeat, and record
// times a second apart give or take three, so that the dedup window
// (30 s in these tests) both keeps and evicts ids, not in sequence order.
type history struct {
	r     *rig
	name  string
	epoch uint64
	rnd   *rand.Rand
	last  map[string]uint64
	n     int
	ids   [][2]string // partition key and id of every command
	parts int         // partitions written (6 when 0)
}

func newHistory(r *rig, name string, epoch uint64, seed uint64) *history {
	return &history{r: r, name: name, epoch: epoch, rnd: rand.New(rand.NewPCG(seed, 7)), last: map[string]uint64{}}
}

const second = int64(time.Second / 100)

func (h *history) write(n int) {
	h.r.t.Helper()
	for ; n > 0; n-- {
		h.n++
		pk := fmt.Sprintf("p%d", h.rnd.IntN(cmp.Or(h.parts, 6)))
		rec := &engine.Record{Time: 1e15 + int64(h.n)*second + h.rnd.Int64N(6*second) - 3*second,
			PartitionKey: pk, Nonce: fmt.Sprintf("%s-%d-%d", h.name, h.epoch, h.n)}
		for i := h.rnd.IntN(3); i >= 0; i-- {
			rk := fmt.Sprintf("r%02d", h.rnd.IntN(25))
			if h.rnd.IntN(4) == 0 {
				rec.Events = append(rec.Events, engine.Event{Kind: engine.EventDelete, RowKey: rk})
				continue
			}
			props := []engine.Property{{Name: "Name", Value: engine.String(fmt.Sprintf("n%d", h.rnd.IntN(50)))}}
			if h.rnd.IntN(2) == 0 {
				props = append(props, engine.Property{Name: "Qty", Value: engine.Int64(h.rnd.Int64N(1000))})
			}
			rec.Events = append(rec.Events, engine.Event{Kind: engine.EventPut, RowKey: rk, Properties: props})
		}
		if h.rnd.IntN(3) > 0 {
			id := fmt.Sprintf("cmd%d", h.rnd.IntN(200))
			rec.Commands = []engine.CommandRef{{ID: id, Count: uint32(len(rec.Events))}}
			h.ids = append(h.ids, [2]string{pk, id})
		}
		seq, err := h.r.j.Append(h.r.ctx, h.name, h.epoch, rigShards, rec, h.last[pk])
		if err != nil {
			h.r.t.Fatal(err)
		}
		h.last[pk] = seq
	}
}

// purged notes that the journal lost its records below before: a
// partition whose last record went has none to expect in its appends
// (JetStream's last sequence of a subject with no message is 0).
func (h *history) purged(before uint64) {
	for pk, seq := range h.last {
		if seq < before {
			h.last[pk] = 0
		}
	}
}

// sameView fails unless two snapshots hold the same entities (all their
// fields), partitions and command ids, in the same eviction order.
func sameView(t *testing.T, what string, got, want *projections.Snapshot) {
	t.Helper()
	if got.Seq != want.Seq || got.Len() != want.Len() {
		t.Fatalf("%s: at %d with %d entities, want %d with %d", what, got.Seq, got.Len(), want.Seq, want.Len())
	}
	var ga, wa []engine.Entity
	got.Scan(func(e *engine.Entity) bool { ga = append(ga, *e); return true })
	want.Scan(func(e *engine.Entity) bool { wa = append(wa, *e); return true })
	for i := range wa {
		if !reflect.DeepEqual(ga[i], wa[i]) {
			t.Fatalf("%s: entity %d is %+v, want %+v", what, i, ga[i], wa[i])
		}
	}
	var gp, wp []projections.Partition
	got.Partitions(func(p projections.Partition) bool { gp = append(gp, p); return true })
	want.Partitions(func(p projections.Partition) bool { wp = append(wp, p); return true })
	if !reflect.DeepEqual(gp, wp) {
		t.Fatalf("%s: partitions %+v, want %+v", what, gp, wp)
	}
	if a, b := projections.CommandIDs(got), projections.CommandIDs(want); !reflect.DeepEqual(a, b) {
		t.Fatalf("%s: command ids %+v, want %+v", what, a, b)
	}
	if a, b := projections.CommandLog(got), projections.CommandLog(want); !reflect.DeepEqual(a, b) {
		t.Fatalf("%s: command ids in eviction order %+v, want %+v", what, a, b)
	}
}

// fullReplay returns the table's view rebuilt from its whole journal.
func (r *rig) fullReplay(name string, defs ...*projections.Definition) running {
	cfg := r.cfg
	cfg.SnapshotDir = ""
	return r.startViews(cfg, nil, defs...)
}

func snapFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func snapConfig(t *testing.T) projections.Config {
	return projections.Config{SnapshotDir: t.TempDir(), SnapshotEvery: 50, SnapshotInterval: -1, DedupWindow: 30 * time.Second}
}

var byName = &projections.Definition{Name: "ByName", Source: "Snap", Version: 1, Kind: projections.KindIndex, Key: []string{"Name"}, Include: []string{"Qty"}}

// TestSnapshotRestart: views restarted on the snapshots of an earlier run
// load the newest and replay only the records after it (written while no
// view ran); their table and its declared projection are exactly what a
// replay of the whole journal gives, the projection ready with the table,
// and a command id from before the restart is still remembered. Run it
// with -count=20.
func TestSnapshotRestart(t *testing.T) {
	r := newRig(t)
	r.cfg = snapConfig(t)
	epoch := r.create("Snap")
	h := newHistory(r, "Snap", epoch, uint64(time.Now().UnixNano()))
	h.write(300)

	first := r.startViews(r.cfg, nil, byName)
	tb, _ := first.v.Table("Snap")
	h.write(100)
	if _, err := tb.WaitSeq(r.ctx, 400); err != nil {
		t.Fatal(err)
	}
	first.stop() // and writes the snapshot at 400
	files := snapFiles(t, r.cfg.SnapshotDir)
	if len(files) == 0 || !strings.HasPrefix(filepath.Base(files[len(files)-1]), fmt.Sprintf("%020d.", 400)) {
		t.Fatalf("snapshot files %v, want the newest at 400", files)
	}
	before := h.ids
	h.write(20) // the tail, while no view runs

	log := &logSink{}
	again := r.startViews(r.cfg, log, byName)
	if len(log.find("snapshot loaded")) != 1 || len(log.find("view replayed", "records=20", "from_snapshot=400")) != 1 {
		t.Fatalf("the restarted view did not load its chain to 400 and replay 20 records:\n%s", log)
	}
	full := r.fullReplay("Snap", byName)
	tAgain, _ := again.v.Table("Snap")
	tFull, _ := full.v.Table("Snap")
	sameView(t, "table", tAgain.Snapshot(), tFull.Snapshot())

	// A command id of the last record before the restart, still inside
	// the dedup window, is answered from the view.
	last := before[len(before)-1]
	if _, ok := tAgain.Snapshot().Command(last[0], last[1]); !ok {
		t.Fatalf("command id %v forgotten", last)
	}

	pAgain, ok, err := again.v.Readable(r.ctx, "ByName")
	if err != nil || !ok {
		t.Fatalf("projection after the restart: %v %v", ok, err)
	}
	pFull, _, err := full.v.Readable(r.ctx, "ByName")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := pAgain.Snapshot(), pFull.Snapshot(); a.Seq != 420 || a.Seq != b.Seq || a.Len() != b.Len() {
		t.Fatalf("projection at %d with %d entities, the full replay's at %d with %d", a.Seq, a.Len(), b.Seq, b.Len())
	} else {
		var ga, wa []engine.Entity
		a.Scan(func(e *engine.Entity) bool { ga = append(ga, *e); return true })
		b.Scan(func(e *engine.Entity) bool { wa = append(wa, *e); return true })
		if !reflect.DeepEqual(ga, wa) {
			t.Fatal("the projection differs from the full replay's")
		}
	}
}

// TestSnapshotBadFiles: a snapshot file that is damaged, truncated, of
// another table or incarnation, of a newer format, at a position beyond
// the journal's end or left temporary by a crash is never used: a line names the file and why (not for a temporary
// file, just removed), the views fall back to an older file or the whole
// journal, and the view is exact.
func TestSnapshotBadFiles(t *testing.T) {
	r := newRig(t)
	r.cfg = snapConfig(t)
	epoch := r.create("Snap")
	other := r.create("Other")
	h := newHistory(r, "Snap", epoch, 1)
	h.write(230)
	newHistory(r, "Other", other, 2).write(60)
	// Two files for Snap (150 and 200, written while replaying) and
	// the snapshot on stop at 230.
	r.startViews(r.cfg, nil, byName).stop()
	dir := filepath.Join(r.cfg.SnapshotDir, fmt.Sprintf("Snap-%d", epoch))
	files, _ := filepath.Glob(filepath.Join(dir, "*.snap"))
	if len(files) != 2 {
		t.Fatalf("snapshot files %v, want two", files)
	}
	older, newest := files[0], files[1]
	olderSeq := strings.TrimLeft(strings.TrimSuffix(filepath.Base(older), ".snap"), "0")
	good, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	otherFiles, _ := filepath.Glob(filepath.Join(r.cfg.SnapshotDir, fmt.Sprintf("Other-%d", other), "*.snap"))
	if len(otherFiles) == 0 {
		t.Fatal("no snapshot of Other")
	}
	foreign, err := os.ReadFile(otherFiles[len(otherFiles)-1])
	if err != nil {
		t.Fatal(err)
	}
	resum := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)))
		return b
	}
	full := r.fullReplay("Snap")
	want, _ := full.v.Table("Snap")
	wrongEpoch := filepath.Join(t.TempDir(), "x.snap")
	if err := projections.ForgeSnapshot(newest, wrongEpoch, "Snap", epoch+1000, 0); err != nil {
		t.Fatal(err)
	}
	forgedEpoch, _ := os.ReadFile(wrongEpoch)
	beyond := filepath.Join(t.TempDir(), "y.snap")
	if err := projections.ForgeSnapshot(newest, beyond, "Snap", epoch, 10_000); err != nil {
		t.Fatal(err)
	}
	forgedBeyond, _ := os.ReadFile(beyond)
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 1
	newer := append([]byte(nil), good...)
	newer[8] = projections.ShardSnapshotFormat + 1

	for _, c := range []struct {
		name   string
		data   []byte
		why    string
		keepOK bool // the older file stays: the views load it
	}{
		{"flipped byte", flipped, "checksum mismatch", true},
		{"truncated", good[:len(good)-100], "checksum mismatch", false},
		{"truncated header", good[:20], "header", true},
		{"another table", foreign, `another table: "Other"`, true},
		{"another epoch", forgedEpoch, "another incarnation", false},
		{"newer format", resum(newer), "newer snapshot format", true},
		{"beyond the journal", forgedBeyond, "beyond the journal's last record 230", true},
		{"temporary", nil, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(newest)
			tmp := filepath.Join(dir, "."+filepath.Base(newest)+".123.tmp")
			if c.data == nil {
				os.WriteFile(tmp, good[:len(good)/2], 0o644)
			} else if err := os.WriteFile(newest, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			if !c.keepOK {
				os.Rename(older, older+".away")
				defer os.Rename(older+".away", older)
			}
			log := &logSink{}
			cfg := r.cfg // reads the files, writes none
			cfg.SnapshotEvery, cfg.NoSnapshotOnStop = 1<<30, true
			run := r.startViews(cfg, log)
			defer run.stop()
			if c.data != nil && len(log.find("snapshot ignored", "file="+newest, c.why)) != 1 {
				t.Fatalf("no line says the file %s is ignored (%s):\n%s", newest, c.why, log)
			}
			loaded := log.find("snapshot loaded", "table=Snap ")
			switch {
			case c.keepOK && (len(loaded) != 1 || !strings.Contains(loaded[0], "seq="+olderSeq+" ")):
				t.Fatalf("the older snapshot at %s was not loaded:\n%s", olderSeq, log)
			case !c.keepOK && len(loaded) != 0:
				t.Fatalf("a snapshot was loaded:\n%s", log)
			}
			if _, err := os.Stat(tmp); err == nil {
				t.Fatal("a temporary file survived the start")
			}
			got, _ := run.v.Table("Snap")
			sameView(t, c.name, got.Snapshot(), want.Snapshot())
		})
	}
}

// TestSnapshotDroppedTable: the snapshots of a table dropped while no view
// ran are removed at the next start, a table created again under its name
// never loads them (even copied into its own directory), and a table
// dropped while the views run loses its snapshots at once.
func TestSnapshotDroppedTable(t *testing.T) {
	r := newRig(t)
	r.cfg = snapConfig(t)
	old := r.create("Snap")
	newHistory(r, "Snap", old, 3).write(80)
	r.startViews(r.cfg, nil).stop()
	oldDir := filepath.Join(r.cfg.SnapshotDir, fmt.Sprintf("Snap-%d", old))
	oldFiles, _ := filepath.Glob(filepath.Join(oldDir, "*.snap"))
	if len(oldFiles) == 0 {
		t.Fatal("no snapshot written")
	}
	dropped := r.drop("Snap")
	epoch, err := r.j.AppendCatalog(r.ctx, &engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: "Snap", Time: 3, Shards: rigShards}, dropped)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.j.EnsureTableStream(r.ctx, "Snap", epoch); err != nil {
		t.Fatal(err)
	}
	r.catalog["Snap"] = epoch
	newHistory(r, "Snap", epoch, 4).write(10)
	newDir := filepath.Join(r.cfg.SnapshotDir, fmt.Sprintf("Snap-%d", epoch))
	data, _ := os.ReadFile(oldFiles[len(oldFiles)-1])
	os.MkdirAll(newDir, 0o755)
	copied := filepath.Join(newDir, fmt.Sprintf("%020d.snap", 5))
	os.WriteFile(copied, data, 0o644)

	log := &logSink{}
	run := r.startViews(r.cfg, log)
	if _, err := os.Stat(oldDir); !os.IsNotExist(err) {
		t.Fatalf("the dropped incarnation's snapshots are still there: %v", err)
	}
	if len(log.find("snapshot ignored", "file="+copied, "another incarnation")) != 1 || len(log.find("snapshot loaded")) != 0 {
		t.Fatalf("the old incarnation's snapshot was not refused:\n%s", log)
	}
	tb, _ := run.v.Table("Snap")
	full := r.fullReplay("Snap")
	want, _ := full.v.Table("Snap")
	sameView(t, "new incarnation", tb.Snapshot(), want.Snapshot())
	if tb.Snapshot().Seq != 10 {
		t.Fatalf("the new incarnation is at %d, want 10", tb.Snapshot().Seq)
	}

	// Dropped while the views run: its directory goes with its stream.
	run.stop()
	run = r.startViews(r.cfg, nil)
	if _, err := os.Stat(newDir); err != nil {
		t.Fatal(err)
	}
	seq := r.drop("Snap")
	if err := run.v.WaitCatalog(r.ctx, seq); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(newDir); os.IsNotExist(err) {
			break
		}
		select {
		case <-r.ctx.Done():
			t.Fatal("the dropped table's snapshots were not removed")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestSnapshotPurgedJournal: records removed from a table's journal while
// no view ran (a purge, or one message deleted) fault the table at the
// start as a full replay does, although a snapshot covers the records
// removed: the view must not hide history the journal lost.
func TestSnapshotPurgedJournal(t *testing.T) {
	r := newRig(t)
	r.cfg = snapConfig(t)
	purged, deleted := r.create("Purged"), r.create("Deleted")
	newHistory(r, "Purged", purged, 5).write(40)
	newHistory(r, "Deleted", deleted, 6).write(40)
	r.startViews(r.cfg, nil).stop() // snapshots at 40
	if err := r.stream("Purged", purged).Purge(r.ctx, jetstream.WithPurgeKeep(5)); err != nil {
		t.Fatal(err)
	}
	if err := r.stream("Deleted", deleted).DeleteMsg(r.ctx, 20); err != nil {
		t.Fatal(err)
	}
	log := &logSink{}
	run := r.startViews(r.cfg, log)
	for _, name := range []string{"Purged", "Deleted"} {
		tb, _ := run.v.Table(name)
		if tb.Fault() == nil {
			t.Fatalf("%s: not faulted:\n%s", name, log)
		}
		if len(log.find("snapshots not used", "table="+name)) != 1 || len(log.find("snapshot loaded", "table="+name)) != 0 {
			t.Fatalf("%s: a snapshot was used:\n%s", name, log)
		}
	}
}
