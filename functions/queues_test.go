package functions

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/journal/jstest"
)

// TestOpenQueuesStorageRefused: a bound of bytes the server's JetStream
// storage cannot reserve stops OpenQueues with the server's refusal and
// the flag to lower, instead of a bare API error.
func TestOpenQueuesStorageRefused(t *testing.T) {
	_, nc := jstest.Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const petabyte = 1 << 50 // beyond any test machine's disk
	_, err = OpenQueues(ctx, js, "cairn", QueueConfig{Replicas: 1, MaxBytes: petabyte})
	if !storageRefused(err) || !strings.Contains(err.Error(), "-queue-max-bytes") {
		t.Fatalf("a bound of 1 PiB: %v, want the server's refusal naming -queue-max-bytes", err)
	}
	q, err := OpenQueues(ctx, js, "cairn", QueueConfig{Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	if q.MaxBytes() != DefaultQueueMaxBytes {
		t.Fatalf("the default bound is %d, want %d", q.MaxBytes(), DefaultQueueMaxBytes)
	}
}
