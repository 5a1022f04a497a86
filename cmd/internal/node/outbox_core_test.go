package node_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
)

// TestOutboxStreamBackedByDefault: on a node with -outbox-core notify.>,
// a message to notify.sales is published on core NATS with no stream
// behind it, while a message to orders.created, which no stream captures
// yet, waits with its partition (the notify message behind it in the same
// record waits too), shown in GET /$cairn/outbox with the reason
// no-stream and what to do. Once a stream captures orders.> the partition
// drains in order: each orders message stored once, the notify message
// published.
func TestOutboxStreamBackedByDefault(t *testing.T) {
	th := startNode(t, node.Config{OutboxSubjects: []string{"orders.>", "notify.>"}, OutboxCore: []string{"notify.>"}})
	ctx := ctxT(t)
	sub, err := th.nc.SubscribeSync("notify.>")
	if err != nil {
		t.Fatal(err)
	}
	table, err := th.c.CreateTable(ctx, "Orders")
	if err != nil {
		t.Fatal(err)
	}
	// A partition whose only message is a core one: published, no stream.
	if _, err := th.c.Insert(ctx, "Orders", engine.NewEntity("q", "1"), client.WithMessages(
		engine.Message{Subject: "notify.sales", Body: []byte("q:1")})); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsgWithContext(ctx); err != nil || string(m.Data) != "q:1" {
		t.Fatalf("core message: %v %v", m, err)
	}
	// A partition whose first message has no stream yet.
	r1, err := th.c.Insert(ctx, "Orders", engine.NewEntity("p", "1"), client.WithMessages(
		engine.Message{Subject: "orders.created", Body: []byte("o1")},
		engine.Message{Subject: "notify.sales", Body: []byte("n1")}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.c.Insert(ctx, "Orders", engine.NewEntity("p", "2"), client.WithMessages(
		engine.Message{Subject: "orders.created", Body: []byte("o2")})); err != nil {
		t.Fatal(err)
	}
	get := func() string {
		resp := operatorDo(t, th.h.OperatorToken(), http.MethodGet, th.h.HTTPURL()+"/$cairn/outbox", nil)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	want := `"partition":"p","seq":` + strconv.FormatUint(r1.Seq, 10) + `,"index":0,"destination":"orders.created"`
	eventually(t, 30*time.Second, "the blocked partition in GET /$cairn/outbox", func() bool {
		b := get()
		return strings.Contains(b, want) && strings.Contains(b, `"reason":"no-stream"`) && strings.Contains(b, "-outbox-core")
	})
	if m, err := sub.NextMsg(0); err == nil {
		t.Fatalf("the notify message behind the blocked one was published: %s", m.Data)
	}
	js := mustJS(t, th.nc)
	orders, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsgWithContext(ctx); err != nil || string(m.Data) != "n1" {
		t.Fatalf("core message after the block: %v %v", m, err)
	}
	waitRelayed(t, ctx, js, "Orders", table.Epoch)
	info, err := orders.Info(ctx)
	if err != nil || info.State.Msgs != 2 {
		t.Fatalf("the stream holds %+v %v, want 2", info, err)
	}
	for seq, want := range map[uint64]string{1: "o1", 2: "o2"} {
		if m, err := orders.GetMsg(ctx, seq); err != nil || string(m.Data) != want {
			t.Fatalf("message %d: %v %v, want %s", seq, m, err, want)
		}
	}
}
