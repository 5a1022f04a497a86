package journal_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// TestConsumeShard: a reader of one shard (ConsumeShards) gets exactly that shard's
// records, in order, with the stream's sequences; deliveries lost on
// their way are read again from a replica, and only the shard's. The
// shard's last record is known without reading it.
func TestConsumeShard(t *testing.T) {
	j, ctx := newJournal(t)
	const shards = 4
	if err := j.EnsureTableStream(ctx, "S", 1); err != nil {
		t.Fatal(err)
	}
	want := map[uint32][]uint64{} // each shard's records
	last := map[string]uint64{}
	for i := range 60 {
		pk := fmt.Sprintf("p%d", i%13)
		seq, err := j.Append(ctx, "S", 1, shards, put(pk, fmt.Sprint(i), int32(i)), last[pk])
		if err != nil {
			t.Fatal(err)
		}
		last[pk] = seq
		sh := uint32(engine.Shard(pk, shards))
		want[sh] = append(want[sh], seq)
	}
	// Lose one delivery in the middle of each shard's records.
	var mu sync.Mutex
	lose := map[uint64]bool{}
	for _, seqs := range want {
		lose[seqs[len(seqs)/2]] = true
	}
	var lost int
	j.LoseInTransit(func(_ string, seq uint64) bool {
		mu.Lock()
		defer mu.Unlock()
		if lose[seq] {
			delete(lose, seq)
			lost++
			return true
		}
		return false
	})
	read := func(shard uint32, from uint64) []uint64 {
		t.Helper()
		cctx, stop := context.WithCancel(ctx)
		defer stop()
		var got []uint64
		err := j.ConsumeShards(cctx, "S", 1, shards, []uint32{shard}, nil, from, nil, func(seq uint64, rec *engine.Record, pending uint64) error {
			if s := uint32(engine.Shard(rec.PartitionKey, shards)); s != shard {
				return fmt.Errorf("record %d of partition %q (shard %d) read as shard %d's", seq, rec.PartitionKey, s, shard)
			}
			got = append(got, seq)
			if pending == 0 {
				stop()
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for shard := range uint32(shards) {
		if len(want[shard]) < 3 {
			t.Fatalf("shard %d has %d records: choose other keys", shard, len(want[shard]))
		}
		if got := read(shard, 1); !slices.Equal(got, want[shard]) {
			t.Errorf("shard %d: read %v, want %v", shard, got, want[shard])
		}
		from := want[shard][1] // from one of its records
		if got := read(shard, from); !slices.Equal(got, want[shard][1:]) {
			t.Errorf("shard %d from %d: read %v, want %v", shard, from, got, want[shard][1:])
		}
		if got := read(shard, want[shard][1]-1); !slices.Equal(got, want[shard][1:]) && want[shard][1]-1 != want[shard][0] {
			t.Errorf("shard %d from before its second record: read %v", shard, got)
		}
		if head, err := j.ShardLast(ctx, "S", 1, shard); err != nil || head != want[shard][len(want[shard])-1] {
			t.Errorf("ShardLast(%d) = %d, %v; want %d", shard, head, err, want[shard][len(want[shard])-1])
		}
	}
	mu.Lock()
	if lost != shards {
		t.Errorf("%d deliveries lost, want %d (one per shard)", lost, shards)
	}
	mu.Unlock()
	// A shard without records; a shard the table does not have.
	if err := j.EnsureTableStream(ctx, "Few", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, "Few", 1, 64, put("Sales", "1", 1), 0); err != nil {
		t.Fatal(err)
	}
	if head, err := j.ShardLast(ctx, "Few", 1, uint32(engine.Shard("Sales", 64))); err != nil || head != 1 {
		t.Errorf("ShardLast of Sales's shard = %d, %v", head, err)
	}
	if head, err := j.ShardLast(ctx, "Few", 1, uint32(engine.Shard("Sales", 64)+1)%64); err != nil || head != 0 {
		t.Errorf("ShardLast of an empty shard = %d, %v", head, err)
	}
	if _, err := j.ShardLast(ctx, "Never", 1, 0); err == nil {
		t.Error("ShardLast of a table without a stream succeeded")
	}
	if err := j.ConsumeShards(ctx, "Few", 1, 64, []uint32{3, 64}, nil, 1, nil, nil); err == nil {
		t.Error("ConsumeShards of shard 64 of 64 succeeded")
	}
	if err := j.ConsumeShards(ctx, "Few", 1, 64, nil, nil, 1, nil, nil); err == nil {
		t.Error("ConsumeShards of no shard succeeded")
	}
}

// TestConsumeHeld: a reader holding some shards gets every record's
// sequence, the records of its shards decoded and checked, the others as
// nil and never decoded (junk on another shard's subject is not its
// fault; junk on its own shard's is).
func TestConsumeHeld(t *testing.T) {
	j, ctx := newJournal(t)
	const shards = 4
	if err := j.EnsureTableStream(ctx, "H", 1); err != nil {
		t.Fatal(err)
	}
	held := func(s uint32) bool { return s%2 == 0 }
	last := map[string]uint64{}
	var pks []string
	for i := range 20 {
		pk := fmt.Sprintf("p%d", i%7)
		seq, err := j.Append(ctx, "H", 1, shards, put(pk, fmt.Sprint(i), int32(i)), last[pk])
		if err != nil {
			t.Fatal(err)
		}
		last[pk] = seq
		pks = append(pks, pk)
	}
	var other, mine string // a partition of a shard not held, and of one held
	for _, pk := range pks {
		if held(uint32(engine.Shard(pk, shards))) {
			mine = pk
		} else {
			other = pk
		}
	}
	if other == "" || mine == "" {
		t.Fatal("choose other keys: every partition is on one side")
	}
	js := j.JetStream()
	junk := func(pk string) uint64 {
		t.Helper()
		ack, err := js.Publish(ctx, j.PartitionSubject("H", 1, shards, pk), []byte("junk"))
		if err != nil {
			t.Fatal(err)
		}
		pks = append(pks, pk)
		return ack.Sequence
	}
	junk(other)
	bad := junk(mine)
	var seqs []uint64
	err := j.ConsumeHeld(ctx, "H", 1, shards, held, 1, nil, func(seq uint64, rec *engine.Record, pending uint64) error {
		seqs = append(seqs, seq)
		pk := pks[seq-1]
		switch {
		case held(uint32(engine.Shard(pk, shards))) && (rec == nil || rec.PartitionKey != pk):
			return fmt.Errorf("record %d of held partition %q handed as %+v", seq, pk, rec)
		case !held(uint32(engine.Shard(pk, shards))) && rec != nil:
			return fmt.Errorf("record %d of partition %q, not held, was decoded", seq, pk)
		}
		return nil
	})
	var ce *journal.CorruptError
	if !errors.As(err, &ce) || ce.Seq != bad || len(seqs) != int(bad-1) {
		t.Fatalf("read %v, then %v; want every record to %d, then a CorruptError at %d", seqs, err, bad-1, bad)
	}
}
