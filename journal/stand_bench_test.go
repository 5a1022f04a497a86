package journal_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// BenchmarkStand measures a read at a position that is another shard's
// record, on a host holding some shards (docs/SCALE.md F): each op
// appends a record of a shard the reader does not hold, then waits until
// the reader stands at it. "learn": a reader of 43 of 64 shards, asked
// where it stands (journal.Stand: the record at the position, the
// stream's last sequence, then the last record of each of its shards,
// from the leader). "own": the same reader asked for the position of a
// record of its own shards, just appended (a command's, read back). Baselines in the
// same run: "append" (the append alone, the floor) and "whole" (a reader
// of the whole journal, which is delivered the record). The stream holds
// 40,960 records over 4,096 partitions first.
func BenchmarkStand(b *testing.B) {
	j, ctx := newJournal(b)
	const shards, parts = 64, 4096
	if err := j.EnsureTableStream(ctx, "B", 1); err != nil {
		b.Fatal(err)
	}
	var held []uint32
	for s := range uint32(43) {
		held = append(held, s)
	}
	last := map[string]uint64{}
	var other, own []string // partitions of shards not held, held
	for i := range 10 * parts {
		pk := fmt.Sprintf("p%04d", i%parts)
		seq, err := j.Append(ctx, "B", 1, shards, put(pk, "r", 1), last[pk])
		if err != nil {
			b.Fatal(err)
		}
		last[pk] = seq
		switch {
		case i >= parts:
		case engine.Shard(pk, shards) >= 43:
			other = append(other, pk)
		default:
			own = append(own, pk)
		}
	}
	// Each reader hands what it reaches to a channel the op drains.
	read := func(consume func(ctx context.Context, fn func(seq uint64, rec *engine.Record, pending uint64) error) error) (<-chan uint64, context.CancelFunc) {
		cctx, cancel := context.WithCancel(ctx)
		at := make(chan uint64, 1<<16)
		go func() {
			_ = consume(cctx, func(seq uint64, _ *engine.Record, _ uint64) error {
				at <- seq
				return nil
			})
		}()
		return at, cancel
	}
	reach := func(b *testing.B, at <-chan uint64, seq uint64) {
		for s := range at {
			if s >= seq {
				return
			}
		}
		b.Fatal("the reader stopped")
	}
	stand := journal.NewStand()
	sparse, stopSparse := read(func(ctx context.Context, fn func(uint64, *engine.Record, uint64) error) error {
		return j.ConsumeShards(ctx, "B", 1, shards, held, stand, 1, nil, fn)
	})
	defer stopSparse()
	whole, stopWhole := read(func(ctx context.Context, fn func(uint64, *engine.Record, uint64) error) error {
		return j.ConsumeKnown(ctx, "B", 1, shards, 1, nil, fn)
	})
	defer stopWhole()
	end := last[fmt.Sprintf("p%04d", parts-1)]
	stand.Learn(end)
	reach(b, sparse, end)
	reach(b, whole, end)
	i := 0
	appendTo := func(b *testing.B, pks []string) uint64 {
		pk := pks[i%len(pks)]
		i++
		seq, err := j.Append(ctx, "B", 1, shards, put(pk, "r", 1), last[pk])
		if err != nil {
			b.Fatal(err)
		}
		last[pk] = seq
		return seq
	}
	drain := func(at <-chan uint64) {
		for {
			select {
			case <-at:
			default:
				return
			}
		}
	}
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			appendTo(b, other)
		}
	})
	b.Run("whole", func(b *testing.B) {
		drain(whole)
		for b.Loop() {
			reach(b, whole, appendTo(b, other))
		}
	})
	for _, c := range []struct {
		name string
		pks  []string
	}{{"learn", other}, {"own", own}} {
		b.Run(c.name, func(b *testing.B) {
			drain(sparse)
			for b.Loop() {
				seq := appendTo(b, c.pks)
				stand.Learn(seq)
				reach(b, sparse, seq)
			}
		})
	}
}
