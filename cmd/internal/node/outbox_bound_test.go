package node_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
)

// jsonMessages is a JSON array of n messages to queue.
func jsonMessages(queue string, n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(`{"queue":"`+queue+`"},`, n), ",") + "]"
}

// TestOutboxMessageBound: a command carries at most
// engine.MaxCommandMessages outbox messages, whichever door it comes
// through. One more is refused with InvalidInput in JSON (a development
// client, as `nats req` sends it; and 300,000 of them, 4.2 MB, as the
// security review sent), in msgpack (the Go client) and over HTTP
// (X-Cairn-Messages), and nothing is stored or relayed: the table's first
// record is the command of exactly the bound sent afterwards, and its
// messages are all its queue ever gets.
func TestOutboxMessageBound(t *testing.T) {
	th := startNode(t, node.Config{Functions: node.FunctionsConfig{NoBuiltins: true}})
	ctx := ctxT(t)
	const table, queue = "Bounded", "bounded"
	mustTable(t, th.c, table)
	dev, err := nats.Connect(th.h.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()

	insert := func(rk, msgs string) string {
		return `{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"` + rk + `"},"messages":` + msgs + `}`
	}
	for _, n := range []int{engine.MaxCommandMessages + 1, 300_000} {
		r := devRequest(t, dev, "cairn.cmd."+table, insert("json", jsonMessages(queue, n)))
		if r.Error == nil || r.Error.Code != engine.CodeInvalidInput || !strings.Contains(r.Error.Message, "at most") {
			t.Fatalf("JSON with %d messages: %+v, want InvalidInput naming the bound", n, r.Error)
		}
	}
	batch := `{"op":"Batch","ops":[{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"b"}}],"messages":` + jsonMessages(queue, engine.MaxCommandMessages+1) + `}`
	if r := devRequest(t, dev, "cairn.cmd."+table, batch); r.Error == nil || r.Error.Code != engine.CodeInvalidInput {
		t.Fatalf("a JSON batch with %d messages: %+v, want InvalidInput", engine.MaxCommandMessages+1, r.Error)
	}

	msgs := make([]engine.Message, engine.MaxCommandMessages+1)
	for i := range msgs {
		msgs[i] = engine.Message{Queue: queue}
	}
	_, err = th.c.Insert(ctx, table, engine.NewEntity("p", "msgpack"), client.WithMessages(msgs...))
	if engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Fatalf("msgpack with %d messages: %v, want InvalidInput", len(msgs), err)
	}

	sdk := accountService(t, th.h, httpapi.DevAccountName, httpapi.DevAccountKey).NewClient(table)
	hctx := policy.WithHTTPHeader(ctx, http.Header{httpapi.MessagesHeader: {jsonMessages(queue, engine.MaxCommandMessages+1)}})
	_, err = sdk.AddEntity(hctx, []byte(`{"PartitionKey":"p","RowKey":"http"}`), nil)
	if code := azCode(err); code != string(engine.CodeInvalidInput) {
		t.Fatalf("HTTP with %d messages: %v (%q), want InvalidInput", engine.MaxCommandMessages+1, err, code)
	}

	// Exactly the bound is taken, and relayed.
	start := time.Now()
	if r := devRequest(t, dev, "cairn.cmd."+table, insert("bound", jsonMessages(queue, engine.MaxCommandMessages))); r.Error != nil || r.Seq != 1 {
		t.Fatalf("JSON with %d messages: %+v, want the table's first record", engine.MaxCommandMessages, r)
	}
	queues := th.h.Functions().Queues()
	var n uint64
	eventually(t, 30*time.Second, "the bound's messages relayed", func() bool {
		n, err = queues.Depth(context.Background(), queue)
		return err == nil && n >= engine.MaxCommandMessages
	})
	t.Logf("%d messages of one command relayed %v after its reply", n, time.Since(start))
	if n != engine.MaxCommandMessages {
		t.Fatalf("the queue holds %d messages, want %d", n, engine.MaxCommandMessages)
	}
	if recs := nodetest.Records(t, th.h, table); len(recs) != 1 || len(recs[0].Messages) != engine.MaxCommandMessages {
		t.Fatalf("%d records, want the one of the bound's messages", len(recs))
	}
}
