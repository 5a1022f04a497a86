package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/admin"
	"github.com/cairn-dev/cairn/functions/queueadmin"
)

// depth is how many messages a queue holds.
func depth(t testing.TB, th *testHost, queue string) uint64 {
	t.Helper()
	n, err := th.h.Functions().Queues().Depth(ctxT(t), queue)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// consume takes n messages of a queue as the node user and acknowledges
// them (the server has removed them once each DoubleAck returns).
func consume(t testing.TB, th *testHost, queue string, n int) {
	t.Helper()
	ctx := ctxT(t)
	js, err := jetstream.New(th.nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, functions.StreamName("cairn"), jetstream.ConsumerConfig{
		Durable:       "test-" + queue,
		FilterSubject: functions.QueueSubject("cairn", queue),
		AckPolicy:     jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	for got := 0; got < n; {
		batch, err := cons.Fetch(n-got, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
			got++
		}
	}
	if err := js.DeleteConsumer(ctx, functions.StreamName("cairn"), "test-"+queue); err != nil {
		t.Fatal(err)
	}
}

// enqueueHTTP posts a message with the operator token and returns the
// status and the error code of the answer.
func enqueueHTTP(t *testing.T, th *testHost, queue, body string) (int, string) {
	t.Helper()
	resp := operatorDo(t, th.h.OperatorToken(), "POST", th.h.HTTPURL()+admin.Prefix+"queues/"+queue, strings.NewReader(body))
	defer resp.Body.Close()
	var e struct{ Code string }
	if resp.StatusCode != http.StatusAccepted {
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatalf("POST %s: %s with an undecodable body: %v", queue, resp.Status, err)
		}
	}
	return resp.StatusCode, e.Code
}

// wantFull checks that a JetStream publish was refused by the queue's cap.
func wantFull(t *testing.T, err error, what string) {
	t.Helper()
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Description, "maximum messages per subject") {
		t.Fatalf("%s: %v, want the server's refusal of a full queue", what, err)
	}
}

// TestQueueCapRefusesEveryPublisher: with -queue-max-messages 5, a
// development client publishing straight to cairn.queue.<q> gets the
// server's refusal past the fifth message (and one that asks for no
// acknowledgement stores nothing), the operators' API answers 503
// QueueBacklogExceeded, a function's message to the full queue fails its
// invocation with that code; the queue holds exactly 5 messages. Once two
// are consumed, two more are taken and the next one is refused again.
func TestQueueCapRefusesEveryPublisher(t *testing.T) {
	const maxMessages = 5
	th := startNode(t, node.Config{Functions: node.FunctionsConfig{QueueMaxMessages: maxMessages}})
	ctx := ctxT(t)
	if got := th.h.Functions().Queues().Max(); got != maxMessages {
		t.Fatalf("the stream's cap is %d, want %d", got, maxMessages)
	}
	dev, err := nats.Connect(th.h.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	devJS, err := jetstream.New(dev)
	if err != nil {
		t.Fatal(err)
	}
	subject := functions.QueueSubject("cairn", "capped")
	for i := range maxMessages {
		if _, err := devJS.Publish(ctx, subject, fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	// Without an acknowledgement the client learns nothing, and nothing
	// is stored: the acknowledged publish after it, on the same subject,
	// is answered once the server has dealt with both.
	if err := dev.Publish(subject, []byte("fire and forget")); err != nil {
		t.Fatal(err)
	}
	_, err = devJS.Publish(ctx, subject, []byte("one too many"))
	wantFull(t, err, "a development client's publish past the cap")
	if status, code := enqueueHTTP(t, th, "capped", "over HTTP"); status != http.StatusServiceUnavailable || code != string(functions.CodeQueueBacklogExceeded) {
		t.Fatalf("POST past the cap: %d %s, want 503 %s", status, code, functions.CodeQueueBacklogExceeded)
	}
	err = th.h.Functions().Queues().Enqueue(ctx, "capped", []byte("as the CLI"))
	if engine.ErrorCode(err) != functions.CodeQueueBacklogExceeded {
		t.Fatalf("Queues.Enqueue past the cap: %v", err)
	}
	t.Log(err)

	// A function's message to the full queue: the invocation fails with
	// the code and, at its single attempt, goes to the poison queue.
	fr := th.h.Functions()
	if err := fr.Register(fast(functions.Manifest{Name: "feeder", Trigger: functions.Trigger{Queue: "feed"}, MaxDequeueCount: 1}), functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		return inv.Enqueue(ctx, "capped", []byte("from a function"))
	})); err != nil {
		t.Fatal(err)
	}
	if err := fr.Queues().Enqueue(ctx, "feed", []byte("go")); err != nil {
		t.Fatal(err)
	}
	var poisoned []queueadmin.PoisonMessage
	eventually(t, 30*time.Second, "the feeder's message poisoned", func() bool {
		poisoned, err = th.h.QueueAdmin().Poison(ctx, "feed", 0, 10)
		return err == nil && len(poisoned) == 1
	})
	if !strings.Contains(poisoned[0].Error, string(functions.CodeQueueBacklogExceeded)) {
		t.Fatalf("the feeder failed with %q, want %s", poisoned[0].Error, functions.CodeQueueBacklogExceeded)
	}
	if n := depth(t, th, "capped"); n != maxMessages {
		t.Fatalf("the queue holds %d messages, want its cap %d", n, maxMessages)
	}
	// The operators' API and the function: the refusals the runner saw
	// (the clients' own publishes are between them and the server).
	if n := fr.Stats().QueueFull.Load(); n != 2 {
		t.Errorf("%d refusals counted, want 2", n)
	}
	var metrics strings.Builder
	fr.WriteMetrics(&metrics)
	if !strings.Contains(metrics.String(), "cairn_queue_full_total 2\n") {
		t.Errorf("metrics lack the refusals:\n%s", metrics.String())
	}

	consume(t, th, "capped", 2)
	if _, err := devJS.Publish(ctx, subject, []byte("room again")); err != nil {
		t.Fatalf("after consuming: %v", err)
	}
	if status, code := enqueueHTTP(t, th, "capped", "over HTTP again"); status != http.StatusAccepted {
		t.Fatalf("POST after consuming: %d %s", status, code)
	}
	_, err = devJS.Publish(ctx, subject, []byte("full again"))
	wantFull(t, err, "a publish past the cap after consuming")
	if n := depth(t, th, "capped"); n != maxMessages {
		t.Fatalf("the queue holds %d messages, want its cap %d", n, maxMessages)
	}
	// Other queues have their own room.
	if _, err := devJS.Publish(ctx, functions.QueueSubject("cairn", "other"), []byte("x")); err != nil {
		t.Fatal(err)
	}
}

// TestQueueCapOnAnUpgradedStream: a queue stream made before the cap
// (no per-subject limit) gets it when a node starts; a queue that already
// holds more than the cap keeps every message and the cap stays at its
// length until it drains, and the next start lowers it.
func TestQueueCapOnAnUpgradedStream(t *testing.T) {
	dir := t.TempDir()
	th := startNode(t, node.Config{DataDir: dir, Functions: node.FunctionsConfig{QueueMaxMessages: 5}})
	ctx := ctxT(t)
	js, err := jetstream.New(th.nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, functions.StreamName("cairn"))
	if err != nil {
		t.Fatal(err)
	}
	// The stream as nodes made it before the cap.
	cfg := s.CachedInfo().Config
	cfg.MaxMsgsPerSubject, cfg.Discard, cfg.DiscardNewPerSubject = -1, jetstream.DiscardOld, false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		if _, err := js.Publish(ctx, functions.QueueSubject("cairn", "deep"), fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	th.stop(t)

	th = startNode(t, node.Config{DataDir: dir, Functions: node.FunctionsConfig{QueueMaxMessages: 5}})
	js, err = jetstream.New(th.nc)
	if err != nil {
		t.Fatal(err)
	}
	if got := th.h.Functions().Queues().Max(); got != 7 {
		t.Fatalf("cap %d with a queue of 7, want 7 (lower would delete messages)", got)
	}
	if n := depth(t, th, "deep"); n != 7 {
		t.Fatalf("the queue holds %d messages after the upgrade, want all 7", n)
	}
	_, err = js.Publish(ctx, functions.QueueSubject("cairn", "deep"), []byte("eighth"))
	wantFull(t, err, "a publish past the raised cap")
	consume(t, th, "deep", 4)
	th.stop(t)

	th = startNode(t, node.Config{DataDir: dir, Functions: node.FunctionsConfig{QueueMaxMessages: 5}})
	if got := th.h.Functions().Queues().Max(); got != 5 {
		t.Fatalf("cap %d once the queue holds 3, want 5", got)
	}
	if n := depth(t, th, "deep"); n != 3 {
		t.Fatalf("the queue holds %d messages, want 3", n)
	}
}
