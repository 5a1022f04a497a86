package outbox_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/outbox"
)

// BenchmarkRelayRepublishWindow measures what a crash of the relay would
// publish again: while records with one message each are committed over
// 100 partitions, it samples, every few milliseconds, the messages
// already in their queue beyond the stored position (every message of a
// record up to it is delivered). A crash at that moment publishes exactly
// those again, with their ids (the stream drops them as duplicates). It
// reports the largest and the mean over the samples, and the write rate.
//
//	go test -run '^$' -bench RelayRepublishWindow -benchtime 8000x ./outbox/
func BenchmarkRelayRepublishWindow(b *testing.B) {
	r := newRig(b, jetstream.StreamConfig{})
	r.create("Orders")
	r.relay("n1", outbox.Config{})
	kv, err := r.js.KeyValue(r.ctx, outbox.BucketName("cairn"))
	if err != nil {
		b.Fatal(err)
	}
	key := "pos." + journal.StreamName("cairn", "Orders", r.epoch["Orders"])
	done := make(chan struct{})
	var most, sum, samples uint64
	go func() {
		defer close(done)
		for {
			select {
			case <-r.ctx.Done():
				return
			default:
			}
			// The position first: the queue's count read after it can
			// only be larger, so the sample never undercounts.
			var pos uint64
			if e, err := kv.Get(r.ctx, key); err == nil {
				pos, _ = strconv.ParseUint(string(e.Value()), 10, 64)
			}
			info, err := r.out.Info(r.ctx)
			if err != nil {
				return
			}
			if info.State.Msgs >= uint64(b.N) {
				return
			}
			if info.State.Msgs > pos {
				w := info.State.Msgs - pos
				most, sum = max(most, w), sum+w
			}
			samples++
			time.Sleep(5 * time.Millisecond) // a sampling interval, not a wait for the code
		}
	}()
	start := time.Now()
	b.ResetTimer()
	for i := range b.N {
		r.commit("Orders", "p"+strconv.Itoa(i%100), "mail")
	}
	elapsed := time.Since(start)
	<-done
	b.StopTimer()
	b.ReportMetric(float64(most), "republish-max")
	if samples > 0 {
		b.ReportMetric(float64(sum)/float64(samples), "republish-mean")
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
}
