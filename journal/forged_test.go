package journal_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/journal/jstest"
)

// TestForgedRecords: records published on the journal's subjects by
// something other than Cairn are reported with their sequence, never
// applied as if they were good. A table reader stops at a record whose
// partition key is not its subject's; the catalog watcher hands junk and a
// record on another name's subject to its caller and goes on.
func TestForgedRecords(t *testing.T) {
	_, nc := jstest.Server(t)
	j, err := journal.New(nc, journal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound on a broken test
	t.Cleanup(cancel)
	if err := j.Init(ctx); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	raw := func(subj string, data []byte) {
		t.Helper()
		if _, err := js.Publish(ctx, subj, data); err != nil {
			t.Fatal(err)
		}
	}

	// A good record of partition "a", encoded, published on partition "b".
	if err := j.EnsureTableStream(ctx, "Emp", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, "Emp", 1, 0, put("a", "r", 1), 0); err != nil {
		t.Fatal(err)
	}
	data, err := journal.EncodeRecord(put("a", "s", 2))
	if err != nil {
		t.Fatal(err)
	}
	raw(j.PartitionSubject("Emp", 1, 0, "b"), data)
	var applied []uint64
	err = j.Consume(ctx, "Emp", 1, 0, 1, func(seq uint64, rec *engine.Record, pending uint64) error {
		applied = append(applied, seq)
		return nil
	})
	var ce *journal.CorruptError
	if !errors.As(err, &ce) || ce.Seq != 2 || !errors.Is(err, journal.ErrCorrupt) || len(applied) != 1 {
		t.Fatalf("Consume applied %v and returned %v; want record 1, then a CorruptError at 2", applied, err)
	}

	// A table with shards: a good record on its partition's subject in
	// another shard, or without the shard's token, is refused as well.
	const shards = 8
	if err := j.EnsureTableStream(ctx, "Sh", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, "Sh", 1, shards, put("a", "r", 1), 0); err != nil {
		t.Fatal(err)
	}
	other := "b"
	for engine.Shard(other, shards) == engine.Shard("a", shards) {
		other += "b"
	}
	wrongShard := strings.Replace(j.PartitionSubject("Sh", 1, shards, "a"),
		fmt.Sprintf(".s%d.", engine.Shard("a", shards)), fmt.Sprintf(".s%d.", engine.Shard(other, shards)), 1)
	for i, subj := range []string{wrongShard, j.PartitionSubject("Sh", 1, 0, "a")} {
		raw(subj, data)
		applied = nil
		// From the start, then from the record just published.
		from := []uint64{1, 3}[i]
		err = j.Consume(ctx, "Sh", 1, shards, from, func(seq uint64, rec *engine.Record, pending uint64) error {
			applied = append(applied, seq)
			return nil
		})
		if want := uint64(i + 2); !errors.As(err, &ce) || ce.Seq != want || len(applied) != 1-i {
			t.Fatalf("%s: Consume applied %v and returned %v; want a CorruptError at %d", subj, applied, err, want)
		}
	}
	// Read by a layout it is not: the first record is refused.
	if _, err := j.Read(ctx, "Sh", 1, 0, journal.ReadRange{From: 1, Max: 10}); !errors.As(err, &ce) || ce.Seq != 1 {
		t.Fatalf("a table with shards read as one without: %v", err)
	}

	// The catalog: a 1-byte record, a good record on another name's
	// subject, then a good one.
	raw("cairn.catalog.x", []byte("1"))
	cdata, err := journal.EncodeCatalogRecord(&engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: "Other", Time: 1})
	if err != nil {
		t.Fatal(err)
	}
	raw("cairn.catalog.emp", cdata)
	// The forged record moved the name's subject: a create must expect
	// its sequence (the views remember it from the CorruptError).
	if _, err := j.AppendCatalog(ctx, &engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: "Emp", Time: 1}, 0); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("create expecting an untouched subject: %v", err)
	}
	if _, err := j.AppendCatalog(ctx, &engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: "Good", Time: 1}, 0); err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	var bad []uint64
	var good []string
	err = j.WatchCatalog(cctx, 1, func(seq uint64, rec *engine.CatalogRecord, pending uint64, e error) error {
		if e != nil {
			if !errors.As(e, &ce) || ce.Seq != seq || rec != nil || j.CatalogSubjectName(ce.Subject) != []string{"x", "emp"}[len(bad)] {
				t.Errorf("record %d: bad %v, rec %v", seq, e, rec)
			}
			bad = append(bad, seq)
		} else {
			good = append(good, rec.Name)
		}
		if pending == 0 {
			stop()
		}
		return nil
	})
	if err != nil || len(bad) != 2 || bad[0] != 1 || bad[1] != 2 || len(good) != 1 || good[0] != "Good" {
		t.Fatalf("WatchCatalog: bad %v, good %v, err %v", bad, good, err)
	}
}
