package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/queueadmin"
)

// TestFullPoisonQueueKeepsTheMessage: a failing message whose poison
// queue holds the cap stays on its queue (not acknowledged, nothing lost),
// counted in cairn_function_poison_refused_total; once a poison message
// is deleted the move is made, with the function's error.
func TestFullPoisonQueueKeepsTheMessage(t *testing.T) {
	const maxMessages = 3
	th := startNode(t, node.Config{Functions: node.FunctionsConfig{QueueMaxMessages: maxMessages}})
	ctx := ctxT(t)
	fr := th.h.Functions()
	js, err := jetstream.New(th.nc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxMessages {
		if _, err := js.Publish(ctx, functions.QueueSubject("cairn", "doomed-poison"), fmt.Appendf(nil, "old %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.Register(fast(functions.Manifest{Name: "doomed", Trigger: functions.Trigger{Queue: "doomed"}, MaxDequeueCount: 1}), functions.NativeFunc(func(context.Context, *functions.Invocation) error {
		return errors.New("this function always fails")
	})); err != nil {
		t.Fatal(err)
	}
	if err := fr.Queues().Enqueue(ctx, "doomed", []byte("keep me")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a move to the full poison queue refused", func() bool { return fr.Stats().PoisonRefused.Load() >= 2 })
	if n := depth(t, th, "doomed"); n != 1 {
		t.Fatalf("the failing message's queue holds %d messages, want it kept", n)
	}
	if n := depth(t, th, "doomed-poison"); n != maxMessages {
		t.Fatalf("the poison queue holds %d messages, want %d", n, maxMessages)
	}
	if n := fr.Stats().Poisoned.Load(); n != 0 {
		t.Fatalf("%d messages counted as poisoned", n)
	}
	var metrics strings.Builder
	fr.WriteMetrics(&metrics)
	if !strings.Contains(metrics.String(), "cairn_function_poison_refused_total ") {
		t.Errorf("metrics lack the refused moves:\n%s", metrics.String())
	}
	old, err := th.h.QueueAdmin().Poison(ctx, "doomed", 0, 1)
	if err != nil || len(old) != 1 {
		t.Fatalf("poison list: %v %v", old, err)
	}
	if err := th.h.QueueAdmin().Delete(ctx, "doomed", old[0].Seq); err != nil {
		t.Fatal(err)
	}
	var moved *queueadmin.PoisonMessage
	eventually(t, 30*time.Second, "the message moved once there is room", func() bool {
		ps, err := th.h.QueueAdmin().Poison(ctx, "doomed", 0, 10)
		for _, p := range ps {
			if bytes.Equal(p.Body, []byte("keep me")) {
				moved = &p
			}
		}
		return err == nil && moved != nil
	})
	if moved.Error != "this function always fails" || moved.Queue != "doomed" {
		t.Errorf("moved with error %q from %q, want the function's error from doomed", moved.Error, moved.Queue)
	}
	if n := depth(t, th, "doomed"); n != 0 {
		t.Errorf("the queue still holds %d messages after the move", n)
	}
}
