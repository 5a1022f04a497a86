package node_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/journal"
)

// TestClusterLeaderFailover shuts down the server that leads a table's
// stream (R3) while clients write to it with command ids, each write a
// batch of two rows, retried with its id until it is acknowledged. Every
// acknowledged write must be in the journal exactly once and whole, and
// the writes must resume. The pause of the writes and JetStream's own
// failover time (until the stream reports a new leader) are logged side
// by side: they are measurements, not assertions.
func TestClusterLeaderFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	tc := startTestCluster(t)
	th := startNode(t, node.Config{NATSURL: tc.url(), Replicas: 3, HTTP: "off"})
	ctx := ctxT(t)
	// A new cluster may still be electing stream leaders: allow for it.
	info, err := client.New(th.nc, client.WithTimeout(30*time.Second)).CreateTable(ctx, "Failover")
	if err != nil {
		t.Fatal(err)
	}
	stream := journal.StreamName("cairn", "Failover", info.Epoch)

	// The writers' own connection, to every server, reconnecting at once.
	// A request in flight on a connection to the server shut down is lost
	// with it (its writer waits out its 2 s and sends it again): that is
	// the client's, and is counted apart.
	wnc, err := nats.Connect(tc.url(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer wnc.Close()
	c := client.New(wnc, client.WithTimeout(2*time.Second), client.WithAttempts(1))

	type ack struct {
		id       string
		sent, at time.Time
		seq      uint64
	}
	var (
		mu     sync.Mutex
		acks   []ack
		errs   = map[string]int{} // error code (or text) → count
		failed atomic.Int32
		stop   = make(chan struct{})
		wg     sync.WaitGroup
	)
	const writers = 4
	for w := range writers {
		wg.Go(func() {
			pk := fmt.Sprintf("p%d", w%2) // two writers per partition: groups
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, n)
				ops := []engine.Operation{
					{Op: engine.OpInsert, Entity: engine.NewEntity(pk, id+"-a")},
					{Op: engine.OpInsert, Entity: engine.NewEntity(pk, id+"-b")},
				}
				for { // until it is acknowledged: the id makes the retry safe
					sent := time.Now()
					r, err := c.Batch(ctx, "Failover", ops, client.WithID(id))
					if err == nil {
						mu.Lock()
						acks = append(acks, ack{id: id, sent: sent, at: time.Now(), seq: r.Seq})
						mu.Unlock()
						break
					}
					if ctx.Err() != nil {
						failed.Add(1)
						t.Errorf("write %s never acknowledged: %v", id, err)
						return
					}
					code := string(engine.ErrorCode(err))
					if code == string(engine.CodeInternalError) {
						code = err.Error()
					}
					mu.Lock()
					errs[code]++
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	acked := func(after time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		k := 0
		for _, a := range acks {
			if a.sent.After(after) {
				k++
			}
		}
		return k
	}
	waitAcks := func(after time.Time, n int, d time.Duration) bool {
		deadline := time.Now().Add(d)
		for acked(after) < n {
			if time.Now().After(deadline) || failed.Load() > 0 {
				return false
			}
			time.Sleep(10 * time.Millisecond)
		}
		return true
	}
	if !waitAcks(time.Time{}, 40, 30*time.Second) {
		close(stop)
		wg.Wait()
		t.Fatalf("the writes did not get going: %d acknowledged", acked(time.Time{}))
	}

	// Shut down the stream's leader; watch for its successor from a
	// connection to another server.
	js, err := jetstream.New(th.nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	leader := s.CachedInfo().Cluster.Leader
	victim := tc.index(leader)
	if victim < 0 {
		t.Fatalf("stream leader %q is none of the servers", leader)
	}
	other := tc.urls[(victim+1)%len(tc.urls)]
	mnc, err := nats.Connect(other)
	if err != nil {
		t.Fatal(err)
	}
	defer mnc.Close()
	mjs, _ := jetstream.New(mnc)
	announced := make(chan time.Time, 1)
	asub, err := mnc.Subscribe(journal.LeaderElectedSubject(stream), func(*nats.Msg) {
		select {
		case announced <- time.Now():
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer asub.Unsubscribe()
	if err := mnc.Flush(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	tc.stop(victim)
	shutdown := time.Since(killed)
	var newLeader string
	var failover time.Duration
	for failover == 0 && time.Since(killed) < 30*time.Second {
		sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		s, err := mjs.Stream(sctx, stream)
		cancel()
		if err == nil {
			if l := s.CachedInfo().Cluster.Leader; l != "" && l != leader {
				newLeader, failover = l, time.Since(killed)
			}
		}
		if failover == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	resumed := waitAcks(killed.Add(failover), 40, 45*time.Second)
	close(stop)
	wg.Wait()
	if failover == 0 {
		t.Errorf("the stream reported no new leader within 30s of shutting down %s", leader)
	}
	if !resumed {
		t.Errorf("the writes did not resume after the failover: %d acknowledged since", acked(killed.Add(failover)))
	}

	// The measurements: the longest pause between acknowledgements around
	// the shutdown, against JetStream's failover.
	mu.Lock()
	done := slices.Clone(acks)
	errCounts := errs
	mu.Unlock()
	slices.SortFunc(done, func(a, b ack) int { return a.at.Compare(b.at) })
	var gap time.Duration
	var gapFrom, gapTo time.Time
	for k := 1; k < len(done); k++ {
		if done[k].at.Before(killed) {
			continue
		}
		if d := done[k].at.Sub(done[k-1].at); d > gap {
			gap, gapFrom, gapTo = d, done[k-1].at, done[k].at
		}
	}
	var firstAfter time.Duration
	for _, a := range done {
		if a.sent.After(killed) {
			firstAfter = a.at.Sub(killed)
			break
		}
	}
	announcedAfter := "none"
	select {
	case at := <-announced:
		announcedAfter = at.Sub(killed).Round(time.Millisecond).String()
	default:
	}
	t.Logf("stream leader %s shut down (%v); JetStream failover to %s after %v (announced after %s); writes: longest pause %v (from %v to %v after the shutdown), first write sent after the shutdown acknowledged %v after it; %d writes acknowledged, errors answered meanwhile: %v",
		leader, shutdown.Round(time.Millisecond), newLeader, failover.Round(time.Millisecond), announcedAfter,
		gap.Round(time.Millisecond), gapFrom.Sub(killed).Round(time.Millisecond), gapTo.Sub(killed).Round(time.Millisecond),
		firstAfter.Round(time.Millisecond), len(done), errCounts)
	st := th.h.CommitStats()
	t.Logf("committer: %d records, %d commands, %d conflicts, %d appends of unknown outcome", st.Records, st.Commands, st.Conflicts, st.Unknown)

	// Every acknowledged write is in the journal exactly once, whole, at
	// the position its reply named; nothing else is.
	want := map[string]uint64{}
	for _, a := range done {
		want[a.id] = a.seq
	}
	var seq uint64
	found := map[string]int{}
	for _, rec := range nodetest.Records(t, th.h, "Failover") {
		seq++ // nothing is ever removed: the k-th record is at sequence k
		for _, ref := range rec.Commands {
			found[ref.ID]++
			if _, ok := want[ref.ID]; !ok {
				t.Errorf("record %d holds command %q, never acknowledged", seq, ref.ID)
				continue
			}
			if ref.Count != 2 || int(ref.First+ref.Count) > len(rec.Events) {
				t.Errorf("record %d: command %s has %d events, want 2", seq, ref.ID, ref.Count)
				continue
			}
			for k, suffix := range []string{"-a", "-b"} {
				if ev := rec.Events[int(ref.First)+k]; ev.Kind != engine.EventPut || ev.RowKey != ref.ID+suffix {
					t.Errorf("record %d: command %s event %d is %v %q", seq, ref.ID, k, ev.Kind, ev.RowKey)
				}
			}
			if found[ref.ID] == 1 && want[ref.ID] != seq {
				t.Errorf("command %s answered with position %d, stored at %d", ref.ID, want[ref.ID], seq)
			}
		}
	}
	for id := range want {
		if found[id] != 1 {
			t.Errorf("acknowledged write %s is %d times in the journal", id, found[id])
		}
	}
	view, ok := th.h.Views().Table("Failover")
	if !ok {
		t.Fatal("no view of Failover")
	}
	if n := view.Snapshot().Len(); n != 2*len(want) {
		t.Errorf("the view holds %d rows, want %d", n, 2*len(want))
	}
}
