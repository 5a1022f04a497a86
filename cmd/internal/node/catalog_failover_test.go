package node_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/journal"
)

// TestClusterCatalogLeaderFailover shuts down the server that leads the
// catalog stream (R3) while a client creates tables one after another.
// Every creation must be acknowledged as created, never as
// TableAlreadyExists (a creation whose first append went unanswered is
// settled by the node, not left to the client's retry), and each table
// must be in the catalog once. The longest pause of the creations and
// JetStream's failover are logged, not asserted.
func TestClusterCatalogLeaderFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	tc := startTestCluster(t)
	// The node is on server 0, and the catalog's leader elsewhere: a
	// node whose own server dies loses the replies it was sending, which
	// no node can help (core NATS delivers at most once), and is not
	// what this test is about.
	th := startNode(t, node.Config{NATSURL: tc.urls[0], Replicas: 3, HTTP: "off"})
	ctx := ctxT(t)
	js, err := jetstream.New(th.nc)
	if err != nil {
		t.Fatal(err)
	}
	catalog := journal.CatalogStreamName("cairn")
	victim := -1
	for victim <= 0 {
		s, err := js.Stream(ctx, catalog)
		if err != nil {
			t.Fatal(err)
		}
		leader := s.CachedInfo().Cluster.Leader
		if victim = tc.index(leader); victim < 0 {
			t.Fatalf("catalog leader %q is none of the servers", leader)
		}
		if victim == 0 {
			if _, err := th.nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+catalog, nil, 5*time.Second); err != nil {
				t.Fatalf("step the catalog's leader down: %v", err)
			}
			eventually(t, 30*time.Second, "a catalog leader elected", func() bool {
				s, err := js.Stream(ctx, catalog)
				return err == nil && s.CachedInfo().Cluster.Leader != "" && s.CachedInfo().Cluster.Leader != leader
			})
		}
	}
	// The client's connection is to another server: a request lost with
	// a connection cannot be told from one that failed, and a table
	// creation has no command id to make sending it again safe.
	wnc, err := nats.Connect(tc.urls[3-victim]) // neither the node's server (0) nor the victim
	if err != nil {
		t.Fatal(err)
	}
	defer wnc.Close()
	// The client waits longer than the node's own bound on a table
	// command (natsapi's TableTimeout, 30 s): one that gave up first
	// would send again a creation the node was still settling, and meet
	// its own table.
	c := client.New(wnc, client.WithTimeout(45*time.Second), client.WithAttempts(1))

	var (
		mu      sync.Mutex
		created []time.Time
		names   []string
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	wg.Go(func() {
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("T%04d", n)
			for { // until acknowledged; a request lost with its connection is sent again
				_, err := c.CreateTable(ctx, name)
				if err == nil {
					mu.Lock()
					created, names = append(created, time.Now()), append(names, name)
					mu.Unlock()
					break
				}
				if code := engine.ErrorCode(err); code == engine.CodeTableAlreadyExists || ctx.Err() != nil {
					t.Errorf("create %s: %v", name, err)
					return
				}
				t.Logf("create %s: %v (sent again)", name, err)
				time.Sleep(20 * time.Millisecond)
			}
		}
	})
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(created) }
	eventually(t, 30*time.Second, "creations under way", func() bool { return count() >= 5 })

	before := count()
	killed := time.Now()
	tc.stop(victim)
	eventually(t, 90*time.Second, "creations resumed", func() bool { return count() >= before+5 })
	close(stop)
	wg.Wait()

	mu.Lock()
	var gap time.Duration
	for k := 1; k < len(created); k++ {
		if created[k].After(killed) {
			from := created[k-1]
			if from.Before(killed) {
				from = killed
			}
			gap = max(gap, created[k].Sub(from))
		}
	}
	got := append([]string(nil), names...)
	mu.Unlock()
	t.Logf("catalog leader (server %d) shut down; longest pause of the creations after it: %v; %d tables created", victim, gap.Round(time.Millisecond), len(got))

	seen := map[string]int{}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lc, err := js.Stream(cctx, catalog)
	if err != nil {
		t.Fatal(err)
	}
	last := lc.CachedInfo().State.LastSeq
	for seq := uint64(1); seq <= last; seq++ {
		m, err := lc.GetMsg(cctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := journal.DecodeCatalogRecord(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind == engine.CatalogTableCreated {
			seen[rec.Name]++
		}
	}
	for _, name := range got {
		if seen[name] != 1 {
			t.Errorf("table %s created %d times in the catalog", name, seen[name])
		}
	}
}
