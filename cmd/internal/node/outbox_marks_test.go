package node_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/outbox"
)

// TestOutboxReadsMarkedTablesOnly: a table whose writes carry no outbox
// message is not read by the relay (its journal has one reader, the
// view) and is not marked; the first write with a message marks its
// table before it is appended, and the relay then reads that table from
// its start, sending the message. Tables created without shards (as for a
// cluster being upgraded) are not marked and are relayed whole, as
// before.
func TestOutboxReadsMarkedTablesOnly(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{Log: debugLog(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := devClient(t, h)
	plain, err := cl.CreateTable(ctx, "Plain")
	if err != nil {
		t.Fatal(err)
	}
	orders, err := cl.CreateTable(ctx, "Orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"Plain", "Orders"} {
		for _, rk := range []string{"1", "2"} {
			if _, err := cl.Insert(ctx, table, engine.NewEntity("p", rk)); err != nil {
				t.Fatal(err)
			}
		}
	}
	js, _ := jetstream.New(nodetest.Connect(t, h))
	kv, err := js.KeyValue(ctx, outbox.BucketName("cairn"))
	if err != nil {
		t.Fatal(err)
	}
	marked := func(table string, epoch uint64) bool {
		_, err := kv.Get(ctx, "marked."+journal.StreamName("cairn", table, epoch))
		if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	if marked("Plain", plain.Epoch) || marked("Orders", orders.Epoch) {
		t.Fatal("a table is marked before any write with a message")
	}
	// A refused write with a message marks nothing: nothing is appended.
	msg := client.WithMessages(engine.Message{Queue: "mail", Body: []byte("o:3")})
	if _, err := cl.Insert(ctx, "Orders", engine.NewEntity("p", "1"), msg); engine.ErrorCode(err) != engine.CodeEntityAlreadyExists {
		t.Fatalf("a refused insert: %v", err)
	}
	if marked("Orders", orders.Epoch) {
		t.Fatal("a refused write marked its table")
	}
	if _, err := cl.Insert(ctx, "Orders", engine.NewEntity("p", "3"), msg); err != nil {
		t.Fatal(err)
	}
	if !marked("Orders", orders.Epoch) {
		t.Fatal("a write with a message was answered before its table was marked")
	}
	waitRelayed(t, ctx, js, "Orders", orders.Epoch)
	if got := queueBodies(t, ctx, js, "mail"); strings.Join(got, ",") != "o:3" {
		t.Fatalf("queue mail holds %v", got)
	}
	// The sync that started the relay of Orders looked at Plain too.
	resp := operatorDo(t, h.OperatorToken(), http.MethodGet, h.HTTPURL()+"/$cairn/outbox", nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"table":"Orders"`) || strings.Contains(string(body), `"table":"Plain"`) {
		t.Fatalf("the relay's tables: %s", body)
	}
	consumers := func(table string, epoch uint64) int {
		s, err := js.Stream(ctx, journal.StreamName("cairn", table, epoch))
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().State.Consumers
	}
	if n := consumers("Plain", plain.Epoch); n != 1 {
		t.Fatalf("the journal of a table without messages has %d consumers, want 1 (the view's)", n)
	}
	if n := consumers("Orders", orders.Epoch); n != 2 {
		t.Fatalf("the journal of a marked table has %d consumers, want 2 (the view's, the relay's)", n)
	}
	// Dropped, the mark goes with the table.
	if err := cl.DeleteTable(ctx, "Orders"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the dropped table's mark is removed", func() bool { return !marked("Orders", orders.Epoch) })
}

// TestOutboxUnmarkedLayoutRelayed: a table created without shards (the
// layout older hosts read) marks nothing, and the relay reads it whole:
// its message is sent though no mark is stored.
func TestOutboxUnmarkedLayoutRelayed(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{TableShards: -1, Log: debugLog(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := devClient(t, h)
	info, err := cl.CreateTable(ctx, "Legacy")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Insert(ctx, "Legacy", engine.NewEntity("p", "1"), client.WithMessages(engine.Message{Queue: "mail", Body: []byte("l:1")})); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nodetest.Connect(t, h))
	waitRelayed(t, ctx, js, "Legacy", info.Epoch)
	if got := queueBodies(t, ctx, js, "mail"); strings.Join(got, ",") != "l:1" {
		t.Fatalf("queue mail holds %v", got)
	}
	kv, err := js.KeyValue(ctx, outbox.BucketName("cairn"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "marked."+journal.StreamName("cairn", "Legacy", info.Epoch)); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a table of the layout without marks was marked: %v", err)
	}
}
