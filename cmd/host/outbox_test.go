package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
)

// TestOutboxCLI: a message its queue refuses (the queue is full) shows up
// in "outbox status" with its partition and position; "outbox skip" passes
// it, and the relay catches up.
func TestOutboxCLI(t *testing.T) {
	ctx := context.Background()
	h, _ := nodetest.Start(t, node.Config{Functions: node.FunctionsConfig{NoBuiltins: true, QueueMaxMessages: 1}})
	url, creds := h.ClientURL(), h.NATSCredsFile()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := client.New(nc)
	if _, err := c.CreateTable(ctx, "Orders"); err != nil {
		t.Fatal(err)
	}
	var seq uint64
	for i := 1; i <= 2; i++ {
		r, err := c.Insert(ctx, "Orders", engine.NewEntity("eu", fmt.Sprint(i)),
			client.WithMessages(engine.Message{Queue: "small", Body: []byte(fmt.Sprint("order ", i))}))
		if err != nil {
			t.Fatal(err)
		}
		seq = r.Seq
	}
	status := func() string {
		out, err := runCLI(t, "outbox", "-nats-url", url, "-nats-creds", creds, "status")
		if err != nil {
			t.Fatalf("outbox status: %v\n%s", err, out)
		}
		return out
	}
	want := fmt.Sprintf(`partition "eu" blocked at record %d message 0 → cairn.queue.small`, seq)
	eventually(t, 30*time.Second, "the second message shown blocked", func() bool { return strings.Contains(status(), want) })
	if out, err := runCLI(t, "outbox", "-nats-url", url, "-nats-creds", creds, "skip", "Orders", fmt.Sprint(seq), "0"); err != nil || !strings.Contains(out, "skip message 0 of record") {
		t.Fatalf("outbox skip: %v\n%s", err, out)
	}
	eventually(t, 30*time.Second, "the relay past the skipped message", func() bool {
		lines := strings.Split(strings.TrimSpace(status()), "\n")
		return len(lines) == 2 && strings.Join(strings.Fields(lines[1])[1:], " ") == fmt.Sprintf("%d %d 0 0.0 0", seq, seq)
	})
	if out, err := runCLI(t, "outbox", "-nats-url", url, "-nats-creds", creds, "skip", "Nope", "1", "0"); err == nil {
		t.Fatalf("skip on a table that does not exist: %s", out)
	}
}

// TestOutboxCLIArguments: a flag written after the command is taken (here
// -data, whose missing URL file the error names), and arguments a command
// does not take are refused before anything connects.
func TestOutboxCLIArguments(t *testing.T) {
	for _, args := range [][]string{
		{"outbox", "status", "-data", "/nowhere"},
		{"outbox", "retry", "Orders", "-data", "/nowhere"},
		{"outbox", "skip", "Orders", "1", "0", "-data", "/nowhere"},
	} {
		out, err := runCLI(t, args...)
		if err == nil || !strings.Contains(err.Error(), "/nowhere/nats/url does not exist") {
			t.Errorf("%q: %v, want the error of -data /nowhere\n%s", args, err, out)
		}
	}
	if out, err := runCLI(t, "outbox", "status", "extra", "-data", "/nowhere"); err == nil || !strings.Contains(err.Error(), "1 arguments, want 0") {
		t.Errorf("an extra argument: %v\n%s", err, out)
	}
}
