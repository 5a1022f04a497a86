package journal_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// TestConsumeShardsStand: a reader of two shards of four is sent only
// their records, deliveries lost in transit included; asked where it
// stands, it learns the stream's last sequence once it has handed over
// every record of its shards (the last of them lost in transit: its
// consumer is made again when it does not come), and never a sequence
// past the stream's end, so the records after it still come.
func TestConsumeShardsStand(t *testing.T) {
	j, ctx := newJournal(t)
	const shards = 4
	if err := j.EnsureTableStream(ctx, "T", 1); err != nil {
		t.Fatal(err)
	}
	held := []uint32{0, 2}
	holds := func(pk string) bool { return slices.Contains(held, uint32(engine.Shard(pk, shards))) }
	last := map[string]uint64{}
	var mine, other []uint64 // the records of the held shards, of the others
	var mineKey, otherKey string
	add := func(pk string) uint64 {
		t.Helper()
		seq, err := j.Append(ctx, "T", 1, shards, put(pk, fmt.Sprint(len(mine)+len(other)), 1), last[pk])
		if err != nil {
			t.Fatal(err)
		}
		last[pk] = seq
		if holds(pk) {
			mine, mineKey = append(mine, seq), pk
		} else {
			other, otherKey = append(other, seq), pk
		}
		return seq
	}
	for i := range 40 {
		add(fmt.Sprintf("p%d", i%11))
	}
	if len(mine) < 4 || len(other) < 4 {
		t.Fatalf("choose other keys: %d records held, %d not", len(mine), len(other))
	}
	add(otherKey) // the stream ends on another shard's record
	end := other[len(other)-1]
	var mu sync.Mutex
	// One in the middle, found by the next delivery; and the last of its
	// shards, after which nothing comes: found when it learns where it
	// stands, by the shard's last record, which never comes.
	lose := map[uint64]bool{mine[len(mine)/2]: true, mine[len(mine)-1]: true}
	j.LoseInTransit(func(_ string, seq uint64) bool {
		mu.Lock()
		defer mu.Unlock()
		defer delete(lose, seq)
		return lose[seq]
	})

	type handed struct {
		seq uint64
		rec *engine.Record
	}
	got := make(chan handed, 1000)
	stand := journal.NewStand()
	stand.Learn(end) // asked before the reader's consumer is made
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	go func() {
		errc <- j.ConsumeShards(cctx, "T", 1, shards, held, stand, 1, nil, func(seq uint64, rec *engine.Record, pending uint64) error {
			if rec != nil && !holds(rec.PartitionKey) {
				return fmt.Errorf("record %d of partition %q, not held, handed over", seq, rec.PartitionKey)
			}
			got <- handed{seq, rec}
			return nil
		})
	}()
	next := func() handed {
		t.Helper()
		select {
		case h := <-got:
			return h
		case err := <-errc:
			t.Fatalf("the reader ended: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("nothing handed over in 10 s")
		}
		return handed{}
	}
	// Its records, in order, then where it stands: the stream's end. The
	// lost delivery is read again from a replica with the records of
	// other shards before it, handed over as nil.
	var read []uint64
	for len(read) < len(mine) {
		h := next()
		if h.rec == nil {
			if !slices.Contains(other, h.seq) {
				t.Fatalf("stood at %d, not another shard's record, after reading %v of %v", h.seq, read, mine)
			}
			continue
		}
		read = append(read, h.seq)
	}
	if !slices.Equal(read, mine) {
		t.Fatalf("read %v, want %v", read, mine)
	}
	if h := next(); h.rec != nil || h.seq != end {
		t.Fatalf("after its records: %d (record %v), want to stand at %d", h.seq, h.rec != nil, end)
	}
	// A made-up position moves it only to the stream's end: the next
	// record of its shards still comes.
	another := add(otherKey)
	stand.Learn(another + 1000)
	if h := next(); h.rec != nil || h.seq != another {
		t.Fatalf("asked past the end: %d (record %v), want to stand at %d", h.seq, h.rec != nil, another)
	}
	seq := add(mineKey)
	if h := next(); h.rec == nil || h.seq != seq {
		t.Fatalf("after standing at the end: %d (record %v), want record %d", h.seq, h.rec != nil, seq)
	}
	// Another shard's record, asked for by its position.
	seq = add(otherKey)
	stand.Learn(seq)
	if h := next(); h.rec != nil || h.seq != seq {
		t.Fatalf("asked for %d: %d (record %v)", seq, h.seq, h.rec != nil)
	}
	// Asked for a position it has passed: nothing.
	stand.Learn(seq)
	stand.Learn(mine[0])
	seq = add(mineKey)
	if h := next(); h.rec == nil || h.seq != seq {
		t.Fatalf("after asking for a position passed: %d (record %v), want record %d", h.seq, h.rec != nil, seq)
	}
	mu.Lock()
	if len(lose) != 0 {
		t.Error("a delivery to lose was never made")
	}
	mu.Unlock()
}

// TestStandAfterAcknowledged: a reader asked where it stands right after
// a record of its shards was acknowledged, and another shard's after it,
// never stands past the first before it handed it over. JetStream counts
// a record pending for a consumer only after it acknowledged it, from a
// goroutine of its own: a reader that learnt from its consumer's state
// would now and then stand past it.
func TestStandAfterAcknowledged(t *testing.T) {
	j, ctx := newJournal(t)
	const shards = 4
	if err := j.EnsureTableStream(ctx, "T", 1); err != nil {
		t.Fatal(err)
	}
	var mineKey, otherKey string
	for i := 0; mineKey == "" || otherKey == ""; i++ {
		if pk := fmt.Sprintf("p%d", i); engine.Shard(pk, shards) == 1 {
			mineKey = pk
		} else if engine.Shard(pk, shards) == 2 {
			otherKey = pk
		}
	}
	type handed struct {
		seq uint64
		rec bool
	}
	got := make(chan handed, 16)
	stand := journal.NewStand()
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	go func() {
		errc <- j.ConsumeShards(cctx, "T", 1, shards, []uint32{1, 3}, stand, 1, nil, func(seq uint64, rec *engine.Record, pending uint64) error {
			got <- handed{seq, rec != nil}
			return nil
		})
	}()
	var lastMine, lastOther uint64
	for i := range 200 {
		var err error
		if lastMine, err = j.Append(ctx, "T", 1, shards, put(mineKey, fmt.Sprint(i), 1), lastMine); err != nil {
			t.Fatal(err)
		}
		if lastOther, err = j.Append(ctx, "T", 1, shards, put(otherKey, fmt.Sprint(i), 1), lastOther); err != nil {
			t.Fatal(err)
		}
		stand.Learn(lastOther)
		var mine bool
		for {
			var h handed
			select {
			case h = <-got:
			case err := <-errc:
				t.Fatalf("the reader ended: %v", err)
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: nothing handed over in 10 s", i)
			}
			if h.rec {
				mine = mine || h.seq == lastMine
				continue
			}
			if h.seq >= lastMine && !mine {
				t.Fatalf("round %d: stood at %d before its record %d was handed over", i, h.seq, lastMine)
			}
			if h.seq == lastOther {
				break
			}
		}
	}
}

// TestMatches: the subject filters a reader of some shards checks a
// record's subject against.
func TestMatches(t *testing.T) {
	for _, c := range []struct {
		subj, filter string
		want         bool
	}{
		{"c.j.t.1.s3.kA", "c.j.t.1.s3.*", true},
		{"c.j.t.1.s3.kA", "c.j.t.1.s30.*", false},
		{"c.j.t.1.s30.kA", "c.j.t.1.s3.*", false},
		{"c.j.t.1.s3.kA.x", "c.j.t.1.s3.*", false},
		{"c.j.t.1.s3", "c.j.t.1.s3.*", false},
		{"c.j.t.1.s3.kA", "c.j.>", true},
		{"c.j.t.1.s3.kA", "c.j.t.1.s3.kA", true},
		{"c.j.t.1.s3.kA", "c.j.t.2.s3.*", false},
		{"", "c.j.t.1.s3.*", false},
	} {
		if got := journal.Matches(c.subj, c.filter); got != c.want {
			t.Errorf("matches(%q, %q) = %v, want %v", c.subj, c.filter, got, c.want)
		}
	}
}
