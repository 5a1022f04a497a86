package journal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

func seqs(p *journal.Page) []uint64 {
	var s []uint64
	for _, r := range p.Records {
		s = append(s, r.Seq)
	}
	return s
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRead: pages of a table's records by sequence, with next and head,
// filtered by partition, at most MaxReadsPerTable at once, and nothing
// left on the server afterwards.
func TestRead(t *testing.T) { // a table with shards; TestHistoryPruneAndRetention reads one without
	j, ctx := newJournal(t)
	if err := j.EnsureTableStream(ctx, "Emp", 3); err != nil {
		t.Fatal(err)
	}
	last := map[string]uint64{}
	appendTo := func(pk, rk string) uint64 {
		t.Helper()
		s, err := j.Append(ctx, "Emp", 3, 4, put(pk, rk, 1), last[pk])
		if err != nil {
			t.Fatal(err)
		}
		last[pk] = s
		return s
	}
	for i, pk := range []string{"a", "b", "a", "c", "b", "a"} { // seqs 1..6
		appendTo(pk, string(rune('0'+i)))
	}
	read := func(r journal.ReadRange) *journal.Page {
		t.Helper()
		p, err := j.Read(ctx, "Emp", 3, 4, r)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := read(journal.ReadRange{From: 1, Max: 4})
	if !equalSeqs(seqs(p), []uint64{1, 2, 3, 4}) || p.Next != 5 || p.Head != 6 {
		t.Fatalf("first page %v next %d head %d", seqs(p), p.Next, p.Head)
	}
	if p.Records[1].Record.PartitionKey != "b" {
		t.Fatalf("record 2 is of partition %q", p.Records[1].Record.PartitionKey)
	}
	p = read(journal.ReadRange{From: p.Next, Max: 4})
	if !equalSeqs(seqs(p), []uint64{5, 6}) || p.Next != 7 || p.Head != 6 {
		t.Fatalf("second page %v next %d head %d", seqs(p), p.Next, p.Head)
	}
	p = read(journal.ReadRange{From: 7, Max: 4})
	if len(p.Records) != 0 || p.Next != 7 || p.Head != 6 {
		t.Fatalf("past the end: %v next %d head %d", seqs(p), p.Next, p.Head)
	}
	// Partitions: only theirs, and next skips what does not match.
	p = read(journal.ReadRange{From: 1, Max: 10, Partitions: []string{"b", "c"}})
	if !equalSeqs(seqs(p), []uint64{2, 4, 5}) || p.Next != 7 {
		t.Fatalf("partitions b, c: %v next %d", seqs(p), p.Next)
	}
	p = read(journal.ReadRange{From: 1, Max: 2, Partitions: []string{"a"}})
	if !equalSeqs(seqs(p), []uint64{1, 3}) || p.Next != 4 {
		t.Fatalf("partition a, max 2: %v next %d", seqs(p), p.Next)
	}
	p = read(journal.ReadRange{From: 6, Max: 2, Partitions: []string{"c"}})
	if len(p.Records) != 0 || p.Next != 7 {
		t.Fatalf("partition c from 6: %v next %d", seqs(p), p.Next)
	}
	// A byte budget still returns the first record.
	p = read(journal.ReadRange{From: 1, Max: 10, MaxBytes: 1})
	if !equalSeqs(seqs(p), []uint64{1}) || p.Next != 2 {
		t.Fatalf("budget of one byte: %v next %d", seqs(p), p.Next)
	}

	// The reads of a table at once are bounded: one beyond waits for a
	// place, and gives up when its context ends.
	var gives []func()
	for range journal.MaxReadsPerTable {
		give, err := j.TakeRead(ctx, "Emp", 3)
		if err != nil {
			t.Fatal(err)
		}
		gives = append(gives, give)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := j.Read(short, "Emp", 3, 4, journal.ReadRange{From: 1, Max: 1})
	cancel()
	if !errors.Is(err, journal.ErrReadsBusy) {
		t.Fatalf("a read beyond the bound: %v", err)
	}
	if p := read(journal.ReadRange{From: 7, Max: 1}); p.Next != 7 {
		t.Fatalf("a read with nothing to read, which needs no consumer: next %d", p.Next)
	}
	got := make(chan *journal.Page, 1)
	go func() {
		p, err := j.Read(ctx, "Emp", 3, 4, journal.ReadRange{From: 1, Max: 1})
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	gives[0]()
	if p := <-got; !equalSeqs(seqs(p), []uint64{1}) {
		t.Fatalf("a read given a place: %v", seqs(p))
	}
	for _, give := range gives[1:] {
		give()
	}

	// Nothing stays on the server.
	names := 0
	s, err := j.JetStream().Stream(ctx, journal.StreamName("cairn", "Emp", 3))
	if err != nil {
		t.Fatal(err)
	}
	for range s.ListConsumers(ctx).Info() {
		names++
	}
	if names != 0 {
		t.Fatalf("%d consumers left on the stream", names)
	}
	if _, err := j.Read(ctx, "Gone", 1, 0, journal.ReadRange{From: 1, Max: 1}); !errors.Is(err, engine.ErrTableGone) {
		t.Fatalf("a missing table: %v", err)
	}
}
