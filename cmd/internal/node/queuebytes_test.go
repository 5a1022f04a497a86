package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/outbox"
)

// queueMaxBytes is the queue stream's bound in these tests: twice the
// least a node takes, so that it fills in a few dozen publishes.
const queueMaxBytes = 2 * functions.MinQueueMaxBytes

// sprayBody is the body of the publishes that fill the stream.
var sprayBody = make([]byte, 64<<10)

// streamState is what the queue stream holds.
func streamState(t testing.TB, th *testHost) jetstream.StreamState {
	t.Helper()
	js, err := jetstream.New(th.nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctxT(t), functions.StreamName("cairn"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}

// wantStreamFull checks that a JetStream publish was refused by the
// stream's bound of bytes.
func wantStreamFull(t *testing.T, err error, what string) {
	t.Helper()
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Description, "maximum bytes") {
		t.Fatalf("%s: %v, want the server's refusal of a full stream", what, err)
	}
}

// fill publishes to queues spray-0, spray-1, … as js until the stream
// refuses even an empty message for its bound, and returns how many it
// took: bodies of sprayBody's size first, then ever smaller ones into what
// is left. A stream that takes more than its bound's worth fails the test.
func fill(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	ctx := ctxT(t)
	most := int(queueMaxBytes)/len(sprayBody) + 1
	i := 0
	for _, size := range []int{len(sprayBody), 4 << 10, 256, 0} {
		for ; ; i++ {
			_, err := js.Publish(ctx, functions.QueueSubject("cairn", fmt.Sprintf("spray-%d", i)), sprayBody[:size])
			if err != nil {
				wantStreamFull(t, err, fmt.Sprintf("publish %d of %d bytes", i, size))
				break
			}
			if size == len(sprayBody) && i > most {
				t.Fatalf("the queue stream took %d messages of %d bytes, past its bound of %d", i+1, size, queueMaxBytes)
			}
		}
	}
	return i
}

// devJetStream connects to th as a development client (no credentials).
func devJetStream(t *testing.T, th *testHost) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	dev, err := nats.Connect(th.h.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dev.Close)
	devJS, err := jetstream.New(dev)
	if err != nil {
		t.Fatal(err)
	}
	return dev, devJS
}

// TestQueueSprayOfSubjects: messages published to subjects of more than
// one token under cairn.queue. are stored nowhere. A development client
// may not publish them at all (its permissions name one token, a queue's
// name); the node user may, and the queue stream, which captures queue
// names only, stores none of them.
func TestQueueSprayOfSubjects(t *testing.T) {
	th := startNode(t, node.Config{Functions: node.FunctionsConfig{NoBuiltins: true}})
	dev, err := nats.Connect(th.h.ClientURL(), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	refused(t, dev, "cairn.queue.spray.1", func() error { return dev.Publish("cairn.queue.spray.1", sprayBody[:1024]) })
	for i := range 1000 {
		if err := th.nc.Publish(fmt.Sprintf("cairn.queue.spray.%d", i), sprayBody[:1024]); err != nil {
			t.Fatal(err)
		}
	}
	// The flush returns once the server has read every publish before it.
	if err := th.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := mustJS(t, th.nc).Publish(ctxT(t), "cairn.queue.spray.acknowledged", []byte("x")); err == nil {
		t.Fatal("a JetStream publish to cairn.queue.spray.acknowledged was stored")
	}
	if st := streamState(t, th); st.Msgs != 0 || st.Bytes != 0 {
		t.Fatalf("the queue stream holds %d messages, %d bytes, of subjects that name no queue", st.Msgs, st.Bytes)
	}
}

// TestQueueSprayOfQueues: messages a development client publishes to ever
// new queues stop at -queue-max-bytes: the client's JetStream publish is
// refused, the operators' API answers 503 QueueBacklogExceeded, and so
// does the runner's own Enqueue; /metrics shows the stream's bytes against
// its bound and counts the refusals. Consuming makes room again.
func TestQueueSprayOfQueues(t *testing.T) {
	th := startNode(t, node.Config{Functions: node.FunctionsConfig{NoBuiltins: true, QueueMaxBytes: queueMaxBytes}})
	ctx := ctxT(t)
	if got := th.h.Functions().Queues().MaxBytes(); got != queueMaxBytes {
		t.Fatalf("the stream's bound is %d bytes, want %d", got, queueMaxBytes)
	}
	dev, devJS := devJetStream(t, th)

	// Queues, one message each, up to the bound.
	n := fill(t, devJS)
	st := streamState(t, th)
	if st.Bytes > queueMaxBytes || int(st.Msgs) != n {
		t.Fatalf("the queue stream holds %d messages, %d bytes, want the %d taken within %d", st.Msgs, st.Bytes, n, queueMaxBytes)
	}
	t.Logf("%d messages taken, %d bytes stored, of %d", n, st.Bytes, queueMaxBytes)
	if err := dev.Publish(functions.QueueSubject("cairn", "fire-and-forget"), sprayBody); err != nil {
		t.Fatal(err)
	}
	_, err := devJS.Publish(ctx, functions.QueueSubject("cairn", "another"), sprayBody)
	wantStreamFull(t, err, "a publish to a new queue of the full stream")
	if status, code := enqueueHTTP(t, th, "another", string(sprayBody)); status != http.StatusServiceUnavailable || code != string(functions.CodeQueueBacklogExceeded) {
		t.Fatalf("POST to the full stream: %d %s, want 503 %s", status, code, functions.CodeQueueBacklogExceeded)
	}
	err = th.h.Functions().Queues().Enqueue(ctx, "another", sprayBody)
	if engine.ErrorCode(err) != functions.CodeQueueBacklogExceeded || !strings.Contains(err.Error(), "-queue-max-bytes") {
		t.Fatalf("Queues.Enqueue to the full stream: %v", err)
	}
	if got := streamState(t, th); got.Msgs != st.Msgs {
		t.Fatalf("the full stream took %d more messages", got.Msgs-st.Msgs)
	}

	resp := operatorDo(t, th.h.OperatorToken(), "GET", th.h.HTTPURL()+"/metrics", nil)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("cairn_queue_stream_bytes %d\n", st.Bytes),
		fmt.Sprintf("cairn_queue_stream_max_bytes %d\n", queueMaxBytes),
		"cairn_queue_full_total 1\n", // the operators' API; a client's refusals are the server's
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// Room again once a queue is consumed.
	consume(t, th, "spray-0", 1)
	if _, err := devJS.Publish(ctx, functions.QueueSubject("cairn", "another"), sprayBody); err != nil {
		t.Fatalf("after consuming: %v", err)
	}
}

// TestQueueStreamFullRelay: an outbox message its full queue stream
// refuses blocks its partition, shown with the server's reason, and is
// published once the stream has room: retried, not lost (the server keeps
// no id of a message it did not store, so the retry is no duplicate), and
// stored once.
func TestQueueStreamFullRelay(t *testing.T) {
	th := startNode(t, node.Config{Functions: node.FunctionsConfig{NoBuiltins: true, QueueMaxBytes: queueMaxBytes}})
	ctx := ctxT(t)
	mustTable(t, th.c, "Orders")
	js, err := jetstream.New(th.nc)
	if err != nil {
		t.Fatal(err)
	}
	n := fill(t, js)

	if _, err := th.c.Insert(ctx, "Orders", engine.NewEntity("eu", "1"),
		client.WithMessages(engine.Message{Queue: "shipping", Body: []byte("order 1")})); err != nil {
		t.Fatal(err)
	}
	var status string
	eventually(t, 30*time.Second, "the message shown blocked by the full stream", func() bool {
		resp := operatorDo(t, th.h.OperatorToken(), "GET", th.h.HTTPURL()+outbox.AdminPath, nil)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		status = string(b)
		return err == nil && strings.Contains(status, `"destination":"cairn.queue.shipping"`) && strings.Contains(status, "maximum bytes")
	})
	t.Logf("blocked: %s", status)
	queues := th.h.Functions().Queues()
	if d, err := queues.Depth(ctx, "shipping"); err != nil || d != 0 {
		t.Fatalf("the full stream took the message: %d, %v", d, err)
	}

	// Room: the partition drains on its own.
	for i := range n {
		if _, err := th.h.QueueAdmin().Purge(ctx, fmt.Sprintf("spray-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 60*time.Second, "the message relayed once the stream has room", func() bool {
		d, err := queues.Depth(context.Background(), "shipping")
		return err == nil && d > 0
	})
	ms, err := th.h.QueueAdmin().Peek(ctx, "shipping", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || string(ms[0].Body) != "order 1" {
		t.Fatalf("the queue holds %d messages, want the one relayed: %+v", len(ms), ms)
	}
}

// TestQueueStreamUpgrade: a queue stream made before these settings
// (capturing cairn.queue.>, no bound of bytes) gets them when a node
// starts: its subjects become the queues' only, the messages it took on
// longer subjects are purged, and the bound is set even below what it
// holds, deleting nothing: every queue's messages stay, and new ones are
// refused until it drains.
func TestQueueStreamUpgrade(t *testing.T) {
	dir := t.TempDir()
	th := startNode(t, node.Config{DataDir: dir, Functions: node.FunctionsConfig{NoBuiltins: true}})
	ctx := ctxT(t)
	js, err := jetstream.New(th.nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, functions.StreamName("cairn"))
	if err != nil {
		t.Fatal(err)
	}
	// The stream as nodes made it before.
	cfg := s.CachedInfo().Config
	cfg.Subjects, cfg.MaxBytes = []string{"cairn.queue.>"}, -1
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	const kept, strays = 40, 25
	for i := range kept {
		if _, err := js.Publish(ctx, functions.QueueSubject("cairn", "deep"), sprayBody); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	for i := range strays {
		if _, err := js.Publish(ctx, fmt.Sprintf("cairn.queue.spray.%d", i), sprayBody[:100]); err != nil {
			t.Fatalf("stray %d: %v", i, err)
		}
	}
	before := streamState(t, th)
	th.stop(t)

	th = startNode(t, node.Config{DataDir: dir, Functions: node.FunctionsConfig{NoBuiltins: true, QueueMaxBytes: queueMaxBytes}})
	js, err = jetstream.New(th.nc)
	if err != nil {
		t.Fatal(err)
	}
	if s, err = js.Stream(ctx, functions.StreamName("cairn")); err != nil {
		t.Fatal(err)
	}
	got := s.CachedInfo().Config
	if len(got.Subjects) != 1 || got.Subjects[0] != "cairn.queue.*" || got.MaxBytes != queueMaxBytes || got.Discard != jetstream.DiscardNew {
		t.Fatalf("the upgraded stream: subjects %v, max bytes %d, discard %v", got.Subjects, got.MaxBytes, got.Discard)
	}
	st := streamState(t, th)
	if st.Msgs != kept || before.Msgs != kept+strays {
		t.Fatalf("the stream holds %d messages (%d before the upgrade), want the queue's %d", st.Msgs, before.Msgs, kept)
	}
	if n := depth(t, th, "deep"); n != kept {
		t.Fatalf("the queue holds %d messages after the upgrade, want all %d", n, kept)
	}
	if st.Bytes <= queueMaxBytes {
		t.Fatalf("the stream holds %d bytes: the test wants more than the bound %d", st.Bytes, queueMaxBytes)
	}
	_, err = js.Publish(ctx, functions.QueueSubject("cairn", "deep"), []byte("one more"))
	wantStreamFull(t, err, "a publish to the stream over its new bound")
	if _, err := js.Publish(ctx, "cairn.queue.spray.new", []byte("x")); err == nil {
		t.Fatal("a publish to cairn.queue.spray.new was stored after the upgrade")
	}
	consume(t, th, "deep", kept)
	if _, err := js.Publish(ctx, functions.QueueSubject("cairn", "deep"), []byte("drained")); err != nil {
		t.Fatalf("after draining: %v", err)
	}
}
