package journal_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
