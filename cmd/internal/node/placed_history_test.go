package node_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
)

// TestPlacedHistoryPruned: on 3 hosts with 2 replicas, where no host
// holds a table whole, the journal of a table with a retention of 1,000
// records is pruned as on one host: each host writes shard bases of its
// share (those whose shards see no writes too), and the pruner cuts where
// every shard has one. A host joining afterwards starts its views from
// them, the records before the cut being gone, and reads every entity as
// the others do.
func TestPlacedHistoryPruned(t *testing.T) {
	config := func() node.Config {
		cfg := node.Config{PruneEvery: 100 * time.Millisecond, PruneGrace: time.Millisecond, ViewReplicas: 2}
		cfg.Views.SnapshotEvery, cfg.Views.SnapshotInterval, cfg.Views.DedupWindow = 200, -1, 100*time.Millisecond
		return cfg
	}
	first := startNode(t, config())
	join := func() *testHost {
		cfg := config()
		cfg.NATSURL, cfg.NATSCreds = first.h.ClientURL(), first.h.NATSCredsFile()
		return startNode(t, cfg)
	}
	hosts := []*testHost{first, join(), join()}
	for _, h := range hosts {
		eventually(t, 30*time.Second, "every host live", func() bool { return len(h.h.Members().Live()) == len(hosts) })
	}
	ctx := ctxT(t)
	if _, err := first.c.CreateTable(ctx, "Hist"); err != nil {
		t.Fatal(err)
	}
	placedViews(t, hosts, "Hist")
	retention := "1000"
	if h := tableHistory(t, first, "Hist", &retention); h.Retention != "1000" {
		t.Fatalf("after the PUT: %+v", h)
	}
	// Updates to fifty entities of one partition: one shard, held by two
	// of the three hosts.
	var last uint64
	want := map[string]int64{}
	written := 0
	write := func(n int) {
		t.Helper()
		for i := written; i < written+n; i++ {
			rk := fmt.Sprintf("%03d", i%50)
			rep, err := hosts[i%3].c.InsertOrReplace(ctx, "Hist", engine.NewEntity("hot", rk, engine.Property{Name: "N", Value: engine.Int64(int64(i))}))
			if err != nil {
				t.Fatal(err)
			}
			last, want[rk] = max(last, rep.Seq), int64(i)
		}
		written += n
	}
	write(1500)
	for i := 0; ; i++ {
		if h := tableHistory(t, first, "Hist", nil); h.Horizon > 1 && h.Records <= 2500 {
			t.Logf("after %d updates: the journal holds %d records from %d", written, h.Records, h.Horizon)
			break
		}
		if i == 100 {
			t.Fatalf("after %d updates the journal was not pruned: %+v", written, tableHistory(t, first, "Hist", nil))
		}
		write(100)
	}
	// A fourth host: its views start from the shard bases.
	hosts = append(hosts, join())
	for _, h := range hosts {
		eventually(t, 30*time.Second, "every host live", func() bool { return len(h.h.Members().Live()) == len(hosts) })
	}
	placedViews(t, hosts, "Hist")
	write(10)
	for hi, h := range hosts {
		got := 0
		for qe, err := range h.c.QueryAll(ctx, "Hist", client.QueryAtLeast(last)) {
			if err != nil {
				t.Fatalf("host %d: %v", hi, err)
			}
			if n, _ := qe.Entity.Get("N"); n.Int() != want[qe.Entity.RowKey] {
				t.Fatalf("host %d: %s is %d, want %d", hi, qe.Entity.RowKey, n.Int(), want[qe.Entity.RowKey])
			}
			got++
		}
		if got != 50 {
			t.Fatalf("host %d reads %d entities, want 50", hi, got)
		}
	}
}
