package node_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/functions"
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
	// A push consumer would deliver the stream's messages as the node, to
	// any subject of the node account (here the queue of a function): a
	// creation naming a deliver subject is refused, by either API.
	queues := queuedMessages(t, js)
	for _, subj := range []string{"$JS.API.CONSUMER.CREATE.ORDERS.push", "$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.push"} {
		r, err := svc.RequestWithContext(ctx, subj, []byte(`{"stream_name":"ORDERS","config":{"durable_name":"push","name":"push","deliver_subject":"cairn.queue.archive","ack_policy":"none"}}`))
		if err != nil || !strings.Contains(string(r.Data), `"error"`) || !strings.Contains(string(r.Data), "push consumer") {
			t.Fatalf("a push consumer's creation on %s: %v %s", subj, err, r.Data)
		}
	}
	if _, err := js.Consumer(ctx, "ORDERS", "push"); err == nil {
		t.Fatal("the push consumer exists")
	}
	if got := queuedMessages(t, js); got != queues {
		t.Fatalf("the queues' stream holds %d messages, %d before", got, queues)
	}

	// The refused requests changed nothing.
	if s, err := js.Stream(ctx, "ORDERS"); err != nil || s.CachedInfo().State.Msgs != 2 {
		t.Fatalf("the stream after the refused requests: %v", err)
	}
	if _, err := js.Consumer(ctx, "ORDERS", "shipping"); err != nil {
		t.Fatalf("the consumer after the refused requests: %v", err)
	}
}

// queuedMessages is how many messages the node's queue stream holds.
func queuedMessages(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	s, err := js.Stream(ctxT(t), functions.StreamName("cairn"))
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.Msgs
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

// TestConsumerOwners: two service users share a stream. Each consumer a
// user creates is marked as its own: the other may not change it (by
// either API), may create its own, and holds at most 32 of the stream;
// a refused creation changes nothing. A consumer without an owner (the
// operator's, or one made before owners were kept) is taken by the first
// user who creates it again.
func TestConsumerOwners(t *testing.T) {
	th := startNode(t, node.Config{OutboxSubjects: []string{"orders.>"}, NATSUsers: usersFile(t, `{"users":[
		{"user":"shipping","password":"ship-pw","subjects":["orders.>"],"streams":["ORDERS"]},
		{"user":"billing","password":"bill-pw","subjects":["orders.>"],"streams":["ORDERS"]}
	]}`)})
	ctx := ctxT(t)
	js := mustJS(t, th.nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	connect := func(user, password string) jetstream.JetStream {
		nc, err := nats.Connect(th.h.ClientURL(), nats.UserInfo(user, password), nats.CustomInboxPrefix("_INBOX_"+user))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return mustJS(t, nc)
	}
	shipping, billing := connect("shipping", "ship-pw"), connect("billing", "bill-pw")
	if _, err := shipping.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "ship", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	owner := func(name string) string {
		t.Helper()
		c, err := js.Consumer(ctx, "ORDERS", name)
		if err != nil {
			t.Fatalf("consumer %s: %v", name, err)
		}
		return c.CachedInfo().Config.Metadata["cairn_user"]
	}
	if got := owner("ship"); got != "shipping" {
		t.Fatalf("the durable's owner: %q", got)
	}
	// Shipping may update its own; billing may not, by either API, and
	// a forged owner in the body is overwritten.
	if _, err := shipping.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "ship", AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 5}); err != nil {
		t.Fatalf("its own update: %v", err)
	}
	if _, err := billing.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "ship", AckPolicy: jetstream.AckExplicitPolicy,
		Metadata: map[string]string{"cairn_user": "shipping"}}); err == nil || !strings.Contains(err.Error(), "another user's") {
		t.Fatalf("another user's update: %v", err)
	}
	bnc := billing.Conn()
	r, err := bnc.RequestWithContext(ctx, "$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.ship", []byte(`{"stream_name":"ORDERS","config":{"durable_name":"ship","ack_policy":"none"}}`))
	if err != nil || !strings.Contains(string(r.Data), "another user's") {
		t.Fatalf("another user's update by the older API: %v %s", err, r.Data)
	}
	c, err := js.Consumer(ctx, "ORDERS", "ship")
	if err != nil || c.CachedInfo().Config.MaxDeliver != 5 || c.CachedInfo().Config.AckPolicy != jetstream.AckExplicitPolicy {
		t.Fatalf("after the refused updates: %+v %v", c.CachedInfo().Config, err)
	}

	// A consumer the operator made has no owner: its first creator takes it.
	if _, err := js.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "shared", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := billing.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "shared", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatalf("an unowned consumer: %v", err)
	}
	if got := owner("shared"); got != "billing" {
		t.Fatalf("the unowned consumer's owner: %q", got)
	}

	// The cap: billing holds "shared" and 31 more; the 33rd is refused,
	// an update of one it holds is not, and shipping's own count is its own.
	for i := range 31 {
		if _, err := billing.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: fmt.Sprintf("b%02d", i), AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatalf("consumer %d: %v", i+2, err)
		}
	}
	if _, err := billing.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "one-more", AckPolicy: jetstream.AckExplicitPolicy}); err == nil || !strings.Contains(err.Error(), "holds 32 consumers") {
		t.Fatalf("the 33rd consumer: %v", err)
	}
	if _, err := billing.OrderedConsumer(ctx, "ORDERS", jetstream.OrderedConsumerConfig{}); err == nil {
		t.Fatal("an ordered consumer beyond the cap")
	}
	if _, err := js.Consumer(ctx, "ORDERS", "one-more"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("the refused consumer: %v", err)
	}
	if _, err := billing.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "b00", AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 3}); err != nil {
		t.Fatalf("an update at the cap: %v", err)
	}
	if _, err := shipping.OrderedConsumer(ctx, "ORDERS", jetstream.OrderedConsumerConfig{}); err != nil {
		t.Fatalf("the other user's ordered consumer: %v", err)
	}
}
