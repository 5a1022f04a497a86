package node_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
)

// TestOutboxConsumerUser: a service user given outbox subjects and a
// stream (-nats-users "subjects", "streams") subscribes to the subjects on
// core NATS, and reads the stream with an ordered consumer and with a
// durable one it acknowledges; it may not publish a command, a queue
// message or a message of its own to the subject, subscribe to another
// subject, read another stream, or delete, purge or change its stream or
// delete a consumer.
func TestOutboxConsumerUser(t *testing.T) {
	th := startNode(t, node.Config{OutboxSubjects: []string{"orders.>", "audit.>"}, NATSUsers: usersFile(t, `{"users":[
		{"user":"shipping","password":"ship-pw","subjects":["orders.>"],"streams":["ORDERS"]}
	]}`)})
	ctx := ctxT(t)
	js := mustJS(t, th.nc)
	for name, subject := range map[string]string{"ORDERS": "orders.>", "AUDIT": "audit.>"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := th.c.CreateTable(ctx, "Orders"); err != nil {
		t.Fatal(err)
	}
	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	svc, err := nats.Connect(th.h.ClientURL(), nats.UserInfo("shipping", "ship-pw"), nats.CustomInboxPrefix("_INBOX_shipping"), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	sub, err := svc.SubscribeSync("orders.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Flush(); err != nil {
		t.Fatal(err)
	}
	for i, body := range []string{"7", "8"} {
		if _, err := th.c.Insert(ctx, "Orders", engine.NewEntity("2026", body), client.WithMessages(
			engine.Message{Subject: "orders.created", Body: []byte(body)},
			engine.Message{Subject: "audit.orders", Body: []byte(body)})); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
	}

	// Core NATS: what the relay publishes reaches its subscription.
	for _, want := range []string{"7", "8"} {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil || m.Subject != "orders.created" || string(m.Data) != want {
			t.Fatalf("subscription: %v %v, want %s", m, err, want)
		}
	}

	// JetStream: an ordered consumer, and a durable one acknowledged.
	sjs, err := jetstream.New(svc)
	if err != nil {
		t.Fatal(err)
	}
	ordered, err := sjs.OrderedConsumer(ctx, "ORDERS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"orders.created"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := fetchBodies(t, ordered, 2, false); got != "7,8" {
		t.Fatalf("ordered consumer: %s", got)
	}
	durable, err := sjs.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "shipping", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	if got := fetchBodies(t, durable, 2, true); got != "7,8" {
		t.Fatalf("durable consumer: %s", got)
	}
	again, err := sjs.Consumer(ctx, "ORDERS", "shipping")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := again.Info(ctx); err != nil || info.NumAckPending != 0 || info.AckFloor.Stream != 2 {
		t.Fatalf("after the acknowledgements: %+v %v", info, err)
	}
	if s, err := sjs.Stream(ctx, "ORDERS"); err != nil || s.CachedInfo().State.Msgs != 2 {
		t.Fatalf("stream info: %v", err)
	}

	// Nothing else.
	inbox := svc.NewInbox()
	for _, subj := range []string{
		"cairn.cmd.Orders",
		"cairn.cmd.devstoreaccount1.Orders",
		"cairn.tables",
		"cairn.queue.archive",
		"orders.created", // no message of its own where the relay's go
		"$JS.API.STREAM.DELETE.ORDERS",
		"$JS.API.STREAM.PURGE.ORDERS",
		"$JS.API.STREAM.UPDATE.ORDERS",
		"$JS.API.STREAM.MSG.DELETE.ORDERS",
		"$JS.API.CONSUMER.DELETE.ORDERS.shipping",
		"$JS.API.STREAM.INFO.AUDIT",
		"$JS.API.CONSUMER.CREATE.AUDIT.x",
		"$JS.API.CONSUMER.MSG.NEXT.AUDIT.x",
		"$JS.API.STREAM.INFO." + tableStream(t, js, "Orders").Config.Name,
		"$JS.API.INFO",
		"$JS.API.STREAM.LIST",
		"$KV.CAIRN_OUTBOX.pos",
	} {
		refused(t, svc, subj, func() error { return svc.PublishRequest(subj, inbox, []byte(`{}`)) })
	}
	for _, subj := range []string{"audit.>", ">", "orders", "cairn.j.>", "_INBOX.>", "$JS.API.>"} {
		refused(t, svc, subj, func() error { _, err := svc.SubscribeSync(subj); return err })
	}
	// The refused requests changed nothing.
	if s, err := js.Stream(ctx, "ORDERS"); err != nil || s.CachedInfo().State.Msgs != 2 {
		t.Fatalf("the stream after the refused requests: %v", err)
	}
	if _, err := js.Consumer(ctx, "ORDERS", "shipping"); err != nil {
		t.Fatalf("the consumer after the refused requests: %v", err)
	}
}

// fetchBodies pulls n messages from a consumer, acknowledging each when
// ack, and returns their bodies joined by commas.
func fetchBodies(t *testing.T, c jetstream.Consumer, n int, ack bool) string {
	t.Helper()
	out := ""
	for got := 0; got < n; {
		batch, err := c.Fetch(n-got, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if ack {
				if err := m.DoubleAck(ctxT(t)); err != nil {
					t.Fatalf("ack: %v", err)
				}
			}
			if out != "" {
				out += ","
			}
			out += string(m.Data())
			got++
		}
		if err := batch.Error(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
	}
	return out
}
