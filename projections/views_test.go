package projections_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/journal/jstest"
	"github.com/cairn-dev/cairn/projections"
)

// rig is a journal on an embedded server with helpers that write to it the
// way the committer does.
type rig struct {
	t   testing.TB
	nc  *nats.Conn
	j   *journal.Journal
	ctx context.Context

	catalog map[string]uint64  // the catalog sequence of each name's last record
	cfg     projections.Config // of the views start runs
}

func newRig(t testing.TB) *rig {
	t.Helper()
	_, nc := jstest.Server(t)
	j, err := journal.New(nc, journal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// A bound on a broken test, not a timed assertion.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	if err := j.Init(ctx); err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, nc: nc, j: j, ctx: ctx, catalog: map[string]uint64{}}
}

// rigShards is the shard count of every table the rig creates.
const rigShards = 8

// create creates a table with its stream and returns its epoch.
func (r *rig) create(name string) uint64 {
	r.t.Helper()
	epoch, err := r.j.AppendCatalog(r.ctx, &engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: name, Time: 1, Shards: rigShards}, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.j.EnsureTableStream(r.ctx, name, epoch); err != nil {
		r.t.Fatal(err)
	}
	r.catalog[name] = epoch
	return epoch
}

// stream returns the JetStream stream of a table incarnation, for tests
// that remove history behind Cairn's back.
func (r *rig) stream(name string, epoch uint64) jetstream.Stream {
	r.t.Helper()
	js, err := jetstream.New(r.nc)
	if err != nil {
		r.t.Fatal(err)
	}
	s, err := js.Stream(r.ctx, journal.StreamName("cairn", name, epoch))
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

// drop deletes a table from the catalog and returns the catalog sequence.
func (r *rig) drop(name string) uint64 {
	r.t.Helper()
	seq, err := r.j.AppendCatalog(r.ctx, &engine.CatalogRecord{Kind: engine.CatalogTableDeleted, Name: name, Time: 2}, r.catalog[name])
	if err != nil {
		r.t.Fatal(err)
	}
	r.catalog[name] = seq
	return seq
}

// record is the i-th record of a table: one entity in a partition of its
// own, so that a view at sequence n holds exactly n entities.
func record(i int) *engine.Record {
	return &engine.Record{Time: int64(i), PartitionKey: fmt.Sprint(i), Nonce: fmt.Sprint("n", i),
		Events: []engine.Event{{Kind: engine.EventPut, RowKey: "r"}}}
}

func (r *rig) append(ctx context.Context, table string, epoch uint64, i int) error {
	_, err := r.j.Append(ctx, table, epoch, rigShards, record(i), 0)
	return err
}

// start runs views on the rig's journal; the returned channel yields Run's
// result.
func (r *rig) start(ctx context.Context) (*projections.Views, <-chan error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := r.cfg
	cfg.PublishEvery = 7
	v := projections.NewViews(r.j, log, cfg)
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	return v, done
}

// takeOver checks, after Run returned, that the caller now owns tb's
// writer side: under -race, an applier still running (or not yet seen to
// have stopped) would race with these writes. It also checks that the
// view holds exactly the records up to its position.
func takeOver(t *testing.T, tb *projections.Table) {
	t.Helper()
	next := tb.Seq() + 1
	tb.Apply(next, record(int(next)))
	tb.Publish()
	if s := tb.Snapshot(); s.Seq != next || s.Len() != int(next) {
		t.Fatalf("%s: snapshot at %d holds %d entities, want %d", tb.Name(), s.Seq, s.Len(), next)
	}
}

// TestViewsRunAndStop replays tables written before the start, follows
// one that is being written while Run is stopped, and checks that Run
// returns nil only once no applier touches a view any more.
func TestViewsRunAndStop(t *testing.T) {
	r := newRig(t)
	busy, quiet, gone := r.create("Busy"), r.create("Quiet"), r.create("Gone")
	for i := 1; i <= 20; i++ {
		for _, tb := range []struct {
			name  string
			epoch uint64
		}{{"Busy", busy}, {"Quiet", quiet}, {"Gone", gone}} {
			if err := r.append(r.ctx, tb.name, tb.epoch, i); err != nil {
				t.Fatal(err)
			}
		}
	}
	r.drop("Gone")

	vctx, stop := context.WithCancel(r.ctx)
	defer stop()
	v, done := r.start(vctx)
	if err := v.WaitReady(r.ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-v.Ready():
	default:
		t.Fatal("WaitReady returned before Ready was closed")
	}
	var names []string
	for _, ti := range v.Tables() {
		names = append(names, ti.Name)
	}
	if fmt.Sprint(names) != "[Busy Quiet]" {
		t.Fatalf("tables %v, want [Busy Quiet]", names)
	}
	tBusy, _ := v.Table("busy")
	tQuiet, _ := v.Table("QUIET")
	for _, tb := range []*projections.Table{tBusy, tQuiet} {
		if s := tb.Snapshot(); s.Seq != 20 || s.Len() != 20 {
			t.Fatalf("%s ready at %d with %d entities, want 20", tb.Name(), s.Seq, s.Len())
		}
	}

	// A table dropped while Run runs: its applier stops and every host
	// deletes its stream in a goroutine of Run's.
	seq := r.drop("Quiet")
	if err := v.WaitCatalog(r.ctx, seq); err != nil {
		t.Fatal(err)
	}
	if _, ok := v.Table("Quiet"); ok {
		t.Fatal("a dropped table is still found")
	}

	// Keep writing to Busy while Run is stopped.
	wctx, stopWriter := context.WithCancel(r.ctx)
	var writer sync.WaitGroup
	writer.Add(1)
	go func() {
		defer writer.Done()
		for i := 21; i <= 5000 && wctx.Err() == nil; i++ {
			if err := r.append(wctx, "Busy", busy, i); err != nil && wctx.Err() == nil {
				t.Error(err)
				return
			}
		}
	}()
	if _, err := tBusy.WaitSeq(r.ctx, 60); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run after its context ended: %v", err)
	}
	stopWriter()
	writer.Wait()
	takeOver(t, tBusy)
	takeOver(t, tQuiet)

	if err := v.Run(r.ctx); err == nil {
		t.Fatal("a second Run was accepted")
	}
}

// TestViewsSkipCorruptCatalog: catalog records that cannot be used —
// undecodable (one byte, a format version no Cairn knows), on another
// name's subject, with a bad table name, creating a live table — are
// skipped and counted; Run keeps running, the tables keep their views, the
// catalog's later records still apply, and views started afresh on the same
// catalog become ready. (Run used to stop at such a record, and with it the
// node, on every restart.)
func TestViewsSkipCorruptCatalog(t *testing.T) {
	r := newRig(t)
	epoch := r.create("Tab")
	if err := r.append(r.ctx, "Tab", epoch, 1); err != nil {
		t.Fatal(err)
	}
	vctx, stop := context.WithCancel(r.ctx)
	defer stop()
	v, done := r.start(vctx)
	if err := v.WaitReady(r.ctx); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(r.nc)
	if err != nil {
		t.Fatal(err)
	}
	encode := func(rec *engine.CatalogRecord) []byte {
		b, err := journal.EncodeCatalogRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, m := range []struct {
		subj string
		data []byte
	}{
		{"cairn.catalog.x", []byte("1")},
		{"cairn.catalog.bad", []byte{0x81, 0xa1, 'v', 0x09}}, // {v: 9}
		{"cairn.catalog.other", encode(&engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: "Elsewhere"})},
		{"cairn.catalog.a-b", encode(&engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: "a-b"})},
		{"cairn.catalog.tab", encode(&engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: "Tab"})},
	} {
		if _, err := js.Publish(r.ctx, m.subj, m.data); err != nil {
			t.Fatal(err)
		}
	}
	r.create("Use")
	if err := v.WaitCatalog(r.ctx, r.catalog["Use"]); err != nil {
		t.Fatal(err)
	}
	if n := v.CatalogSkipped(); n != 5 {
		t.Errorf("%d catalog records skipped, want 5", n)
	}
	var names []string
	for _, ti := range v.Tables() {
		names = append(names, ti.Name)
	}
	if fmt.Sprint(names) != "[Tab Use]" {
		t.Fatalf("tables %v, want [Tab Use]", names)
	}
	if tb, _ := v.Table("Tab"); tb.Epoch() != epoch || tb.Snapshot().Len() != 1 {
		t.Fatalf("Tab is epoch %d with %d entities, want %d with 1", tb.Epoch(), tb.Snapshot().Len(), epoch)
	}
	// The name's subject moved: what the views tell a creator to expect
	// is the skipped record's sequence, so a create is not refused forever.
	if seq, _, live := v.CatalogEntry("x"); seq != epoch+1 || live {
		t.Errorf("catalog entry of x: seq %d live %v, want %d, not live", seq, live, epoch+1)
	}
	select {
	case err := <-done:
		t.Fatalf("Run stopped: %v", err)
	default:
	}

	// A restart reads the same catalog and becomes ready.
	v2, done2 := r.start(vctx)
	if err := v2.WaitReady(r.ctx); err != nil {
		t.Fatal(err)
	}
	if len(v2.Tables()) != 2 || v2.CatalogSkipped() != 5 {
		t.Fatalf("after a restart: tables %v, %d skipped", v2.Tables(), v2.CatalogSkipped())
	}
	stop()
	for _, d := range []<-chan error{done, done2} {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
}

// TestViewsReadyOnEmptyCatalog: with no table at all, the views are ready
// as soon as the (empty) catalog is read.
func TestViewsReadyOnEmptyCatalog(t *testing.T) {
	r := newRig(t)
	vctx, stop := context.WithCancel(r.ctx)
	v, done := r.start(vctx)
	select {
	case <-v.Ready():
	case err := <-done:
		t.Fatalf("Run returned before the views were ready: %v", err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
