package node_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/queueadmin"
)

// TestFunctionReadsWaitForTheMessagesPosition: a queue message naming a
// write's position (Cairn-Position) is handled only once the node's view
// has that write, even when the write lands after the function started;
// an outbox message is read at its own record's position; a malformed
// position sends the message to the poison queue at once, with the reason.
func TestFunctionReadsWaitForTheMessagesPosition(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	mustTable(t, th.c, "Orders")
	first, err := th.c.Insert(ctx, "Orders", engine.NewEntity("p", "o1"))
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		body  string
		found bool
		err   error
	}
	started, results := make(chan string, 4), make(chan seen, 4)
	m := fast(functions.Manifest{Name: "reader", Trigger: functions.Trigger{Queue: "after"}})
	if err := th.h.Functions().Register(m, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		body := string(inv.Trigger().Body)
		started <- body
		e, _, err := inv.Get(ctx, "Orders", "p", body)
		results <- seen{body, e != nil, err}
		return err
	})); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(th.nc)
	if err != nil {
		t.Fatal(err)
	}
	send := func(body, position string) {
		t.Helper()
		msg := nats.NewMsg(functions.QueueSubject("cairn", "after"))
		msg.Data = []byte(body)
		if position != "" {
			msg.Header.Set(functions.HeaderPosition, position)
		}
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}

	// The message names the position the next write will have; the
	// function starts before that write exists and must read it.
	send("o2", "Orders/"+strconv.FormatUint(first.Seq+1, 10))
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the function never started")
	}
	if rep, err := th.c.Insert(ctx, "Orders", engine.NewEntity("p", "o2")); err != nil || rep.Seq != first.Seq+1 {
		t.Fatalf("insert o2: %v at %v, want position %d", err, rep, first.Seq+1)
	}
	if r := <-results; !r.found || r.err != nil {
		t.Fatalf("the function read o2 before its view had it: found %v, %v", r.found, r.err)
	}

	// An outbox message is read at its record's position.
	if _, err := th.c.Insert(ctx, "Orders", engine.NewEntity("p", "o3"), client.WithMessages(engine.Message{Queue: "after", Body: []byte("o3")})); err != nil {
		t.Fatal(err)
	}
	<-started
	if r := <-results; !r.found || r.err != nil {
		t.Fatalf("the outbox message's function did not read its write: found %v, %v", r.found, r.err)
	}

	// A malformed position is the message's fault: poisoned at once.
	send("o4", "Orders/next")
	var ps []queueadmin.PoisonMessage
	eventually(t, 20*time.Second, "the message with a bad position poisoned", func() bool {
		ps, err = th.h.QueueAdmin().Poison(ctx, "after", 0, 10)
		return err == nil && len(ps) == 1
	})
	if p := ps[0]; p.Attempts != 1 || !strings.Contains(p.Error, functions.HeaderPosition) || string(p.Body) != "o4" {
		t.Fatalf("poisoned: %+v; want one attempt and the header named", p)
	}
	select {
	case b := <-started:
		t.Fatalf("the function ran for %q", b)
	default:
	}
}
