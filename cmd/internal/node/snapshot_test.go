package node_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/projections"
)

// lineLog keeps the messages and attributes of a node's log lines.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *lineLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *lineLog) WithGroup(string) slog.Handler            { return l }

func (l *lineLog) Handle(_ context.Context, r slog.Record) error {
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

func (l *lineLog) has(parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for _, line := range l.lines {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		return true
	}
	return false
}

// TestSnapshotRestartNode: a node restarted on its data directory after
// random inserts, merges, replacements and deletes with command ids loads
// its newest snapshot (-snapshots is on by default) and replays the rest;
// a command retried with its id from before the restart is answered as a
// duplicate, not applied again; and the view equals the one a node with
// snapshots off rebuilds from the whole journal: every entity, partition
// and remembered command id.
func TestSnapshotRestartNode(t *testing.T) {
	r := seededRand(t, 3)
	dir := t.TempDir()
	views := projections.Config{SnapshotEvery: 20, SnapshotInterval: -1, NoSnapshotOnStop: true}
	h1 := startNode(t, node.Config{DataDir: dir, Views: views})
	ctx := ctxT(t)
	if _, err := h1.c.CreateTable(ctx, "Snap"); err != nil {
		t.Fatal(err)
	}
	type sent struct{ pk, id string }
	var ids []sent
	for k := 0; k < 150; k++ {
		pk, rk, id := fmt.Sprintf("p%d", r.IntN(3)), fmt.Sprintf("r%02d", r.IntN(15)), fmt.Sprintf("op-%d", k)
		e := engine.NewEntity(pk, rk, engine.Property{Name: fmt.Sprintf("P%d", r.IntN(4)), Value: engine.Int64(int64(k))})
		var err error
		switch r.IntN(4) {
		case 0:
			_, err = h1.c.InsertOrMerge(ctx, "Snap", e, client.WithID(id))
		case 1:
			_, err = h1.c.InsertOrReplace(ctx, "Snap", e, client.WithID(id))
		case 2:
			_, err = h1.c.Merge(ctx, "Snap", e, "*", client.WithID(id))
		case 3:
			_, err = h1.c.Delete(ctx, "Snap", pk, rk, "*", client.WithID(id))
		}
		if engine.ErrorCode(err) == engine.CodeResourceNotFound {
			continue // a merge or delete of a row not there
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sent{pk, id})
	}
	first, err := h1.c.Insert(ctx, "Snap", engine.NewEntity("p0", "once"), client.WithID("insert-once"))
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, sent{"p0", "insert-once"})
	h1.stop(t)

	log := &lineLog{}
	h2 := startNode(t, node.Config{DataDir: dir, Views: views, Log: slog.New(log)})
	if !log.has("snapshot loaded", "table=Snap") || !log.has("view replayed", "table=Snap", "from_snapshot=") {
		t.Fatal("the restarted node did not load a snapshot")
	}
	again, err := h2.c.Insert(ctx, "Snap", engine.NewEntity("p0", "once"), client.WithID("insert-once"))
	if err != nil {
		t.Fatalf("the insert retried with its id after the restart: %v", err)
	}
	if !again.Duplicate || again.ETag != first.ETag {
		t.Fatalf("the retried insert: duplicate %v, ETag %s; want a duplicate with ETag %s", again.Duplicate, again.ETag, first.ETag)
	}
	tb, _ := h2.h.Views().Table("Snap")
	loaded := tb.Snapshot()
	h2.stop(t)
	if files, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "*.snap")); len(files) == 0 || len(files) > 2 {
		t.Fatalf("snapshot files %v, want one or two", files)
	}

	h3 := startNode(t, node.Config{DataDir: dir, NoSnapshots: true})
	tb, _ = h3.h.Views().Table("Snap")
	full := tb.Snapshot()
	if loaded.Seq != full.Seq || loaded.Len() != full.Len() {
		t.Fatalf("view from the snapshot at %d with %d entities, full replay at %d with %d", loaded.Seq, loaded.Len(), full.Seq, full.Len())
	}
	var a, b []engine.Entity
	loaded.Scan(func(e *engine.Entity) bool { a = append(a, *e); return true })
	full.Scan(func(e *engine.Entity) bool { b = append(b, *e); return true })
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("entities differ:\n%+v\n%+v", a, b)
	}
	var pa, pb []projections.Partition
	loaded.Partitions(func(p projections.Partition) bool { pa = append(pa, p); return true })
	full.Partitions(func(p projections.Partition) bool { pb = append(pb, p); return true })
	if !reflect.DeepEqual(pa, pb) {
		t.Fatalf("partitions differ:\n%+v\n%+v", pa, pb)
	}
	for _, s := range ids {
		ca, oka := loaded.Command(s.pk, s.id)
		cb, okb := full.Command(s.pk, s.id)
		if oka != okb || ca != cb {
			t.Fatalf("command %s/%s: %+v %v from the snapshot, %+v %v from the full replay", s.pk, s.id, ca, oka, cb, okb)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "snapshots")); err != nil {
		t.Fatal(err)
	}
}

// TestSharedSnapshotNewNode: a second node with an empty data directory,
// on the first node's server, starts its view from the snapshot the first
// node shared in the object store (-snapshots-shared is on by default)
// and replays only the records after it; its view equals the first
// node's. A new node with -snapshots-shared=false replays the whole
// journal. Dropping the table removes its shared snapshots.
func TestSharedSnapshotNewNode(t *testing.T) {
	views := projections.Config{SnapshotEvery: 50, SnapshotInterval: -1}
	h1 := startNode(t, node.Config{Views: views})
	ctx := ctxT(t)
	info, err := h1.c.CreateTable(ctx, "Shared")
	if err != nil {
		t.Fatal(err)
	}
	insert := func(from, to int) {
		for k := from; k < to; k++ {
			e := engine.NewEntity(fmt.Sprintf("p%d", k%4), fmt.Sprintf("r%03d", k), engine.Property{Name: "N", Value: engine.Int64(int64(k))})
			if _, err := h1.c.Insert(ctx, "Shared", e, client.WithID(fmt.Sprintf("op-%d", k))); err != nil {
				t.Fatal(err)
			}
		}
	}
	insert(0, 50) // one snapshot, at 50
	js, err := jetstream.New(h1.nc)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := js.ObjectStore(ctx, projections.SnapshotBucket("cairn"))
	if err != nil {
		t.Fatal(err)
	}
	// The first snapshot is a base, an object of its own.
	name := fmt.Sprintf("%s.%020d.base", projections.SharedSnapshotName("Shared", info.Epoch), 50)
	for {
		oi, err := obj.GetInfo(ctx, name)
		if err == nil && oi.Metadata["cairn-seq"] == "50" {
			break
		}
		if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the snapshot at 50 was not shared: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	insert(50, 57) // the tail

	log := &lineLog{}
	h2, _ := nodetest.Start(t, node.Config{NATSURL: h1.h.ClientURL(), NATSCreds: h1.h.NATSCredsFile(), Views: views, Log: slog.New(log)})
	if !log.has("shared snapshot loaded", "table=Shared", "object="+name, "seq=50") ||
		!log.has("view replayed", "table=Shared", "records=7 ", "from_snapshot=50") {
		t.Fatal("the new node did not start from the shared snapshot at 50 and replay 7 records")
	}
	tb1, _ := h1.h.Views().Table("Shared")
	tb2, _ := h2.Views().Table("Shared")
	a, b := tb1.Snapshot(), tb2.Snapshot()
	if a.Seq != 57 || b.Seq != 57 || a.Len() != b.Len() {
		t.Fatalf("views at %d (%d entities) and %d (%d), want both at 57", a.Seq, a.Len(), b.Seq, b.Len())
	}
	var ea, eb []engine.Entity
	a.Scan(func(e *engine.Entity) bool { ea = append(ea, *e); return true })
	b.Scan(func(e *engine.Entity) bool { eb = append(eb, *e); return true })
	if !reflect.DeepEqual(ea, eb) {
		t.Fatalf("entities differ:\n%+v\n%+v", ea, eb)
	}
	var pa, pb []projections.Partition
	a.Partitions(func(p projections.Partition) bool { pa = append(pa, p); return true })
	b.Partitions(func(p projections.Partition) bool { pb = append(pb, p); return true })
	if !reflect.DeepEqual(pa, pb) {
		t.Fatalf("partitions differ:\n%+v\n%+v", pa, pb)
	}
	for k := 0; k < 57; k++ {
		ca, oka := a.Command(fmt.Sprintf("p%d", k%4), fmt.Sprintf("op-%d", k))
		cb, okb := b.Command(fmt.Sprintf("p%d", k%4), fmt.Sprintf("op-%d", k))
		if !oka || oka != okb || ca != cb {
			t.Fatalf("command op-%d: %+v %v on the first node, %+v %v on the second", k, ca, oka, cb, okb)
		}
	}

	// With -snapshots-shared=false a new node keeps to its own files: it
	// replays the whole journal.
	log3 := &lineLog{}
	nodetest.Start(t, node.Config{NATSURL: h1.h.ClientURL(), NATSCreds: h1.h.NATSCredsFile(), Views: views, NoSharedSnapshots: true, Log: slog.New(log3)})
	if log3.has("shared snapshot") || !log3.has("view replayed", "table=Shared", "records=57 ", "from_snapshot=0") {
		t.Fatal("the node with -snapshots-shared=false did not replay the whole journal")
	}

	if err := h1.c.DeleteTable(ctx, "Shared"); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := obj.GetInfo(ctx, name)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the dropped table's shared snapshot is still there: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
