package journal_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/journal/jstest"
)

// BenchmarkShardFilters measures what reading a table's stream costs a
// host that holds some of its view shards (docs/SCALE.md, Filters per
// consumer): a stream of a million records over 256 shards' subjects
// (t.1.s<shard>.k<pk>), read by an ephemeral consumer filtered on the
// wildcards of f shards (s<shard>.>), against the baseline in the same
// run: one consumer on the whole table, dropping what it does not hold
// (f=all). Each op creates the consumer and reads what it matches;
// ns/op is per op, and the metrics are the creation alone and the
// records read. Run with -benchtime 3x.
func BenchmarkShardFilters(b *testing.B) {
	const shards, records = 256, 1_000_000
	_, nc := jstest.Server(b)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FILTERS", Subjects: []string{"t.1.>"}})
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 200)
	for i := range records {
		if _, err := js.PublishAsync(fmt.Sprintf("t.1.s%d.kp%05d", i%shards, i%10_000), payload); err != nil {
			b.Fatal(err)
		}
		if i%10_000 == 9_999 {
			<-js.PublishAsyncComplete()
		}
	}
	<-js.PublishAsyncComplete()
	for _, f := range []int{0, 1, 16, 64, 128, 256} {
		name := fmt.Sprintf("f=%d", f)
		if f == 0 {
			name = "f=all"
		}
		b.Run(name, func(b *testing.B) {
			cfg := jetstream.OrderedConsumerConfig{}
			want := records
			if f == 0 {
				cfg.FilterSubjects = []string{"t.1.>"}
			} else {
				for sh := range f {
					cfg.FilterSubjects = append(cfg.FilterSubjects, fmt.Sprintf("t.1.s%d.>", sh*shards/f))
				}
				want = records / shards * f
			}
			var create time.Duration
			for b.Loop() {
				start := time.Now()
				c, err := s.OrderedConsumer(ctx, cfg)
				if err != nil {
					b.Fatal(err)
				}
				create += time.Since(start)
				got := 0
				done := make(chan struct{})
				cc, err := c.Consume(func(m jetstream.Msg) {
					got++
					if got == want {
						close(done)
					}
				}, jetstream.PullMaxMessages(4096))
				if err != nil {
					b.Fatal(err)
				}
				select {
				case <-done:
				case <-time.After(time.Minute):
					b.Fatalf("read %d of %d", got, want)
				}
				cc.Stop()
			}
			b.ReportMetric(float64(create.Microseconds())/float64(b.N), "µs-create/op")
			b.ReportMetric(float64(want), "records/op")
		})
	}
}

// BenchmarkReadHeld compares a view's two ways of replaying 43 of 64
// shards of a table of 4,096 partitions (what a host of 3 holds with
// R = 2) from the journal's start: on a consumer filtered by their
// subjects, learning at the end that it stands at the stream's last
// record (ConsumeShards with a Stand), and reading every record, the
// others' handed over undecoded (ConsumeHeld). The first is far slower
// (the server looks every matching subject up in each block it scans),
// which is why a view replays on the second and tails on the first.
// go test ./journal -run x -bench ReadHeld -benchtime 1x
func BenchmarkReadHeld(b *testing.B) {
	const shards, held, records = 64, 43, 50_000
	j, _ := newJournal(b)
	ctx := context.Background() // newJournal's lasts a minute
	if err := j.EnsureTableStream(ctx, "R", 1); err != nil {
		b.Fatal(err)
	}
	last := map[string]uint64{}
	pad := strings.Repeat("x", 900)
	for i := range records {
		pk := fmt.Sprintf("p%04d", i%4096)
		rec := put(pk, fmt.Sprint(i), int32(i))
		rec.Events[0].Properties = append(rec.Events[0].Properties, engine.Property{Name: "Pad", Value: engine.String(pad)})
		seq, err := j.Append(ctx, "R", 1, shards, rec, last[pk])
		if err != nil {
			b.Fatal(err)
		}
		last[pk] = seq
	}
	end := uint64(records)
	var list []uint32
	for s := range uint32(held) {
		list = append(list, s)
	}
	read := func(b *testing.B, consume func(ctx context.Context, fn func(seq uint64, rec *engine.Record, pending uint64) error) error) {
		for b.Loop() {
			cctx, stop := context.WithCancel(ctx)
			n := 0
			err := consume(cctx, func(seq uint64, rec *engine.Record, pending uint64) error {
				if rec != nil {
					n++
				}
				if seq >= end {
					stop()
				}
				return nil
			})
			stop()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(n), "records-decoded/op")
		}
	}
	b.Run("filtered", func(b *testing.B) {
		read(b, func(ctx context.Context, fn func(uint64, *engine.Record, uint64) error) error {
			stand := journal.NewStand()
			stand.Learn(end)
			return j.ConsumeShards(ctx, "R", 1, shards, list, stand, 1, nil, fn)
		})
	})
	b.Run("whole", func(b *testing.B) {
		read(b, func(ctx context.Context, fn func(uint64, *engine.Record, uint64) error) error {
			return j.ConsumeHeld(ctx, "R", 1, shards, func(s uint32) bool { return s < held }, 1, nil, fn)
		})
	})
}
