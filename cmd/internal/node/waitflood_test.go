package node_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/journal"
)

// floodSize is how many waiting requests a flood sends: more than the
// 1,024 requests a node used to serve on goroutines at once, and more
// than the 1,000 consumers JetStream allows a stream by default
// (nats-server's JSDefaultMaxConsumersPerStream, which applies because
// Cairn's streams set no MaxConsumers), which the waits used to take one
// each.
const floodSize = 1500

// jsDefaultMaxConsumers is nats-server's default limit of consumers per
// stream (JSDefaultMaxConsumersPerStream).
const jsDefaultMaxConsumers = 1000

// flood is one development client sending many requests that wait, and
// counting their replies by error code ("" for an answer).
type flood struct {
	nc      *nats.Conn
	mu      sync.Mutex
	replies map[engine.Code]int
}

// startFlood connects a development client and sends n copies of body to
// subject, each with a reply subject of its own.
func startFlood(t *testing.T, th *testHost, subject, body string, n int) *flood {
	t.Helper()
	nc, err := nats.Connect(th.h.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	f := &flood{nc: nc, replies: map[engine.Code]int{}}
	inbox := nc.NewInbox()
	if _, err := nc.Subscribe(inbox+".*", func(m *nats.Msg) {
		// JSON replies (the requests are JSON): an error, or an answer.
		var rep struct {
			Error *struct {
				Code engine.Code `json:"code"`
			} `json:"error"`
		}
		var code engine.Code
		if err := json.Unmarshal(m.Data, &rep); err != nil {
			code = "undecodable"
		} else if rep.Error != nil {
			code = rep.Error.Code
		}
		f.mu.Lock()
		f.replies[code]++
		f.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := nc.PublishRequest(subject, fmt.Sprintf("%s.%d", inbox, i), []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return f
}

// counts returns the replies so far by code, and their number.
func (f *flood) counts() (map[engine.Code]int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out, n := map[engine.Code]int{}, 0
	for c, k := range f.replies {
		out[c] = k
		n += k
	}
	return out, n
}

// waitingOn reports how many requests the node holds waiting (its
// cairn_nats_requests_waiting), 0 when it does not say.
func waitingOn(tb testing.TB, th *testHost) int {
	tb.Helper()
	req, err := http.NewRequest("GET", th.h.HTTPURL()+"/metrics", nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+th.h.OperatorToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "cairn_nats_requests_waiting "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// consumersOf returns how many consumers the table's stream has.
func consumersOf(t *testing.T, th *testHost, table string, epoch uint64) int {
	t.Helper()
	js, err := jetstream.New(th.nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctxT(t), journal.StreamName("cairn", table, epoch))
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.Consumers
}

// othersServed checks that another client is served while a flood waits
// on table: a feed page, a feed request that waits and is answered by a
// write, the write and a read of it, a read as of an earlier position, a
// read and a query of a position, and a query as of one.
func othersServed(t *testing.T, th *testHost, table string) {
	t.Helper()
	ctx := ctxT(t)
	other, err := nats.Connect(th.h.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	c := client.New(other, client.WithTimeout(20*time.Second))
	p, err := c.Changes(ctx, table, wire.ChangesRequest{From: 1})
	if err != nil || len(p.Changes) != 2 || p.Next != 3 {
		t.Fatalf("another client's feed page: %+v %v", p, err)
	}
	waited := make(chan error, 1)
	go func() {
		p, err := c.Changes(ctx, table, wire.ChangesRequest{From: 3, Wait: 25 * time.Second})
		if err == nil && (len(p.Changes) != 1 || p.Changes[0].RowKey != "3") {
			err = fmt.Errorf("page %+v", p)
		}
		waited <- err
	}()
	rep, err := c.Insert(ctx, table, engine.NewEntity("p", "3"))
	if err != nil {
		t.Fatalf("another client's write: %v", err)
	}
	if _, _, err := c.Retrieve(ctx, table, "p", "3"); err != nil {
		t.Fatalf("another client's read of its write: %v", err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("another client's waiting feed request: %v", err)
	}
	if _, _, err := c.Retrieve(ctx, table, "p", "1", client.AsOf(1)); err != nil {
		t.Fatalf("another client's read as of 1: %v", err)
	}
	if _, _, err := c.Retrieve(ctx, table, "p", "3", client.AtLeast(rep.Seq)); err != nil {
		t.Fatalf("another client's read of position %d: %v", rep.Seq, err)
	}
	if q, err := c.Query(ctx, table, client.QueryAtLeast(rep.Seq)); err != nil || len(q.Entities) != 3 {
		t.Fatalf("another client's query of position %d: %+v %v", rep.Seq, q, err)
	}
	if q, err := c.Query(ctx, table, client.QueryAsOf(2)); err != nil || len(q.Entities) != 2 {
		t.Fatalf("another client's query as of 2: %+v %v", q, err)
	}
}

// floodTable creates table with two entities (positions 1 and 2).
func floodTable(t *testing.T, th *testHost, table string) engine.TableInfo {
	t.Helper()
	ctx := ctxT(t)
	info, err := th.c.CreateTable(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	for _, rk := range []string{"1", "2"} {
		if _, err := th.c.Insert(ctx, table, engine.NewEntity("p", rk)); err != nil {
			t.Fatal(err)
		}
	}
	return info
}

// endsAtStop stops the node and checks that every request of f is
// answered (without waiting out its wait), and only with codes in ok.
func endsAtStop(t *testing.T, th *testHost, f *flood, ok ...engine.Code) {
	t.Helper()
	th.stop(t)
	var got map[engine.Code]int
	eventually(t, 15*time.Second, fmt.Sprintf("the flood's %d requests answered at the stop", floodSize), func() bool {
		var n int
		got, n = f.counts()
		return n == floodSize
	})
	for code, n := range got {
		found := false
		for _, c := range ok {
			found = found || c == code
		}
		if !found {
			t.Errorf("%d of the flood's requests answered %q at the stop (all: %v)", n, code, got)
		}
	}
}

// TestFeedWaitFlood: a client's flood of change feed requests that wait
// (from a position far ahead) leaves every other client served, holds
// no consumer of the table's stream, and ends at once when the node
// stops.
func TestFeedWaitFlood(t *testing.T) {
	th := startHost(t, "")
	info := floodTable(t, th, "Big")
	before := consumersOf(t, th, "Big", info.Epoch)
	f := startFlood(t, th, "cairn.changes.Big", `{"from":1000000,"wait":"30s"}`, floodSize)
	// In place once the node holds them all waiting (or, as nodes did,
	// once they took every consumer the stream may have).
	eventually(t, 30*time.Second, "the flood waiting", func() bool {
		return waitingOn(t, th) == floodSize || consumersOf(t, th, "Big", info.Epoch) >= jsDefaultMaxConsumers
	})
	othersServed(t, th, "Big")
	if got, n := f.counts(); n != 0 {
		t.Fatalf("the flood was answered before its wait ended: %v", got)
	}
	// The waits hold none (the other readers may have left a few:
	// the outbox relay's, a read being deleted).
	if n := consumersOf(t, th, "Big", info.Epoch); n > before+8 {
		t.Errorf("the stream has %d consumers while the flood waits, %d before", n, before)
	}
	endsAtStop(t, th, f, "")
}

// TestPositionWaitFlood: the same with reads of a position far ahead:
// they wait for the view without holding anything other clients need.
func TestPositionWaitFlood(t *testing.T) {
	th := startNode(t, node.Config{API: httpapi.Config{PositionWait: 30 * time.Second}})
	floodTable(t, th, "Far")
	f := startFlood(t, th, "cairn.cmd.Far", `{"op":"Retrieve","partitionKey":"p","rowKey":"1","position":1000000}`, floodSize)
	// In place once the node holds them all waiting (or, as nodes did,
	// once it refused the ones beyond what it served at once).
	eventually(t, 30*time.Second, "the flood waiting", func() bool {
		got, _ := f.counts()
		return waitingOn(t, th) == floodSize || got[engine.CodeServerBusy] > 0
	})
	othersServed(t, th, "Far")
	if got, n := f.counts(); n != 0 {
		t.Fatalf("the flood was answered before its wait ended: %v", got)
	}
	endsAtStop(t, th, f, engine.CodeServerBusy)
}

// TestFeedWaitersWokenTogether: a write wakes the waiting feed requests it
// concerns, in JSON and msgpack alike (those of one table, position and
// size answered by one read), and not those of other partitions, which
// the stop answers with next past the write.
func TestFeedWaitersWokenTogether(t *testing.T) {
	th := startHost(t, "")
	floodTable(t, th, "Woken")
	nc, err := nats.Connect(th.h.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const n = 600 // of each kind below
	kinds := []struct {
		enc   wire.Encoding
		parts []string
		woken bool
	}{
		{wire.JSON, nil, true},
		{wire.Msgpack, nil, true},
		{wire.Msgpack, []string{"p"}, true},
		{wire.JSON, []string{"other", "p"}, true},
		{wire.JSON, []string{"other"}, false},
	}
	var mu sync.Mutex
	got := make([][]*wire.ChangesReply, len(kinds))
	inbox := nc.NewInbox()
	if _, err := nc.Subscribe(inbox+".>", func(m *nats.Msg) {
		k, _ := strconv.Atoi(strings.Split(strings.TrimPrefix(m.Subject, inbox+"."), ".")[0])
		rep, err := wire.DecodeChangesReply(m.Data, kinds[k].enc)
		if err != nil {
			t.Errorf("kind %d: %v", k, err)
			return
		}
		mu.Lock()
		got[k] = append(got[k], rep)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	for k, kind := range kinds {
		body, err := wire.EncodeChangesRequest(&wire.ChangesRequest{From: 3, Max: 10, Wait: 30 * time.Second, Partitions: kind.parts}, kind.enc)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := nc.PublishRequest("cairn.changes.Woken", fmt.Sprintf("%s.%d.%d", inbox, k, i), body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the requests waiting", func() bool { return waitingOn(t, th) == n*len(kinds) })
	if _, err := th.c.Insert(ctxT(t), "Woken", engine.NewEntity("p", "3")); err != nil {
		t.Fatal(err)
	}
	count := func(k int) int {
		mu.Lock()
		defer mu.Unlock()
		return len(got[k])
	}
	for k, kind := range kinds {
		if kind.woken {
			eventually(t, 30*time.Second, fmt.Sprintf("kind %d answered", k), func() bool { return count(k) == n })
		}
	}
	eventually(t, 30*time.Second, "the others still waiting", func() bool { return waitingOn(t, th) == n })
	th.stop(t)
	eventually(t, 15*time.Second, "the others answered at the stop", func() bool { return count(len(kinds)-1) == n })
	mu.Lock()
	defer mu.Unlock()
	for k, kind := range kinds {
		for _, rep := range got[k] {
			switch {
			case rep.Error != nil:
				t.Fatalf("kind %d: %v", k, rep.Error)
			case kind.woken && (len(rep.Changes) != 1 || rep.Changes[0].RowKey != "3" || rep.Next != 4 || rep.Head != 3):
				t.Fatalf("kind %d woken: %+v", k, rep)
			case !kind.woken && (len(rep.Changes) != 0 || rep.Next != 4 || rep.Head != 3):
				t.Fatalf("kind %d at the stop: %+v", k, rep)
			}
		}
	}
}

// BenchmarkWaitingRequests sends b.N change feed requests that wait (use
// -benchtime 10000x) and reports what each costs the process, node and
// client together, while they wait: heap bytes and goroutines.
//
//	go test ./cmd/internal/node/ -run x -bench WaitingRequests -benchtime 10000x
func BenchmarkWaitingRequests(b *testing.B) {
	th := startHost(b, "")
	if _, err := th.c.CreateTable(ctxT(b), "Bench"); err != nil {
		b.Fatal(err)
	}
	nc, err := nats.Connect(th.h.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	inbox := nc.NewInbox()
	if _, err := nc.Subscribe(inbox+".*", func(*nats.Msg) {}); err != nil {
		b.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	b.ResetTimer()
	for i := range b.N {
		if err := nc.PublishRequest("cairn.changes.Bench", fmt.Sprintf("%s.%d", inbox, i), []byte(`{"from":1000000,"wait":"30s"}`)); err != nil {
			b.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for waitingOn(b, th) != b.N {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d requests waiting after 60s", waitingOn(b, th), b.N)
		}
		time.Sleep(10 * time.Millisecond) // polling for the node to hold them
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/float64(b.N), "heap-B/waiter")
	b.ReportMetric(float64(runtime.NumGoroutine()-g0)/float64(b.N), "goroutines/waiter")
}
