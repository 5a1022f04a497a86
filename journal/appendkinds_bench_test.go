package journal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/cairn-dev/cairn/journal/jstest"
)

// BenchmarkAppendKinds measures the three ways JetStream takes appends, on
// the embedded server's file storage: messages of 1 KB, each to a subject
// of its own and expecting that subject empty, as a record of a new
// partition expects its partition's last sequence. Every message is stored
// (the sub-benchmarks check the stream's count).
//
//   - async: asynchronous publishes, each acknowledged (the journal's way),
//     4,000 in flight;
//   - fast-ingest: one fast-ingest batch (nats-server 2.14, allow_batched)
//     of all the messages, acknowledged every flow messages;
//   - atomic: atomic batches (allow_atomic) of batch messages, 8 in
//     flight, each committed as a whole.
//
// It answers whether a table's appends across partitions could share
// acknowledgements or commits to cost less per command: ns/op is per
// message. Run with -benchtime 50000x.
func BenchmarkAppendKinds(b *testing.B) {
	_, nc := jstest.Server(b)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4000))
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 1024)
	run := func(name string, cfg jetstream.StreamConfig, publish func(b *testing.B, subject func(i int) string) error) {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			stream := "KINDS" + nuid.Next()
			cfg.Name, cfg.Subjects, cfg.Storage = stream, []string{stream + ".>"}, jetstream.FileStorage
			s, err := js.CreateStream(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer js.DeleteStream(ctx, stream)
			b.ResetTimer()
			start := time.Now()
			if err := publish(b, func(i int) string { return stream + ".p" + strconv.Itoa(i) }); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
			b.StopTimer()
			info, err := s.Info(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if info.State.Msgs != uint64(b.N) {
				b.Fatalf("stored %d of %d messages", info.State.Msgs, b.N)
			}
		})
	}
	msg := func(subject string) *nats.Msg {
		m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		return m
	}

	run("async", jetstream.StreamConfig{}, func(b *testing.B, subject func(int) string) error {
		for i := range b.N {
			if _, err := js.PublishMsgAsync(msg(subject(i))); err != nil {
				return err
			}
		}
		select {
		case <-js.PublishAsyncComplete():
			return nil
		case <-time.After(time.Minute):
			return fmt.Errorf("not acknowledged within a minute")
		}
	})

	for _, flow := range []int{100, 500} {
		run(fmt.Sprintf("fast-ingest/flow=%d", flow), jetstream.StreamConfig{AllowBatchPublish: true}, func(b *testing.B, subject func(int) string) error {
			return fastIngest(nc, b.N, flow, func(i int) *nats.Msg { return msg(subject(i)) })
		})
	}

	for _, size := range []int{16, 100} {
		run(fmt.Sprintf("atomic/batch=%d", size), jetstream.StreamConfig{AllowAtomicPublish: true}, func(b *testing.B, subject func(int) string) error {
			return atomicBatches(nc, b.N, size, 8, func(i int) *nats.Msg { return msg(subject(i)) })
		})
	}
}

// fastIngest publishes n messages as one fast-ingest batch (ADR-50): the
// batch's id, its flow, its gap mode, each message's place and its
// operation (0 start, 1 append, 2 commit) ride in the reply subject; the
// server acknowledges every flow messages on it and answers the commit
// with a publish acknowledgement. The publisher waits while more than
// four flows of messages are unacknowledged.
func fastIngest(nc *nats.Conn, n, flow int, msg func(i int) *nats.Msg) error {
	prefix := "_FI." + nuid.Next()
	var acked atomic.Int64
	var failed atomic.Value
	done := make(chan []byte, 1)
	sub, err := nc.Subscribe(prefix+".>", func(m *nats.Msg) {
		var v struct {
			Type   string          `json:"type"`
			Seq    int64           `json:"seq"`
			Stream string          `json:"stream"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &v); err != nil {
			failed.CompareAndSwap(nil, err.Error())
			return
		}
		switch {
		case v.Type == "ack":
			if v.Seq > acked.Load() {
				acked.Store(v.Seq)
			}
		case v.Type == "err" || v.Type == "gap" || v.Stream == "" && v.Error != nil:
			failed.CompareAndSwap(nil, string(m.Data))
		case v.Stream != "":
			done <- m.Data
		}
	})
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		return err
	}
	for i := 1; i <= n; i++ {
		for int64(i)-acked.Load() > int64(4*flow) {
			if f := failed.Load(); f != nil {
				return fmt.Errorf("fast-ingest: %v", f)
			}
			time.Sleep(20 * time.Microsecond)
		}
		op := 1 // append
		switch i {
		case n:
			op = 2 // commit, a batch of one included
		case 1:
			op = 0 // start
		}
		m := msg(i - 1)
		m.Reply = fmt.Sprintf("%s.%d.ok.%d.%d.$FI", prefix, flow, i, op)
		if err := nc.PublishMsg(m); err != nil {
			return err
		}
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		return fmt.Errorf("fast-ingest: no acknowledgement of the commit within a minute (%d acknowledged)", acked.Load())
	}
	if f := failed.Load(); f != nil {
		return fmt.Errorf("fast-ingest: %v", f)
	}
	return nil
}

// atomicBatches publishes n messages in atomic batches of size, inflight
// at a time: each message carries the batch's id and its place, the last
// the commit, which is sent as a request and answered with the batch's
// publish acknowledgement.
func atomicBatches(nc *nats.Conn, n, size, inflight int, msg func(i int) *nats.Msg) error {
	sem := make(chan struct{}, inflight)
	errs := make(chan error, (n+size-1)/size)
	batches := 0
	for first := 0; first < n; first += size {
		sem <- struct{}{}
		batches++
		id := nuid.Next()
		last := min(first+size, n) - 1
		for i := first; i <= last; i++ {
			m := msg(i)
			m.Header.Set("Nats-Batch-Id", id)
			m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i-first+1))
			if i < last {
				if err := nc.PublishMsg(m); err != nil {
					return err
				}
				continue
			}
			m.Header.Set("Nats-Batch-Commit", "1")
			go func() {
				defer func() { <-sem }()
				r, err := nc.RequestMsg(m, 10*time.Second)
				if err == nil {
					var ack struct {
						Error *jetstream.APIError `json:"error"`
					}
					if err = json.Unmarshal(r.Data, &ack); err == nil && ack.Error != nil {
						err = ack.Error
					}
				}
				errs <- err
			}()
		}
	}
	for range batches {
		if err := <-errs; err != nil {
			return fmt.Errorf("atomic batch: %w", err)
		}
	}
	return nil
}
