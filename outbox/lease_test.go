package outbox

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/journal/jstest"
)

// testBucket starts a server and makes the outbox's bucket on it.
func testBucket(t *testing.T) (jetstream.JetStream, jetstream.KeyValue) {
	t.Helper()
	_, nc := jstest.Server(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := Bucket(context.Background(), js, "cairn", 1)
	if err != nil {
		t.Fatal(err)
	}
	return js, kv
}

// stampedAgo is an entry whose server timestamp is long past: what a
// node sees when its clock runs ahead of the server's.
type stampedAgo struct{ jetstream.KeyValueEntry }

func (stampedAgo) Created() time.Time { return time.Now().Add(-time.Hour) }

// TestLeaseAgeIsLocal: a lease's age is counted from when this node
// received it, never from the server's timestamp, so that a node whose
// clock is ahead of the server's does not take a lease its holder keeps
// renewing (and relay beside it); a lease unchanged for LeaseTTL on this
// node's clock is taken.
func TestLeaseAgeIsLocal(t *testing.T) {
	ctx := context.Background()
	_, kv := testBucket(t)
	if _, err := kv.Create(ctx, leaseKey(0), []byte("a")); err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, leaseKey(0))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{NodeID: "b", Shards: 1, LeaseTTL: 2 * time.Second, Renew: 200 * time.Millisecond}
	cfg.defaults()
	l := newLeases(kv, &cfg)
	released := func(int) { t.Fatal("released a lease it never held") }

	l.note(stampedAgo{e}, time.Now()) // just renewed, stamped an hour ago
	l.tick(ctx, released)
	if held := l.Held(time.Now()); len(held) != 0 {
		t.Fatalf("took a live lease stamped by a server clock behind: %v", held)
	}
	if got, _ := kv.Get(ctx, leaseKey(0)); string(got.Value()) != "a" {
		t.Fatalf("the lease now names %q", got.Value())
	}

	l.note(e, time.Now().Add(-cfg.LeaseTTL)) // unchanged for LeaseTTL here
	l.tick(ctx, released)
	if held := l.Held(time.Now()); !held[0] {
		t.Fatal("an abandoned lease was not taken")
	}
	if got, _ := kv.Get(ctx, leaseKey(0)); string(got.Value()) != "b" {
		t.Fatalf("the lease now names %q", got.Value())
	}
}
