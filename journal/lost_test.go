package journal_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/journal/jstest"
)

// logBuffer collects a logger's lines; safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLostConsumerLogs: a reader whose stream is deleted (a dropped
// table's) ends with engine.ErrTableGone and logs the loss at Debug, no
// warning; a reader whose consumer is deleted behind its back while the
// stream stays makes another, reads on, and warns.
func TestLostConsumerLogs(t *testing.T) {
	_, nc := jstest.Server(t)
	var logs logBuffer
	j, err := journal.New(nc, journal.Config{Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := j.Init(ctx); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// read consumes table from its first record, sending each sequence
	// on seqs, until it returns.
	seqs := make(chan uint64, 8)
	read := func(ctx context.Context, table string) <-chan error {
		done := make(chan error, 1)
		go func() {
			done <- j.Consume(ctx, table, 1, 0, 1, func(seq uint64, _ *engine.Record, _ uint64) error {
				seqs <- seq
				return nil
			})
		}()
		return done
	}

	// Dropped: the stream goes.
	if err := j.EnsureTableStream(ctx, "Dropped", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, "Dropped", 1, 0, put("p", "r", 1), 0); err != nil {
		t.Fatal(err)
	}
	done := read(ctx, "Dropped")
	<-seqs
	if err := j.DeleteTableStream(ctx, "Dropped", 1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, engine.ErrTableGone) {
		t.Fatalf("the reader of a deleted stream returned %v", err)
	}
	if s := logs.String(); strings.Contains(s, "level=WARN") || !strings.Contains(s, "consumer was deleted with its stream") {
		t.Fatalf("a dropped table's reader logged:\n%s", s)
	}

	// Kept: only the consumer goes.
	if err := j.EnsureTableStream(ctx, "Kept", 1); err != nil {
		t.Fatal(err)
	}
	last, err := j.Append(ctx, "Kept", 1, 0, put("p", "r", 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	done = read(rctx, "Kept")
	<-seqs
	s, err := js.Stream(ctx, j.TableStream("Kept", 1))
	if err != nil {
		t.Fatal(err)
	}
	names := s.ConsumerNames(ctx)
	deleted := 0
	for name := range names.Name() {
		if err := s.DeleteConsumer(ctx, name); err != nil {
			t.Fatal(err)
		}
		deleted++
	}
	if deleted == 0 {
		t.Fatal("the reader has no consumer")
	}
	if _, err := j.Append(ctx, "Kept", 1, 0, put("p", "r", 2), last); err != nil {
		t.Fatal(err)
	}
	if seq := <-seqs; seq != last+1 {
		t.Fatalf("read %d after the consumer's loss, want %d", seq, last+1)
	}
	// The loss is logged on the side once the stream is seen to stay:
	// poll the log until then (the test's context bounds the wait).
	for !strings.Contains(logs.String(), `level=WARN msg="journal: a reader's consumer was lost; making another" stream=`+j.TableStream("Kept", 1)) {
		select {
		case <-ctx.Done():
			t.Fatalf("no warning of the lost consumer:\n%s", logs.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("the reader stopped with %v", err)
	}
}
