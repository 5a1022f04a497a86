package journal_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/journal/jstest"
)

func newJournal(t testing.TB) (*journal.Journal, context.Context) {
	t.Helper()
	_, nc := jstest.Server(t)
	j, err := journal.New(nc, journal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	if err := j.Init(ctx); err != nil {
		t.Fatal(err)
	}
	return j, ctx
}

func put(pk, rk string, n int32) *engine.Record {
	return &engine.Record{Time: 1, PartitionKey: pk, Nonce: pk + rk,
		Commands: []engine.CommandRef{{ID: rk, Count: 1}},
		Events:   []engine.Event{{Kind: engine.EventPut, RowKey: rk, Properties: []engine.Property{{Name: "N", Value: engine.Int32(n)}}}}}
}

// TestAppendConcurrencyCheck, for a table of each journal layout: without
// shards (tables created before them) and with.
func TestAppendConcurrencyCheck(t *testing.T) {
	for _, shards := range []uint32{0, 8} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) { testAppendConcurrencyCheck(t, shards) })
	}
}

func testAppendConcurrencyCheck(t *testing.T, shards uint32) {
	j, ctx := newJournal(t)
	if err := j.EnsureTableStream(ctx, "Emp", 7); err != nil {
		t.Fatal(err)
	}
	if err := j.EnsureTableStream(ctx, "Emp", 7); err != nil {
		t.Fatalf("EnsureTableStream is not idempotent: %v", err)
	}
	s1, err := j.Append(ctx, "Emp", 7, shards, put("Sales", "1", 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	// Another partition is independent of the first.
	s2, err := j.Append(ctx, "Emp", 7, shards, put("HR", "1", 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	// A stale expectation fails and stores nothing.
	if _, err := j.Append(ctx, "Emp", 7, shards, put("Sales", "2", 2), 0); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("stale append: %v", err)
	}
	s3, err := j.Append(ctx, "Emp", 7, shards, put("Sales", "2", 2), s1)
	if err != nil {
		t.Fatal(err)
	}
	if last, err := j.LastSeq(ctx, "Emp", 7, shards, "Sales"); err != nil || last != s3 {
		t.Fatalf("LastSeq = %d, %v; want %d", last, err, s3)
	}
	if last, err := j.LastSeq(ctx, "Emp", 7, shards, "nobody"); err != nil || last != 0 {
		t.Fatalf("LastSeq of an empty partition = %d, %v", last, err)
	}
	if last, err := j.LastStreamSeq(ctx, "Emp", 7); err != nil || last != 3 {
		t.Fatalf("LastStreamSeq = %d, %v; want 3 (the rejected append stored nothing)", last, err)
	}
	// The first record of the partition after a sequence, skipping other
	// partitions' records (s2).
	for _, c := range []struct {
		after, seq uint64
		nonce      string
	}{{0, s1, "Sales1"}, {s1, s3, "Sales2"}, {s2, s3, "Sales2"}, {s3, 0, ""}} {
		if seq, nonce, err := j.NextRecord(ctx, "Emp", 7, shards, "Sales", c.after); err != nil || seq != c.seq || nonce != c.nonce {
			t.Fatalf("NextRecord after %d = %d %q %v; want %d %q", c.after, seq, nonce, err, c.seq, c.nonce)
		}
	}
	// Consume from the start and from the middle.
	for _, from := range []uint64{1, 2} {
		cctx, cancel := context.WithCancel(ctx)
		var seqs []uint64
		var lastPending uint64 = 99
		err := j.Consume(cctx, "Emp", 7, shards, from, func(seq uint64, rec *engine.Record, pending uint64) error {
			seqs = append(seqs, seq)
			lastPending = pending
			if seq == 3 {
				if rec.PartitionKey != "Sales" || rec.Events[0].RowKey != "2" || rec.Events[0].Properties[0].Value.Int() != 2 {
					t.Errorf("record 3 decoded as %+v", rec)
				}
				cancel()
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if int(from) != int(seqs[0]) || seqs[len(seqs)-1] != 3 || lastPending != 0 {
			t.Fatalf("from %d: consumed %v, last pending %d", from, seqs, lastPending)
		}
	}
	// A deleted table's journal refuses appends.
	if err := j.DeleteTableStream(ctx, "Emp", 7); err != nil {
		t.Fatal(err)
	}
	if err := j.DeleteTableStream(ctx, "Emp", 7); err != nil {
		t.Fatalf("DeleteTableStream is not idempotent: %v", err)
	}
	if _, err := j.Append(ctx, "Emp", 7, shards, put("Sales", "3", 3), s3); !errors.Is(err, engine.ErrTableGone) {
		t.Fatalf("append to a deleted table: %v", err)
	}
}

// TestPartitionKeysAsSubjects, in both layouts: without shards and with.
func TestPartitionKeysAsSubjects(t *testing.T) {
	for _, shards := range []uint32{0, 16} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) { testPartitionKeysAsSubjects(t, shards) })
	}
}

func testPartitionKeysAsSubjects(t *testing.T, shards uint32) {
	j, ctx := newJournal(t)
	if err := j.EnsureTableStream(ctx, "Keys", 1); err != nil {
		t.Fatal(err)
	}
	keys := []string{"", ".", "*", ">", "a b", "a.b.c", "ü/日本", "\U0001F600", strings.Repeat("x", 512), strings.Repeat("日", 512)}
	for _, k := range keys {
		tok := journal.EncodePartition(k)
		if back, err := journal.DecodePartition(tok); err != nil || back != k {
			t.Fatalf("%q: token %q decodes to %q, %v", k, tok, back, err)
		}
		if strings.ContainsAny(tok, ". *>\t") || tok == "" {
			t.Fatalf("%q: token %q is not a single subject token", k, tok)
		}
		if _, err := j.Append(ctx, "Keys", 1, shards, put(k, "r", 1), 0); err != nil {
			t.Fatalf("append %q: %v", k, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	i := 0
	err := j.Consume(cctx, "Keys", 1, shards, 1, func(seq uint64, rec *engine.Record, pending uint64) error {
		if rec.PartitionKey != keys[i] {
			t.Errorf("record %d: partition %q, want %q", seq, rec.PartitionKey, keys[i])
		}
		if last, err := j.LastSeq(ctx, "Keys", 1, shards, keys[i]); err != nil || last != seq {
			t.Errorf("%q: LastSeq %d, %v; want %d (a key leaking into another's subject?)", keys[i], last, err, seq)
		}
		i++
		if pending == 0 {
			cancel()
		}
		return nil
	})
	if err != nil || i != len(keys) {
		t.Fatalf("consumed %d of %d: %v", i, len(keys), err)
	}
}

func TestLargeRecord(t *testing.T) {
	j, ctx := newJournal(t)
	if err := j.EnsureTableStream(ctx, "Big", 1); err != nil {
		t.Fatal(err)
	}
	rec := &engine.Record{Time: 1, PartitionKey: "p"}
	for i := 0; i < 100; i++ {
		rec.Events = append(rec.Events, engine.Event{Kind: engine.EventPut, RowKey: string(rune('a' + i%26)),
			Properties: []engine.Property{{Name: "B", Value: engine.Binary(make([]byte, 45_000))}}})
	}
	if _, err := j.Append(ctx, "Big", 1, 0, rec, 0); err != nil {
		t.Fatalf("append of a 4.5 MB record: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := j.Consume(cctx, "Big", 1, 0, 1, func(seq uint64, got *engine.Record, pending uint64) error {
		if len(got.Events) != 100 || len(got.Events[99].Properties[0].Value.Bytes()) != 45_000 {
			t.Errorf("the large record came back with %d events", len(got.Events))
		}
		cancel()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Beyond the server's maximum payload the append fails at once.
	huge := &engine.Record{Time: 1, PartitionKey: "p", Events: []engine.Event{{Kind: engine.EventPut, RowKey: "r",
		Properties: []engine.Property{{Name: "B", Value: engine.Binary(make([]byte, 9<<20))}}}}}
	if _, err := j.Append(ctx, "Big", 1, 0, huge, 1); !errors.Is(err, engine.ErrNotSent) {
		t.Fatalf("append of a 9 MiB record: %v", err)
	} else {
		t.Logf("9 MiB record: %v", err)
	}
}

// TestCatalogAckLost settles catalog appends whose answer went unheard:
// one stored by its first try is acknowledged with its own sequence, not
// refused as a conflict by its retry; one beaten by another host's record
// while its answer was lost is a conflict.
func TestCatalogAckLost(t *testing.T) {
	j, ctx := newJournal(t)
	var (
		mu    sync.Mutex
		lose  = 1
		sent  int
		rival func(subj string)
	)
	j.LoseAck(func(subj string) bool {
		mu.Lock()
		defer mu.Unlock()
		if rival != nil {
			rival(subj)
			rival = nil
		}
		sent++
		lose--
		return lose >= 0
	})
	seq, err := j.AppendCatalog(ctx, &engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: "Mine", Time: 5}, 0)
	if err != nil || seq != 1 || sent != 2 {
		t.Fatalf("an append whose first answer was lost: %d, %v after %d tries; want 1, nil after 2", seq, err, sent)
	}

	mu.Lock()
	lose = 1
	rival = func(subj string) { // another host creates the same name first
		data, err := journal.EncodeCatalogRecord(&engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: "THEIRS", Time: 6})
		if err == nil {
			_, err = j.JetStream().Publish(ctx, subj, data)
		}
		if err != nil {
			t.Errorf("the rival's append: %v", err)
		}
	}
	mu.Unlock()
	if _, err := j.AppendCatalog(ctx, &engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: "Theirs", Time: 7}, 0); !errors.Is(err, engine.ErrConflict) || sent != 4 {
		t.Fatalf("an append beaten while its answer was lost: %v after %d tries; want a conflict after 2", err, sent-2)
	}
	if last, err := j.LastCatalogSeq(ctx); err != nil || last != 2 {
		t.Fatalf("catalog's last sequence %d, %v; want 2 (one record each)", last, err)
	}
}

func TestCatalog(t *testing.T) {
	j, ctx := newJournal(t)
	if last, err := j.LastCatalogSeq(ctx); err != nil || last != 0 {
		t.Fatalf("empty catalog: %d, %v", last, err)
	}
	c1, err := j.AppendCatalog(ctx, &engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: "Employees", Time: 5}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The same name in another case is the same subject: the race is lost.
	if _, err := j.AppendCatalog(ctx, &engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: "EMPLOYEES"}, 0); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("second create: %v", err)
	}
	if _, err := j.AppendCatalog(ctx, &engine.CatalogRecord{Kind: engine.CatalogTableDeleted, Name: "Employees"}, c1); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	var got []*engine.CatalogRecord
	err = j.WatchCatalog(cctx, 1, func(seq uint64, rec *engine.CatalogRecord, pending uint64, bad error) error {
		if bad != nil {
			return bad
		}
		got = append(got, rec)
		if pending == 0 {
			cancel()
		}
		return nil
	})
	if err != nil || len(got) != 2 || got[0].Kind != engine.CatalogTableCreated || got[0].Name != "Employees" || got[0].Time != 5 || got[1].Kind != engine.CatalogTableDeleted {
		t.Fatalf("watched %+v, %v", got, err)
	}
}

// TestCatalogRetryRefusedWhileInFlight: a clustered stream's leader
// refuses an append to a subject while an earlier one to it is proposed
// and not yet stored, so a retry of a catalog append whose first answer
// was lost can be refused while the subject's head is still the record
// it follows. The append is then sent again, not reported as failed: it
// is stored, or the earlier try lands and is found at the head; the head
// still at the record followed is not another host's record either.
func TestCatalogRetryRefusedWhileInFlight(t *testing.T) {
	noAck := errors.New("no acknowledgement: lost on its way")
	for _, tc := range []struct {
		name   string
		lands  bool   // the first try lands at the third, else the third is stored
		follow uint64 // the record followed: 0, none
	}{
		{"the first try lost with its leader", false, 0},
		{"the first try lands after the refusal", true, 0},
		{"after a record of the name, the first try lost", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, ctx := newJournal(t)
			if tc.follow > 0 {
				if _, err := j.AppendCatalog(ctx, &engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: "Mine", Time: 4}, 0); err != nil {
					t.Fatal(err)
				}
			}
			var mu sync.Mutex
			tries := 0
			j.FailAppends(func(subj string, data []byte) error {
				mu.Lock()
				defer mu.Unlock()
				tries++
				switch tries {
				case 1:
					return noAck // proposed, answer lost
				case 2:
					return engine.ErrConflict // refused: the first still in flight
				case 3:
					if tc.lands {
						if _, err := j.JetStream().Publish(ctx, subj, data); err != nil {
							t.Errorf("the first try's landing: %v", err)
						}
						return engine.ErrConflict // refused: the first is stored
					}
				}
				return nil
			})
			kind := engine.CatalogTableCreated
			if tc.follow > 0 {
				kind = engine.CatalogTableDeleted
			}
			seq, err := j.AppendCatalog(ctx, &engine.CatalogRecord{Kind: kind, Name: "Mine", Time: 5}, tc.follow)
			if err != nil || seq != tc.follow+1 || tries != 3 {
				t.Fatalf("AppendCatalog: %d, %v after %d tries; want %d, nil after 3", seq, err, tries, tc.follow+1)
			}
			if last, err := j.LastCatalogSeq(ctx); err != nil || last != tc.follow+1 {
				t.Fatalf("catalog's last sequence %d, %v; want %d (the record once)", last, err, tc.follow+1)
			}
		})
	}
}
