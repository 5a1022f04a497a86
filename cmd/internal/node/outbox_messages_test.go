package node_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/wire"
)

// devRequest sends a JSON request as a development client (no
// credentials, as `nats req` does) and returns the decoded reply.
func devRequest(t *testing.T, nc *nats.Conn, subject, body string) *engine.Reply {
	t.Helper()
	m, err := nc.RequestWithContext(ctxT(t), subject, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	r, err := wire.DecodeReplyJSON(m.Data)
	if err != nil {
		t.Fatalf("reply %q: %v", m.Data, err)
	}
	return r
}

// TestOutboxMessagesOverNATS: a command's messages, to Cairn queues and
// to allowed NATS subjects, in JSON (as the nats CLI sends them) and in
// msgpack (the Go client), single writes and batches, are stored in the
// journal record of the write.
func TestOutboxMessagesOverNATS(t *testing.T) {
	th := startNode(t, node.Config{OutboxSubjects: []string{"orders.>", "billing.*.created"}})
	ctx := ctxT(t)
	if _, err := th.c.CreateTable(ctx, "Outbox"); err != nil {
		t.Fatal(err)
	}
	dev, err := nats.Connect(th.h.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()

	// JSON, as in docs/PROTOCOL.md.
	r := devRequest(t, dev, "cairn.cmd.Outbox", `{"op":"Insert","entity":{"PartitionKey":"2026","RowKey":"7","Total":12.5},
		"messages":[{"subject":"orders.created","id":"order-7","body":"{\"order\":7}"},{"queue":"archive","bodyBase64":"AP8="}]}`)
	if r.Error != nil || r.Seq != 1 {
		t.Fatalf("JSON insert: %+v %v", r, r.Error)
	}
	r = devRequest(t, dev, "cairn.cmd.Outbox", `{"op":"Batch","ops":[
		{"op":"InsertOrReplace","entity":{"PartitionKey":"2026","RowKey":"8"}},
		{"op":"Merge","ifMatch":"*","entity":{"PartitionKey":"2026","RowKey":"7","Paid":true}}],
		"messages":[{"subject":"billing.eu.created","body":"8"},{"subject":"orders.paid","body":"7"}]}`)
	if r.Error != nil || r.Seq != 2 {
		t.Fatalf("JSON batch: %+v %v", r, r.Error)
	}
	// msgpack, with the Go client.
	if _, err := th.c.Delete(ctx, "Outbox", "2026", "8", "*", client.WithMessages(
		engine.Message{Subject: "orders.deleted", ID: "d-8", Body: []byte{0, 1}})); err != nil {
		t.Fatal(err)
	}
	if _, err := th.c.Batch(ctx, "Outbox", []engine.Operation{
		{Op: engine.OpInsert, Entity: engine.NewEntity("2027", "1")},
		{Op: engine.OpInsert, Entity: engine.NewEntity("2027", "2")},
	}, client.WithMessages(engine.Message{Queue: "archive", Body: []byte("q")}, engine.Message{Subject: "orders.batched"})); err != nil {
		t.Fatal(err)
	}

	want := [][]engine.Message{
		{{Subject: "orders.created", ID: "order-7", Body: []byte(`{"order":7}`)}, {Queue: "archive", Body: []byte{0, 0xff}}},
		{{Subject: "billing.eu.created", Body: []byte("8")}, {Subject: "orders.paid", Body: []byte("7")}},
		{{Subject: "orders.deleted", ID: "d-8", Body: []byte{0, 1}}},
		{{Queue: "archive", Body: []byte("q")}, {Subject: "orders.batched"}},
	}
	recs := nodetest.Records(t, th.h, "Outbox")
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	for i, w := range want {
		if !reflect.DeepEqual(recs[i].Messages, w) {
			t.Errorf("record %d: messages %+v, want %+v", i+1, recs[i].Messages, w)
		}
	}
	if len(recs[1].Events) != 2 || len(recs[3].Events) != 2 {
		t.Errorf("a batch and its messages are not one record: %d and %d events", len(recs[1].Events), len(recs[3].Events))
	}
}

// TestOutboxMessagesRefusedOverNATS: a command whose messages the node
// cannot take is answered InvalidInput, in JSON and in msgpack, and
// nothing is stored: the first good write afterwards is the table's first
// record.
func TestOutboxMessagesRefusedOverNATS(t *testing.T) {
	th := startNode(t, node.Config{OutboxSubjects: []string{"orders.>"}})
	ctx := ctxT(t)
	if _, err := th.c.CreateTable(ctx, "Refused"); err != nil {
		t.Fatal(err)
	}
	dev, err := nats.Connect(th.h.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	cases := []struct {
		name string
		m    engine.Message
		says string
	}{
		{"a bad subject", engine.Message{Subject: "orders..created"}, "empty token"},
		{"the JetStream API", engine.Message{Subject: "$JS.API.STREAM.DELETE.CAIRN_QUEUES"}, "reserved"},
		{"$JS.API.x", engine.Message{Subject: "$JS.API.x"}, "reserved"},
		{"an inbox", engine.Message{Subject: "_INBOX.x"}, "reserved"},
		{"a wildcard", engine.Message{Subject: "orders.*"}, "wildcard"},
		{"a tail wildcard", engine.Message{Subject: "orders.>"}, "wildcard"},
		{"outside the allowlist", engine.Message{Subject: "shipping.created"}, "-outbox-subjects"},
		{"the node's prefix", engine.Message{Subject: "cairn.j.Refused.1.kAA"}, "own prefix"},
		{"queue and subject", engine.Message{Queue: "archive", Subject: "orders.created"}, "give one destination"},
		{"no destination", engine.Message{ID: "m", Body: []byte("x")}, "no destination"},
		{"a bad queue", engine.Message{Queue: "a.b"}, "queue name"},
	}
	for _, c := range cases {
		// msgpack, with the Go client.
		_, err := th.c.Insert(ctx, "Refused", engine.NewEntity("p", "r"), client.WithMessages(engine.Message{Queue: "archive"}, c.m))
		if engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "message 1") {
			t.Errorf("msgpack, %s: %v, want InvalidInput about message 1 saying %q", c.name, err, c.says)
		}
		// JSON, as a development client, in a batch.
		msgs, _ := json.Marshal([]map[string]string{{"queue": c.m.Queue, "subject": c.m.Subject, "id": c.m.ID, "body": string(c.m.Body)}})
		msgs = []byte(strings.NewReplacer(`"queue":"",`, "", `"subject":"",`, "", `"id":"",`, "").Replace(string(msgs)))
		r := devRequest(t, dev, "cairn.cmd.Refused", `{"op":"Batch","ops":[{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"b"}}],"messages":`+string(msgs)+`}`)
		if r.Error == nil || r.Error.Code != engine.CodeInvalidInput || !strings.Contains(r.Error.Message, c.says) {
			t.Errorf("JSON, %s (%s): %+v, want InvalidInput saying %q", c.name, msgs, r.Error, c.says)
		}
	}
	rep, err := th.c.Insert(ctx, "Refused", engine.NewEntity("p", "r"), client.WithMessages(engine.Message{Subject: "orders.created"}))
	if err != nil || rep.Seq != 1 {
		t.Fatalf("first good write: %+v, %v", rep, err)
	}
	if recs := nodetest.Records(t, th.h, "Refused"); len(recs) != 1 || !reflect.DeepEqual(recs[0].Messages, []engine.Message{{Subject: "orders.created"}}) {
		t.Fatalf("records: %+v", recs)
	}
}

// TestOutboxSubjectsOffByDefault: without -outbox-subjects a node takes
// messages to Cairn queues only and says which flag allows subjects.
func TestOutboxSubjectsOffByDefault(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	if _, err := th.c.CreateTable(ctx, "Plain"); err != nil {
		t.Fatal(err)
	}
	_, err := th.c.Insert(ctx, "Plain", engine.NewEntity("p", "1"), client.WithMessages(engine.Message{Subject: "orders.created"}))
	if engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), "-outbox-subjects") {
		t.Fatalf("a subject on a node that allows none: %v", err)
	}
	rep, err := th.c.Insert(ctx, "Plain", engine.NewEntity("p", "1"), client.WithMessages(engine.Message{Queue: "archive", Body: []byte("x")}))
	if err != nil || rep.Seq != 1 {
		t.Fatalf("a queue: %+v, %v", rep, err)
	}
}
