package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/outbox"
)

// queueBodies reads every message of a queue from the queues' stream
// (direct gets: nothing is consumed), in stream order.
func queueBodies(t *testing.T, ctx context.Context, js jetstream.JetStream, queue string) []string {
	t.Helper()
	s, err := js.Stream(ctx, functions.StreamName("cairn"))
	if err != nil {
		t.Fatal(err)
	}
	st := s.CachedInfo().State
	var out []string
	for seq := st.FirstSeq; seq <= st.LastSeq && st.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(functions.QueueSubject("cairn", queue)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(m.Data))
		seq = m.Sequence
	}
	return out
}

// waitRelayed waits until the relay's stored position of table reaches the
// table's journal head.
func waitRelayed(t *testing.T, ctx context.Context, js jetstream.JetStream, table string, epoch uint64) {
	t.Helper()
	stream := journal.StreamName("cairn", table, epoch)
	for {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		kv, err := js.KeyValue(ctx, outbox.BucketName("cairn"))
		if err == nil {
			e, err := kv.Get(ctx, "pos."+stream)
			if err == nil && string(e.Value()) == strconv.FormatUint(s.CachedInfo().State.LastSeq, 10) {
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the relay did not reach the head of %s (%d)", table, s.CachedInfo().State.LastSeq)
		}
		time.Sleep(20 * time.Millisecond) // polling the bucket, not timing the relay
	}
}

// debugLog returns a logger at Debug whose lines the test prints if it
// fails.
func debugLog(t *testing.T) *slog.Logger {
	t.Helper()
	var logb lockedBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logb.String())
		}
	})
	return slog.New(slog.NewTextHandler(&logb, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// devClient connects to h as the development user, the connection closed
// when the test ends.
func devClient(t *testing.T, h *node.Node) *client.Client {
	t.Helper()
	dev, err := nats.Connect(h.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dev.Close)
	return client.New(dev)
}

// TestOutboxOverNATS: the documented messages field is relayed to its
// queue after the write; a command refused stores and sends nothing.
func TestOutboxOverNATS(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{Log: debugLog(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cl := devClient(t, h)
	info, err := cl.CreateTable(ctx, "Orders")
	if err != nil {
		t.Fatal(err)
	}
	msg := func(body string) client.CallOption {
		return client.WithMessages(engine.Message{Queue: "mail", Body: []byte(body)})
	}
	if _, err := cl.Insert(ctx, "Orders", engine.NewEntity("p", "1"), msg("p:1")); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Insert(ctx, "Orders", engine.NewEntity("p", "1"), msg("refused")); engine.ErrorCode(err) != engine.CodeEntityAlreadyExists {
		t.Fatalf("second insert: %v", err)
	}
	if _, err := cl.InsertOrMerge(ctx, "Orders", engine.NewEntity("p", "1"), msg("p:2")); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nodetest.Connect(t, h))
	waitRelayed(t, ctx, js, "Orders", info.Epoch)
	if got := queueBodies(t, ctx, js, "mail"); strings.Join(got, ",") != "p:1,p:2" {
		t.Fatalf("queue mail holds %v", got)
	}
	// The operators' view, behind the operator token, and /metrics.
	get := func(path, token string) (int, string) {
		resp := operatorDo(t, token, http.MethodGet, h.HTTPURL()+path, nil)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/$cairn/outbox", ""); code != http.StatusUnauthorized {
		t.Fatalf("the outbox view without the token: %d", code)
	}
	code, body := get("/$cairn/outbox", h.OperatorToken())
	stream := journal.StreamName("cairn", "Orders", info.Epoch)
	if code != http.StatusOK || !strings.Contains(body, `"stream":"`+stream+`","position":2,"head":2`) {
		t.Fatalf("the outbox view: %d %s", code, body)
	}
	// The relay's own status follows its stored position within a tick.
	eventually(t, 10*time.Second, "/metrics shows the relay's series", func() bool {
		_, m := get("/metrics", h.OperatorToken())
		return strings.Contains(m, `cairn_outbox_position{table="Orders"} 2`) && strings.Contains(m, "cairn_outbox_delivered_total 2")
	})
}

// TestOutboxSurvivesSIGKILL: under a write load whose commands each carry
// one message, the node is killed with SIGKILL at a random moment and
// restarted. Then every message of every acknowledged write is in its
// queue exactly once, each partition's in the order of its writes, and
// every message in the queue belongs to a write the table holds.
func TestOutboxSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	r := seededRand(t, 2)
	dir, listen := t.TempDir(), nodetest.FreeAddr(t)
	c1 := nodetest.StartChild(t, nodetest.ChildConfig{DataDir: dir, NATSListen: listen, NoBuiltins: true})
	cl := retryingClient(t, listen)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	info, err := cl.CreateTable(ctx, "Outbox")
	if err != nil {
		t.Fatal(err)
	}
	const workers = 6
	var stop atomic.Bool
	var mu sync.Mutex
	acked := map[string]int{} // partition → writes acknowledged (rows 1..n)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pk := fmt.Sprintf("p%d", w)
			for k := 1; !stop.Load(); k++ {
				body := fmt.Sprintf("%s:%d", pk, k)
				_, err := cl.Insert(ctx, "Outbox", engine.NewEntity(pk, strconv.Itoa(k)),
					client.WithID(body), client.WithMessages(engine.Message{Queue: "crash", Body: []byte(body)}))
				if err != nil {
					errs <- fmt.Errorf("write %s: %w", body, err)
					return
				}
				mu.Lock()
				acked[pk] = k
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Duration(200+r.IntN(800)) * time.Millisecond)
	c1.Kill(t)
	c2 := nodetest.StartChild(t, nodetest.ChildConfig{DataDir: dir, NATSListen: listen, NoBuiltins: true})
	time.Sleep(time.Duration(200+r.IntN(500)) * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%v\nnode log:\n%s", err, c2.Tail())
	}

	creds, err := natsauth.Read(natsauth.Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	node, err := nats.Connect("nats://"+listen, creds.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	js, _ := jetstream.New(node)
	waitRelayed(t, ctx, js, "Outbox", info.Epoch)
	checkDelivered(t, queueBodies(t, ctx, js, "crash"), acked, func(key string, k int) error {
		_, _, err := cl.Retrieve(ctx, "Outbox", key, strconv.Itoa(k))
		return err
	})
}

// TestOutboxOneOfTwoNodesKilled: two nodes share the relay's shards; one
// is killed with SIGKILL under a write load with messages spread over
// several tables. The other takes its shards over, and every acknowledged
// write's message is delivered exactly once, in partition order.
func TestOutboxOneOfTwoNodesKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	a, _ := nodetest.Start(t, node.Config{Functions: node.FunctionsConfig{NoBuiltins: true}})
	b := nodetest.StartChild(t, nodetest.ChildConfig{NATSURL: a.ClientURL(), NATSCreds: a.NATSCredsFile(), NoBuiltins: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	nc, err := nats.Connect(a.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cl := client.New(nc, client.WithTimeout(5*time.Second), client.WithAttempts(50))
	js, _ := jetstream.New(nodetest.Connect(t, a))
	tables := map[string]uint64{}
	for i := range 8 {
		name := fmt.Sprintf("Shared%d", i)
		info, err := cl.CreateTable(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		tables[name] = info.Epoch
	}
	// Both nodes hold shards before the load starts.
	kv, err := js.KeyValue(ctx, outbox.BucketName("cairn"))
	if err != nil {
		t.Fatal(err)
	}
	for holders := map[string]bool{}; len(holders) < 2; {
		holders = map[string]bool{}
		keys, _ := kv.ListKeysFiltered(ctx, "lease.>")
		for k := range keys.Keys() {
			if e, err := kv.Get(ctx, k); err == nil {
				holders[string(e.Value())] = true
			}
		}
		if ctx.Err() != nil {
			t.Fatal("the second node never took a shard")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var stop atomic.Bool
	var mu sync.Mutex
	acked := map[string]int{} // "table/pk" → writes acknowledged
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			table, pk := fmt.Sprintf("Shared%d", w%8), fmt.Sprintf("p%d", w)
			for k := 1; !stop.Load(); k++ {
				body := fmt.Sprintf("%s/%s:%d", table, pk, k)
				if _, err := cl.Insert(ctx, table, engine.NewEntity(pk, strconv.Itoa(k)), client.WithID(body),
					client.WithMessages(engine.Message{Queue: "shared", Body: []byte(body)})); err != nil {
					errs <- fmt.Errorf("write %s: %w", body, err)
					return
				}
				mu.Lock()
				acked[table+"/"+pk] = k
				mu.Unlock()
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	b.Kill(t)
	time.Sleep(500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The survivor relays everything: its leases' TTL (10 s) passes first.
	for table, epoch := range tables {
		waitRelayed(t, ctx, js, table, epoch)
	}
	checkDelivered(t, queueBodies(t, ctx, js, "shared"), acked, func(key string, k int) error {
		table, pk, _ := strings.Cut(key, "/")
		_, _, err := cl.Retrieve(ctx, table, pk, strconv.Itoa(k))
		return err
	})
}

// checkDelivered checks the bodies a queue received ("<key>:<k>", k
// counting each key's writes from 1) against the writes acknowledged per
// key: each acknowledged write's message once, none twice, each key's in
// order, and (with written) every message's write present in its table.
func checkDelivered(t *testing.T, bodies []string, acked map[string]int, written func(key string, k int) error) {
	t.Helper()
	seen := map[string]bool{}
	last := map[string]int{}
	for _, body := range bodies {
		if seen[body] {
			t.Fatalf("message %s delivered twice", body)
		}
		seen[body] = true
		key, n, _ := strings.Cut(body, ":")
		k, _ := strconv.Atoi(n)
		if k <= last[key] {
			t.Fatalf("%s: message %d after %d", key, k, last[key])
		}
		last[key] = k
		if written != nil {
			// A message never goes without its write.
			if err := written(key, k); err != nil {
				t.Fatalf("message %s without its write: %v", body, err)
			}
		}
	}
	total := 0
	for key, n := range acked {
		total += n
		for k := 1; k <= n; k++ {
			if !seen[fmt.Sprintf("%s:%d", key, k)] {
				t.Fatalf("the message of acknowledged write %s:%d is missing (%d messages in all)", key, k, len(bodies))
			}
		}
	}
	t.Logf("%d writes acknowledged, %d messages delivered", total, len(bodies))
}
