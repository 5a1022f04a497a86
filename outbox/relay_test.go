package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/journal/jstest"
	"github.com/cairn-dev/cairn/outbox"
	"github.com/cairn-dev/cairn/projections"
)

// rig is a journal with live views on an embedded server, a queue stream
// that captures cairn.queue.* (as the functions' does), and relays
// started on them.
type rig struct {
	t     testing.TB
	ctx   context.Context
	nc    *nats.Conn
	js    jetstream.JetStream
	j     *journal.Journal
	views *projections.Views
	out   jetstream.Stream
	epoch map[string]uint64
	last  map[string]uint64 // each partition's last sequence (the committer's expectation)
	mu    sync.Mutex
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newRig(t testing.TB, queue jetstream.StreamConfig) *rig {
	t.Helper()
	_, nc := jstest.Server(t)
	// A bound on a broken test, not a timed assertion.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	j, err := journal.New(nc, journal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Init(ctx); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	queue.Name, queue.Subjects = "QUEUES", []string{"cairn.queue.*"}
	out, err := js.CreateStream(ctx, queue)
	if err != nil {
		t.Fatal(err)
	}
	views := projections.NewViews(j, quiet(), projections.Config{})
	vctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- views.Run(vctx) }()
	t.Cleanup(func() { stop(); <-done })
	if err := views.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, ctx: ctx, nc: nc, js: js, j: j, views: views, out: out, epoch: map[string]uint64{}, last: map[string]uint64{}}
}

// rigShards is the shard count of every table the rig creates.
const rigShards = 8

func (r *rig) create(table string) {
	r.t.Helper()
	epoch, err := r.j.AppendCatalog(r.ctx, &engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: table, Time: 1, Shards: rigShards}, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.j.EnsureTableStream(r.ctx, table, epoch); err != nil {
		r.t.Fatal(err)
	}
	if err := r.views.WaitCatalog(r.ctx, epoch); err != nil {
		r.t.Fatal(err)
	}
	if err := r.views.WaitTableReady(r.ctx, table, epoch); err != nil {
		r.t.Fatal(err)
	}
	r.epoch[table] = epoch
}

// commit appends a record of partition pk with messages to the queues
// named, bodies "<pk>:<n>" with n counting per partition from 1.
func (r *rig) commit(table, pk string, queues ...string) uint64 {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := &engine.Record{Time: engine.TimeToTicks(time.Now()), PartitionKey: pk, Nonce: fmt.Sprint(table, pk, r.last[table+"/"+pk])}
	for _, q := range queues {
		r.last["n/"+table+"/"+pk]++
		rec.Messages = append(rec.Messages, engine.Message{Queue: q, Body: []byte(pk + ":" + strconv.FormatUint(r.last["n/"+table+"/"+pk], 10))})
	}
	seq, err := r.j.Append(r.ctx, table, r.epoch[table], rigShards, rec, r.last[table+"/"+pk])
	if err != nil {
		r.t.Fatal(err)
	}
	r.last[table+"/"+pk] = seq
	return seq
}

// commitBodies appends a record of partition pk with one message per body
// to queue.
func (r *rig) commitBodies(table, pk, queue string, bodies ...string) uint64 {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := &engine.Record{Time: engine.TimeToTicks(time.Now()), PartitionKey: pk, Nonce: fmt.Sprint(table, pk, r.last[table+"/"+pk])}
	for _, b := range bodies {
		rec.Messages = append(rec.Messages, engine.Message{Queue: queue, Body: []byte(b)})
	}
	seq, err := r.j.Append(r.ctx, table, r.epoch[table], rigShards, rec, r.last[table+"/"+pk])
	if err != nil {
		r.t.Fatal(err)
	}
	r.last[table+"/"+pk] = seq
	return seq
}

func (r *rig) relay(node string, cfg outbox.Config) (*outbox.Relay, func()) {
	r.t.Helper()
	cfg.NodeID, cfg.Log = node, quiet()
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL, cfg.Renew = 2*time.Second, 200*time.Millisecond
	}
	rl, err := outbox.New(r.nc, r.j, r.views, cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan error, 1)
	go func() { done <- rl.Run(ctx) }()
	select {
	case <-rl.Ready():
	case err := <-done:
		r.t.Fatalf("relay did not start: %v", err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				r.t.Errorf("relay stopped with %v", err)
			}
		})
	}
	r.t.Cleanup(stop)
	return rl, stop
}

// received reads the queue stream: per subject, the bodies in order, and
// every message's headers.
func (r *rig) received(want int) (map[string][]string, []nats.Header) {
	r.t.Helper()
	cons, err := r.out.OrderedConsumer(r.ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		r.t.Fatal(err)
	}
	bodies := map[string][]string{}
	var hdrs []nats.Header
	for len(hdrs) < want {
		batch, err := cons.FetchNoWait(want - len(hdrs))
		if err != nil {
			r.t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			bodies[m.Subject()] = append(bodies[m.Subject()], string(m.Data()))
			hdrs = append(hdrs, m.Headers())
			n++
		}
		if n == 0 {
			if r.ctx.Err() != nil {
				r.t.Fatalf("received %d messages of %d", len(hdrs), want)
			}
			time.Sleep(10 * time.Millisecond) // polling a stream, not timing the code
		}
	}
	return bodies, hdrs
}

// waitCount waits until the queue stream holds n messages.
func (r *rig) waitCount(n uint64) {
	r.t.Helper()
	for {
		info, err := r.out.Info(r.ctx)
		if err != nil {
			r.t.Fatal(err)
		}
		if info.State.Msgs == n {
			return
		}
		if info.State.Msgs > n {
			r.t.Fatalf("the queue stream holds %d messages, want %d", info.State.Msgs, n)
		}
		if r.ctx.Err() != nil {
			r.t.Fatalf("the queue stream holds %d messages, want %d", info.State.Msgs, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// inOrder checks that a partition's bodies arrived in the order they were
// committed (their numbers increase) and that there are n of them.
func inOrder(t *testing.T, bodies []string, pk string, n int) {
	t.Helper()
	var got []string
	last := 0
	for _, b := range bodies {
		num, ok := strings.CutPrefix(b, pk+":")
		if !ok {
			continue
		}
		got = append(got, b)
		i, _ := strconv.Atoi(num)
		if i <= last {
			t.Fatalf("partition %s: %q after %d: out of order: %v", pk, b, last, got)
		}
		last = i
	}
	if len(got) != n {
		t.Fatalf("partition %s: %d messages, want %d: %v", pk, len(got), n, got)
	}
}

// TestRelayDeliversInOrderOnce: messages committed before and while the
// relay runs reach their queue once each, in partition order, with the
// position-derived id and header; the position is stored, so a restarted
// relay publishes nothing again.
func TestRelayDeliversInOrderOnce(t *testing.T) {
	r := newRig(t, jetstream.StreamConfig{})
	r.create("Orders")
	for i := 0; i < 50; i++ {
		r.commit("Orders", "p"+strconv.Itoa(i%5), "mail")
	}
	rl, stop := r.relay("n1", outbox.Config{})
	for i := 50; i < 200; i++ {
		r.commit("Orders", "p"+strconv.Itoa(i%5), "mail", "audit")
	}
	r.waitCount(50 + 300)
	bodies, hdrs := r.received(350)
	for p := 0; p < 5; p++ {
		inOrder(t, bodies["cairn.queue.mail"], "p"+strconv.Itoa(p), 40)
		inOrder(t, bodies["cairn.queue.audit"], "p"+strconv.Itoa(p), 30)
	}
	seen := map[string]bool{}
	for _, h := range hdrs {
		pos := h.Get(outbox.PositionHeader)
		if !strings.HasPrefix(pos, "orders/") || seen[pos] || h.Get(nats.MsgIdHdr) != "cairn:"+pos || !strings.HasPrefix(h.Get(outbox.PartitionHeader), "p") {
			t.Fatalf("headers %v (position seen before: %v)", h, seen[pos])
		}
		seen[pos] = true
	}
	// The position reaches the journal's head and is stored.
	head := r.last["Orders/p4"]
	for {
		st := rl.Status()
		if len(st) == 1 && st[0].Position == head && st[0].LagRecords() == 0 && st[0].Pending == 0 {
			break
		}
		if r.ctx.Err() != nil {
			t.Fatalf("status %+v, want position %d", st, head)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	kv, err := r.js.KeyValue(r.ctx, outbox.BucketName("cairn"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(r.ctx, "pos."+journal.StreamName("cairn", "Orders", r.epoch["Orders"]))
	if err != nil || string(e.Value()) != strconv.FormatUint(head, 10) {
		t.Fatalf("stored position %v %v, want %d", e, err, head)
	}
	// A new relay starts after the position: what it publishes is new.
	rl2, _ := r.relay("n1", outbox.Config{})
	last := r.commit("Orders", "p0", "mail")
	r.waitCount(351)
	// Once its position passed the new record (the stream may count the
	// message before the relay has its acknowledgement), it delivered that
	// one message and nothing again.
	for st := rl2.Status(); len(st) != 1 || st[0].Position != last; st = rl2.Status() {
		if r.ctx.Err() != nil {
			t.Fatalf("status %+v, want position %d", st, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var m strings.Builder
	rl2.WriteMetrics(&m)
	if !strings.Contains(m.String(), "cairn_outbox_delivered_total 1\n") || !strings.Contains(m.String(), "cairn_outbox_duplicates_total 0\n") {
		t.Fatalf("the restarted relay delivered more than the new message:\n%s", m.String())
	}
}

// TestRelayRepublishIsDeduplicated: a relay that starts from an older
// position than what it delivered (as after a crash, here with the
// position put back to 0) publishes those messages again with the same
// ids; the stream stores none of them twice, and the relay counts them as
// duplicates.
func TestRelayRepublishIsDeduplicated(t *testing.T) {
	r := newRig(t, jetstream.StreamConfig{})
	r.create("Orders")
	for i := 0; i < 20; i++ {
		r.commit("Orders", "p"+strconv.Itoa(i%3), "mail")
	}
	_, stop := r.relay("n1", outbox.Config{})
	r.waitCount(20) // all stored, whatever position the relay stored
	stop()
	kv, err := r.js.KeyValue(r.ctx, outbox.BucketName("cairn"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(r.ctx, "pos."+journal.StreamName("cairn", "Orders", r.epoch["Orders"]), []byte("0")); err != nil {
		t.Fatal(err)
	}
	rl2, _ := r.relay("n1", outbox.Config{})
	r.commit("Orders", "p0", "mail")
	r.waitCount(21)
	for {
		var m strings.Builder
		rl2.WriteMetrics(&m)
		if strings.Contains(m.String(), "cairn_outbox_delivered_total 21\n") {
			if !strings.Contains(m.String(), "cairn_outbox_duplicates_total 20\n") {
				t.Fatalf("metrics:\n%s", m.String())
			}
			break
		}
		if r.ctx.Err() != nil {
			t.Fatalf("metrics:\n%s", m.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.waitCount(21) // still: none stored twice
	bodies, _ := r.received(21)
	for p := 0; p < 3; p++ {
		inOrder(t, bodies["cairn.queue.mail"], "p"+strconv.Itoa(p), map[int]int{0: 8, 1: 7, 2: 6}[p])
	}
}

// TestRelayBlockedPartition: a message its queue refuses blocks its
// partition only; the block is visible in the status and the metrics, and
// the position waits before it; once the stream takes the message the
// partition drains in order; an operator's skip passes a message over.
func TestRelayBlockedPartition(t *testing.T) {
	r := newRig(t, jetstream.StreamConfig{MaxMsgSize: 400})
	r.create("Orders")
	rl, _ := r.relay("n1", outbox.Config{MaxBackoff: 50 * time.Millisecond})
	big := strings.Repeat("x", 1000)
	r.commitBodies("Orders", "stuck", "big", "stuck:1:"+big, "stuck:2")
	for i := 0; i < 10; i++ {
		r.commit("Orders", "free", "small")
	}
	r.waitCount(10)
	st := waitBlocked(t, r, rl, 1)
	b := st.Blocked[0]
	if b.Partition != "stuck" || b.Destination != "cairn.queue.big" || b.Waiting != 2 || b.Index != 0 || b.Error == "" || b.Attempts < 1 || st.Pending != 2 {
		t.Fatalf("blocked %+v in %+v", b, st)
	}
	if st.Position >= b.Seq {
		t.Fatalf("position %d passed the blocked record %d", st.Position, b.Seq)
	}
	var m strings.Builder
	rl.WriteMetrics(&m)
	if !strings.Contains(m.String(), `cairn_outbox_blocked_partitions{table="Orders"} 1`) {
		t.Fatalf("metrics:\n%s", m.String())
	}
	// Fix the destination: the partition drains in order.
	cfg := r.out.CachedInfo().Config
	cfg.MaxMsgSize = 4096
	if _, err := r.js.UpdateStream(r.ctx, cfg); err != nil {
		t.Fatal(err)
	}
	r.waitCount(12)
	bodies, _ := r.received(12)
	if got := bodies["cairn.queue.big"]; len(got) != 2 || got[0] != "stuck:1:"+big || got[1] != "stuck:2" {
		t.Fatalf("after the fix: %v", got)
	}
	inOrder(t, bodies["cairn.queue.small"], "free", 10)

	// Skip: an operator passes a message its stream will never take.
	cfg.MaxMsgSize = 400
	if _, err := r.js.UpdateStream(r.ctx, cfg); err != nil {
		t.Fatal(err)
	}
	seq := r.commitBodies("Orders", "stuck", "big", "stuck:3:"+big, "stuck:4")
	for b = waitBlocked(t, r, rl, 1).Blocked[0]; b.Seq != seq; b = waitBlocked(t, r, rl, 1).Blocked[0] {
		time.Sleep(10 * time.Millisecond) // the status of the first block may still show
	}
	kv, err := r.js.KeyValue(r.ctx, outbox.BucketName("cairn"))
	if err != nil {
		t.Fatal(err)
	}
	stream := journal.StreamName("cairn", "Orders", r.epoch["Orders"])
	// A message that is not blocked (here the record after it, not written
	// yet) is refused: a mistyped position must not drop a message later.
	if err := outbox.Skip(r.ctx, r.js, kv, stream, b.Seq+1, 0); !errors.Is(err, outbox.ErrNotBlocked) {
		t.Fatalf("skip of a message that is not blocked: %v", err)
	}
	// The blocked message is refused too until the bucket shows it blocked.
	deadline := time.Now().Add(10 * time.Second)
	for err := outbox.Skip(r.ctx, r.js, kv, stream, b.Seq, b.Index); err != nil; err = outbox.Skip(r.ctx, r.js, kv, stream, b.Seq, b.Index) {
		if !errors.Is(err, outbox.ErrNotBlocked) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.waitCount(13)
	waitBlocked(t, r, rl, 0)
	bodies, _ = r.received(13)
	if got := bodies["cairn.queue.big"]; len(got) != 3 || got[2] != "stuck:4" {
		t.Fatalf("after the skip: %v", got)
	}
}

// waitBlocked waits until the relay shows n blocked partitions of its one
// table.
func waitBlocked(t *testing.T, r *rig, rl *outbox.Relay, n int) outbox.TableStatus {
	t.Helper()
	for {
		s := rl.Status()
		if len(s) == 1 && len(s[0].Blocked) == n {
			return s[0]
		}
		if r.ctx.Err() != nil {
			t.Fatalf("want %d blocked partitions: %+v", n, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRelaySubjects: a message to a subject a stream captures is stored
// there with its id; one to a subject of Config.Core is published once to
// its core NATS subscribers, with no stream behind it.
func TestRelaySubjects(t *testing.T) {
	r := newRig(t, jetstream.StreamConfig{})
	orders, err := r.js.CreateStream(r.ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := r.nc.SubscribeSync("notify.>")
	if err != nil {
		t.Fatal(err)
	}
	r.create("Orders")
	rl, _ := r.relay("n1", outbox.Config{Core: []string{"notify.*"}})
	rec := &engine.Record{Time: 1, PartitionKey: "p", Nonce: "s1", Messages: []engine.Message{
		{Subject: "orders.created", ID: "order-7", Body: []byte("7")},
		{Subject: "notify.sales", Body: []byte("hello")},
		{Subject: "orders.created", ID: "order-7", Body: []byte("7 again")}, // the same id: one copy
	}}
	if _, err := r.j.Append(r.ctx, "Orders", r.epoch["Orders"], rigShards, rec, 0); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsgWithContext(r.ctx)
	if err != nil || string(m.Data) != "hello" || m.Header.Get(outbox.PositionHeader) != "orders/"+strconv.FormatUint(r.epoch["Orders"], 10)+"/1/1" {
		t.Fatalf("core subscriber got %v %v", m, err)
	}
	for {
		info, err := orders.Info(r.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	got, err := orders.GetLastMsgForSubject(r.ctx, "orders.created")
	if err != nil || string(got.Data) != "7" || got.Header.Get(nats.MsgIdHdr) != "order-7" {
		t.Fatalf("stream holds %v %v", got, err)
	}
	// Once all three are delivered, nothing more reaches the core
	// subscriber: it was published once.
	for st := rl.Status(); len(st) != 1 || st[0].Position != 1; st = rl.Status() {
		if r.ctx.Err() != nil {
			t.Fatalf("status %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if extra, err := sub.NextMsg(0); err == nil {
		t.Fatalf("the core subscriber got a second message: %s", extra.Data)
	}
}

// appendSubject appends a record of partition pk with one message per
// body to subject.
func (r *rig) appendSubject(table, pk, subject string, bodies ...string) uint64 {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := &engine.Record{Time: engine.TimeToTicks(time.Now()), PartitionKey: pk, Nonce: fmt.Sprint(table, pk, r.last[table+"/"+pk])}
	for _, b := range bodies {
		rec.Messages = append(rec.Messages, engine.Message{Subject: subject, Body: []byte(b)})
	}
	seq, err := r.j.Append(r.ctx, table, r.epoch[table], rigShards, rec, r.last[table+"/"+pk])
	if err != nil {
		r.t.Fatal(err)
	}
	r.last[table+"/"+pk] = seq
	return seq
}

// TestRelayWaitsForAStream: a message to a subject no stream captures,
// and not opted into core NATS, is not lost: its partition blocks, the
// status says why and what to do, and once a stream that captures it is
// created the partition drains into it in order, each message once. With
// a core subscriber of the subject, the attempts find a responder that
// never acknowledges: they end at Config.AckWait, and the reason is the
// same.
func TestRelayWaitsForAStream(t *testing.T) {
	t.Run("alone", func(t *testing.T) { testRelayWaitsForAStream(t, false) })
	t.Run("subscribed", func(t *testing.T) { testRelayWaitsForAStream(t, true) })
}

func testRelayWaitsForAStream(t *testing.T, subscribed bool) {
	r := newRig(t, jetstream.StreamConfig{})
	r.create("Orders")
	if subscribed {
		if _, err := r.nc.Subscribe("orders.>", func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
	}
	rl, _ := r.relay("n1", outbox.Config{MaxBackoff: 50 * time.Millisecond, AckWait: 200 * time.Millisecond})
	first := r.appendSubject("Orders", "p", "orders.created", "p:1", "p:2")
	r.appendSubject("Orders", "p", "orders.created", "p:3")
	for i := 0; i < 5; i++ {
		r.commit("Orders", "free", "mail") // another partition goes on
	}
	r.waitCount(5)
	st := waitBlocked(t, r, rl, 1)
	b := st.Blocked[0]
	if b.Partition != "p" || b.Seq != first || b.Index != 0 || b.Destination != "orders.created" || b.Waiting != 3 ||
		b.Reason != outbox.ReasonNoStream || !strings.Contains(b.Remedy, "-outbox-core") || !strings.Contains(b.Remedy, "host outbox skip") {
		t.Fatalf("blocked %+v", b)
	}
	if st.Position >= first {
		t.Fatalf("position %d passed the blocked record %d", st.Position, first)
	}
	// The operators' status (the bucket) shows the reason too.
	reports, err := outbox.Reports(r.ctx, r.js, "cairn")
	for err == nil && (len(reports) != 1 || len(reports[0].Blocked) != 1 || reports[0].Blocked[0].Reason != outbox.ReasonNoStream) {
		if r.ctx.Err() != nil {
			t.Fatalf("reports %+v", reports)
		}
		time.Sleep(10 * time.Millisecond) // the bucket is written at the next checkpoint
		reports, err = outbox.Reports(r.ctx, r.js, "cairn")
	}
	if err != nil {
		t.Fatal(err)
	}
	orders, err := r.js.CreateStream(r.ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	if err != nil {
		t.Fatal(err)
	}
	waitBlocked(t, r, rl, 0)
	head := r.last["Orders/p"]
	for st := rl.Status(); len(st) != 1 || st[0].Position < head || st[0].Pending != 0; st = rl.Status() {
		if r.ctx.Err() != nil {
			t.Fatalf("status %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	info, err := orders.Info(r.ctx)
	if err != nil || info.State.Msgs != 3 {
		t.Fatalf("the stream holds %+v %v, want 3 messages", info, err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		m, err := orders.GetMsg(r.ctx, seq)
		if err != nil || string(m.Data) != "p:"+strconv.FormatUint(seq, 10) {
			t.Fatalf("message %d: %v %v", seq, m, err)
		}
	}
}

// TestRelayRefusesBadCore: a core pattern that is not a NATS subject
// pattern, or names $ or _ subjects, stops the relay before it starts.
func TestRelayRefusesBadCore(t *testing.T) {
	for _, p := range []string{"", "orders..created", "orders.>.x", "or ders", "$JS.>", "_INBOX.>", "orders.a*"} {
		_, err := outbox.New(nil, nil, nil, outbox.Config{NodeID: "n1", Core: []string{"notify.>", p}})
		if err == nil || !strings.Contains(err.Error(), "core subjects") {
			t.Errorf("core %q: %v", p, err)
		}
	}
	if err := outbox.CheckCore([]string{"notify.>", "billing.*.created", ">"}); err != nil {
		t.Fatal(err)
	}
}

// TestRelayDroppedTable: a dropped table's relay stops and its position
// leaves the bucket.
func TestRelayDroppedTable(t *testing.T) {
	r := newRig(t, jetstream.StreamConfig{})
	r.create("Gone")
	rl, _ := r.relay("n1", outbox.Config{})
	r.commit("Gone", "p", "mail")
	r.waitCount(1)
	kv, err := r.js.KeyValue(r.ctx, outbox.BucketName("cairn"))
	if err != nil {
		t.Fatal(err)
	}
	key := "pos." + journal.StreamName("cairn", "Gone", r.epoch["Gone"])
	for _, err := kv.Get(r.ctx, key); err != nil; _, err = kv.Get(r.ctx, key) {
		if r.ctx.Err() != nil {
			t.Fatal("no position stored")
		}
		time.Sleep(10 * time.Millisecond)
	}
	seq, err := r.j.AppendCatalog(r.ctx, &engine.CatalogRecord{Kind: engine.CatalogTableDeleted, Name: "Gone", Time: 2}, r.epoch["Gone"])
	if err != nil {
		t.Fatal(err)
	}
	if err := r.views.WaitCatalog(r.ctx, seq); err != nil {
		t.Fatal(err)
	}
	for _, err := kv.Get(r.ctx, key); err == nil || len(rl.Status()) != 0; _, err = kv.Get(r.ctx, key) {
		if r.ctx.Err() != nil {
			t.Fatalf("the dropped table's relay: %+v, position %v", rl.Status(), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRelayTakesItsLeasesBack: a node restarted after a crash finds its
// leases still held in its own name (not expired: their TTL here is ten
// minutes) and relays at once instead of waiting for them to expire.
func TestRelayTakesItsLeasesBack(t *testing.T) {
	r := newRig(t, jetstream.StreamConfig{})
	r.create("Orders")
	kv, err := outbox.Bucket(r.ctx, r.js, "cairn", 1)
	if err != nil {
		t.Fatal(err)
	}
	const shards = 16
	for s := range shards {
		if _, err := kv.Put(r.ctx, "lease."+strconv.Itoa(s), []byte("n1")); err != nil {
			t.Fatal(err)
		}
	}
	r.relay("n1", outbox.Config{Shards: shards, LeaseTTL: 10 * time.Minute, Renew: 200 * time.Millisecond})
	r.commit("Orders", "p", "mail")
	r.waitCount(1) // bounded by the rig's two minutes, well within the leases' TTL
}
