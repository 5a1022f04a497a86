package journal_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// TestHistoryPruneAndRetention: a table's retention and horizon live in
// its stream's metadata; a prune records the horizon, then purges below
// it; a read from before it is HistoryTruncated; records removed beyond
// the recorded horizon are a removal behind Cairn's back; a partition
// whose every record went is empty to an append's check.
func TestHistoryPruneAndRetention(t *testing.T) {
	j, ctx := newJournal(t)
	if err := j.EnsureTableStream(ctx, "Hist", 1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 1; i <= 10; i++ {
		pk := "hot"
		if i == 1 {
			pk = "cold"
		}
		last, _ := j.LastSeq(ctx, "Hist", 1, 0, pk)
		if _, err := j.Append(ctx, "Hist", 1, 0, put(pk, fmt.Sprint(i), int32(i)), last); err != nil {
			t.Fatal(err)
		}
	}
	h, err := j.History(ctx, "Hist", 1)
	if err != nil || h.First != 1 || h.Last != 10 || h.Horizon != 1 || h.Retention != "" || h.Records != 10 {
		t.Fatalf("history before: %+v %v", h, err)
	}
	if err := j.SetRetention(ctx, "Hist", 1, "7d"); err != nil {
		t.Fatal(err)
	}
	if seq, err := j.FirstSince(ctx, "Hist", 1, start.Add(-time.Hour)); err != nil || seq != 1 {
		t.Fatalf("first since an hour before: %d %v", seq, err)
	}
	if seq, err := j.FirstSince(ctx, "Hist", 1, time.Now().Add(time.Hour)); err != nil || seq != 0 {
		t.Fatalf("first since an hour from now: %d %v", seq, err)
	}
	if _, err := j.PurgeBelow(ctx, "Hist", 1, 6); err == nil {
		t.Fatal("a purge below a horizon not recorded")
	}
	if err := j.RecordHorizon(ctx, "Hist", 1, 6); err != nil {
		t.Fatal(err)
	}
	if err := j.RecordHorizon(ctx, "Hist", 1, 4); err != nil { // lower: changes nothing
		t.Fatal(err)
	}
	got, err := j.PurgeBelow(ctx, "Hist", 1, 6)
	if err != nil || got.Records != 5 || got.Bytes == 0 {
		t.Fatalf("purge: %+v %v", got, err)
	}
	h, err = j.History(ctx, "Hist", 1)
	if err != nil || h.First != 6 || h.Horizon != 6 || h.Retention != "7d" || h.Records != 5 {
		t.Fatalf("history after: %+v %v", h, err)
	}
	if removed, _, err := j.RemovedRecords(ctx, "Hist", 1); err != nil || removed {
		t.Fatalf("Cairn's own prune taken for a removal: %v %v", removed, err)
	}
	if _, err := j.Read(ctx, "Hist", 1, 0, journal.ReadRange{From: 2, Max: 10}); engine.ErrorCode(err) != engine.CodeHistoryTruncated {
		t.Fatalf("a read from 2: %v, want HistoryTruncated", err)
	}
	if page, err := j.Read(ctx, "Hist", 1, 0, journal.ReadRange{From: 6, Max: 10}); err != nil || len(page.Records) != 5 {
		t.Fatalf("a read from the horizon: %v %v", page, err)
	}
	// The cold partition's only record went: JetStream knows none.
	if last, err := j.LastSeq(ctx, "Hist", 1, 0, "cold"); err != nil || last != 0 {
		t.Fatalf("the cold partition's last: %d %v", last, err)
	}
	if _, err := j.Append(ctx, "Hist", 1, 0, put("cold", "11", 11), 1); err == nil {
		t.Fatal("an append expecting the pruned record was stored")
	}
	if _, err := j.Append(ctx, "Hist", 1, 0, put("cold", "11", 11), 0); err != nil {
		t.Fatalf("an append expecting none: %v", err)
	}
	if err := j.SetRetention(ctx, "Hist", 1, ""); err != nil {
		t.Fatal(err)
	}
	if h, _ := j.History(ctx, "Hist", 1); h.Retention != "" || h.Horizon != 6 {
		t.Fatalf("after the retention's removal: %+v", h)
	}
}
