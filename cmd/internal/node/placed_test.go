package node_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/projections"
)

// startPlaced starts n hosts on one NATS server, each shard of a table
// held by replicas of them, and waits until each sees them all.
func startPlaced(t *testing.T, n, replicas int) []*testHost {
	t.Helper()
	return startPlacedWith(t, n, node.Config{ViewReplicas: replicas})
}

// startPlacedWith is startPlaced with the hosts' configuration (its
// ViewReplicas set).
func startPlacedWith(t *testing.T, n int, cfg node.Config) []*testHost {
	t.Helper()
	first := startNode(t, cfg)
	hosts := []*testHost{first}
	for range n - 1 {
		c := cfg
		c.NATSURL, c.NATSCreds = first.h.ClientURL(), first.h.NATSCredsFile()
		hosts = append(hosts, startNode(t, c))
	}
	for _, h := range hosts {
		eventually(t, 30*time.Second, "every host live", func() bool { return len(h.h.Members().Live()) == n })
	}
	return hosts
}

// placedViews waits until every host's view of table holds only its
// shards and has caught up with the journal, and returns them.
func placedViews(t *testing.T, hosts []*testHost, table string) []*projections.Table {
	t.Helper()
	ctx := ctxT(t)
	views := make([]*projections.Table, len(hosts))
	for i, h := range hosts {
		eventually(t, 30*time.Second, "a view of some shards", func() bool {
			tv, ok := h.h.Views().Table(table)
			if !ok || !tv.Partial() || h.h.Views().WaitTableReady(ctx, tv.Name(), tv.Epoch()) != nil {
				return false
			}
			views[i] = tv
			return true
		})
	}
	return views
}

// TestPlacedWrites: on 3 hosts with 2 replicas, every host takes every
// command whatever the shard of its partition (the NATS queue group
// spreads them): one that does not hold the partition sends it to a
// holder. Each host's view holds only its shards, every shard is held
// by two hosts, and a write decided by a holder is seen by the other.
func TestPlacedWrites(t *testing.T) {
	hosts := startPlaced(t, 3, 2)
	ctx := ctxT(t)
	info, err := hosts[0].c.CreateTable(ctx, "Placed")
	if err != nil {
		t.Fatal(err)
	}
	if info.Epoch == 0 {
		t.Fatal("no epoch")
	}
	views := placedViews(t, hosts, "Placed")
	const n = 240
	var last uint64
	for i := range n {
		h := hosts[i%len(hosts)]
		rep, err := h.c.Insert(ctx, "Placed", engine.NewEntity(fmt.Sprintf("p%02d", i%80), fmt.Sprint(i), engine.Property{Name: "N", Value: engine.Int64(int64(i))}))
		if err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
		last = max(last, rep.Seq)
	}
	// A stale ETag is refused by the holder, whichever host took it.
	first, err := hosts[1].c.InsertOrReplace(ctx, "Placed", engine.NewEntity("p00", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hosts[2].c.Replace(ctx, "Placed", engine.NewEntity("p00", "x"), first.ETag); err != nil {
		t.Fatal(err)
	}
	if _, err := hosts[0].c.Replace(ctx, "Placed", engine.NewEntity("p00", "x"), first.ETag); engine.ErrorCode(err) != engine.CodeUpdateConditionNotSatisfied {
		t.Fatalf("a stale ETag: %v", err)
	}
	held := map[string]int{} // partition: hosts holding it
	for i, tv := range views {
		if _, err := tv.WaitSeq(ctx, last); err != nil {
			t.Fatal(err)
		}
		snap := tv.Snapshot()
		count := 0
		for j := range n {
			pk := fmt.Sprintf("p%02d", j%80)
			_, ok := snap.Get(pk, fmt.Sprint(j))
			if ok != tv.Holds(pk) {
				t.Fatalf("host %d: entity %s/%d present %v, held %v", i, pk, j, ok, tv.Holds(pk))
			}
			if ok {
				count++
			}
		}
		if count == 0 || count == n {
			t.Errorf("host %d holds %d of %d entities", i, count, n)
		}
		// Of the table's 64 shards, 2 × 64 / 3 = 42.7 each, and the bound
		// of the placement holds the fullest at 44 (0.69 of the table).
		shards := 0
		for s := range engine.DefaultShards {
			pk := ""
			for k := 0; engine.Shard(pk, engine.DefaultShards) != s; k++ {
				pk = fmt.Sprint("k", k)
			}
			if tv.Holds(pk) {
				shards++
			}
		}
		if shards < 32 || shards > 44 {
			t.Errorf("host %d holds %d of %d shards", i, shards, engine.DefaultShards)
		}
		for p := range 80 {
			if pk := fmt.Sprintf("p%02d", p); tv.Holds(pk) {
				held[pk]++
			}
		}
	}
	for p := range 80 {
		if pk := fmt.Sprintf("p%02d", p); held[pk] != 2 {
			t.Errorf("partition %s is held by %d hosts, want 2", pk, held[pk])
		}
	}
}

// TestPlacedReads: on 3 hosts with 2 replicas, every host answers every
// read as one host holding everything would: point reads of any
// partition, a partition's query, and queries across partitions page by
// page (NATS and HTTP, with small pages and continuations), read your
// writes with the position of a write another host decided, and reads
// as of a past position.
func TestPlacedReads(t *testing.T) {
	hosts := startPlaced(t, 3, 2)
	ctx := ctxT(t)
	if _, err := hosts[0].c.CreateTable(ctx, "Reads"); err != nil {
		t.Fatal(err)
	}
	views := placedViews(t, hosts, "Reads")
	const n = 150
	want := map[string]int64{}
	var last uint64
	for i := range n {
		pk, rk := fmt.Sprintf("p%02d", i%50), fmt.Sprintf("r%03d", i)
		rep, err := hosts[i%3].c.Insert(ctx, "Reads", engine.NewEntity(pk, rk, engine.Property{Name: "N", Value: engine.Int64(int64(i))}))
		if err != nil {
			t.Fatal(err)
		}
		want[pk+"/"+rk] = int64(i)
		last = max(last, rep.Seq)
	}
	var firstFresh uint64
	for hi, h := range hosts {
		// Read your write: a write, then a read at its position, on
		// every host, whichever host decided it.
		rep, err := h.c.InsertOrReplace(ctx, "Reads", engine.NewEntity("p07", "fresh", engine.Property{Name: "N", Value: engine.Int64(int64(1000 + hi))}))
		if err != nil {
			t.Fatal(err)
		}
		last = max(last, rep.Seq)
		if hi == 0 {
			firstFresh = rep.Seq
		}
		for _, o := range hosts {
			e, _, err := o.c.Retrieve(ctx, "Reads", "p07", "fresh", client.AtLeast(rep.Seq))
			if err != nil || e.Properties[0].Value.Int() != int64(1000+hi) {
				t.Fatalf("read at position %d: %+v, %v", rep.Seq, e, err)
			}
		}
	}
	want["p07/fresh"] = 1002
	// As of the first fresh write, through every host: the value then.
	for _, h := range hosts {
		e, _, err := h.c.Retrieve(ctx, "Reads", "p07", "fresh", client.AsOf(firstFresh))
		if err != nil || e.Properties[0].Value.Int() != 1000 {
			t.Fatalf("as of %d: %+v, %v", firstFresh, e, err)
		}
	}
	// A reply promises the write is visible on the host that decided it:
	// the reads below, without a position, wait for every view to show
	// every write (a read with a position does it for itself, as above).
	for _, tv := range views {
		if _, err := tv.WaitSeq(ctx, last); err != nil {
			t.Fatal(err)
		}
	}
	for hi, h := range hosts {
		// Point reads of every entity, and of one that does not exist.
		for i := range n {
			pk, rk := fmt.Sprintf("p%02d", i%50), fmt.Sprintf("r%03d", i)
			e, _, err := h.c.Retrieve(ctx, "Reads", pk, rk)
			if err != nil || e.Properties[0].Value.Int() != int64(i) {
				t.Fatalf("host %d: retrieve %s/%s: %+v, %v", hi, pk, rk, e, err)
			}
		}
		if _, _, err := h.c.Retrieve(ctx, "Reads", "p01", "none"); engine.ErrorCode(err) != engine.CodeResourceNotFound {
			t.Fatalf("host %d: a missing entity: %v", hi, err)
		}
		// Every entity over NATS, in key order, in pages of 7.
		var got []string
		for qe, err := range h.c.QueryAll(ctx, "Reads", client.QueryTop(7)) {
			if err != nil {
				t.Fatalf("host %d: %v", hi, err)
			}
			got = append(got, qe.Entity.PartitionKey+"/"+qe.Entity.RowKey)
		}
		checkAll(t, fmt.Sprintf("host %d, NATS", hi), got, want)
		// And over HTTP, with a filter, in pages of 9.
		svc := accountService(t, h.h, httpapi.DevAccountName, httpapi.DevAccountKey)
		filter := "N lt 100 or RowKey eq 'fresh'"
		top := int32(9)
		pager := svc.NewClient("Reads").NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Top: &top})
		got = got[:0]
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				t.Fatalf("host %d: %v", hi, err)
			}
			for _, raw := range page.Entities {
				var e struct{ PartitionKey, RowKey string }
				if err := json.Unmarshal(raw, &e); err != nil {
					t.Fatal(err)
				}
				got = append(got, e.PartitionKey+"/"+e.RowKey)
			}
		}
		filtered := map[string]int64{}
		for k, v := range want {
			if v < 100 || strings.HasSuffix(k, "/fresh") {
				filtered[k] = v
			}
		}
		checkAll(t, fmt.Sprintf("host %d, HTTP", hi), got, filtered)
		// One partition's query.
		pf := "PartitionKey eq 'p03'"
		pager = svc.NewClient("Reads").NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &pf})
		page, err := pager.NextPage(ctx)
		if err != nil || len(page.Entities) != 3 {
			t.Fatalf("host %d: partition p03: %d entities, %v", hi, len(page.Entities), err)
		}
		// A point read over HTTP.
		ent, err := svc.NewClient("Reads").GetEntity(ctx, "p11", "r011", nil)
		if err != nil || !strings.Contains(string(ent.Value), `"N":"11"`) {
			t.Fatalf("host %d: GetEntity: %s, %v", hi, ent.Value, err)
		}
	}
	// Paged over NATS through every host in turn while entities are
	// inserted and deleted between the pages: each host reads the
	// snapshot it held for the query's first page, so the pages hold
	// the table as it was, once each, in order.
	var got []string
	next := ""
	for page := 0; ; page++ {
		opts := []client.QueryOption{client.QueryTop(20)}
		if next != "" {
			opts = append(opts, client.QueryContinue(next))
		}
		rep, err := hosts[page%3].c.Query(ctx, "Reads", opts...)
		if err != nil {
			t.Fatal(err)
		}
		for _, qe := range rep.Entities {
			got = append(got, qe.Entity.PartitionKey+"/"+qe.Entity.RowKey)
		}
		if next = rep.Continuation; next == "" {
			break
		}
		for i := range 3 {
			pk := fmt.Sprintf("p%02d", (page*3+i)%50)
			if _, err := hosts[i].c.Insert(ctx, "Reads", engine.NewEntity(pk, fmt.Sprintf("new%03d", page))); err != nil {
				t.Fatal(err)
			}
			if _, err := hosts[i].c.Delete(ctx, "Reads", fmt.Sprintf("p%02d", 49-(page*3+i)%50), fmt.Sprintf("r%03d", 149-(page*3+i)%150), "*"); err != nil && engine.ErrorCode(err) != engine.CodeResourceNotFound {
				t.Fatal(err)
			}
		}
	}
	checkAll(t, "paged over NATS while written", got, want)
}

// checkAll checks that got lists exactly want's keys, in key order.
func checkAll(t *testing.T, what string, got []string, want map[string]int64) {
	t.Helper()
	keys := slices.Sorted(maps.Keys(want))
	if !slices.Equal(got, keys) {
		t.Fatalf("%s: %d entities, want %d: %v", what, len(got), len(keys), got)
	}
}

// TestPlacedMoves: a host joining a placed cluster takes its shards and
// the others give theirs up, and the cluster goes back when it leaves,
// while writes and reads go on through every host: each view is
// replaced only once its successor, holding the new shards, has caught
// up. Nothing written is lost and every read sees every write.
func TestPlacedMoves(t *testing.T) {
	first := startNode(t, node.Config{ViewReplicas: 2})
	second := startNode(t, node.Config{NATSURL: first.h.ClientURL(), NATSCreds: first.h.NATSCredsFile(), ViewReplicas: 2})
	ctx := ctxT(t)
	eventually(t, 30*time.Second, "two hosts live", func() bool { return len(first.h.Members().Live()) == 2 })
	if _, err := first.c.CreateTable(ctx, "Moves"); err != nil {
		t.Fatal(err)
	}
	// Two hosts, two replicas: each holds every shard.
	for _, h := range []*testHost{first, second} {
		eventually(t, 30*time.Second, "a whole view", func() bool {
			tv, ok := h.h.Views().Table("Moves")
			return ok && !tv.Partial()
		})
	}
	written := map[string]int64{}
	var last uint64 // the position of the last write: reads on other hosts wait for it
	var mu sync.Mutex
	var slowest atomic.Int64 // the longest write, retries included, in nanoseconds
	var retried atomic.Int64 // writes refused with ServerBusy and sent again
	write := func(h *testHost, i int) {
		t.Helper()
		pk, rk := fmt.Sprintf("p%02d", i%40), fmt.Sprintf("r%04d", i)
		start := time.Now()
		defer func() {
			if d := int64(time.Since(start)); d > slowest.Load() {
				slowest.Store(d)
			}
		}()
		for try := 0; ; try++ {
			if try > 0 {
				retried.Add(1)
			}
			rep, err := h.c.InsertOrReplace(ctx, "Moves", engine.NewEntity(pk, rk, engine.Property{Name: "N", Value: engine.Int64(int64(i))}), client.WithID(fmt.Sprint("w", i)))
			if err == nil {
				mu.Lock()
				last = max(last, rep.Seq)
				mu.Unlock()
				break
			}
			if engine.ErrorCode(err) != engine.CodeServerBusy || try > 50 {
				t.Errorf("write %d: %v", i, err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		mu.Lock()
		written[pk+"/"+rk] = int64(i)
		mu.Unlock()
	}
	for i := range 100 {
		write([]*testHost{first, second}[i%2], i)
	}
	// Writes go on while a third host joins and the views move.
	stop := make(chan struct{})
	var writers sync.WaitGroup
	writers.Go(func() {
		for i := 100; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			write([]*testHost{first, second}[i%2], i)
		}
	})
	slowest.Store(0)
	third := startNode(t, node.Config{NATSURL: first.h.ClientURL(), NATSCreds: first.h.NATSCredsFile(), ViewReplicas: 2})
	hosts := []*testHost{first, second, third}
	placedViews(t, hosts, "Moves")
	close(stop)
	writers.Wait()
	// A figure, not an assertion: how long a write took at most while
	// the third host joined and the views moved.
	t.Logf("while a host joined: slowest write %v, %d writes refused and sent again",
		time.Duration(slowest.Load()).Round(time.Millisecond), retried.Load())
	check := func(hosts []*testHost) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for hi, h := range hosts {
			var got []string
			for qe, err := range h.c.QueryAll(ctx, "Moves", client.QueryTop(50), client.QueryAtLeast(last)) {
				if err != nil {
					t.Fatalf("host %d: %v", hi, err)
				}
				got = append(got, qe.Entity.PartitionKey+"/"+qe.Entity.RowKey)
			}
			checkAll(t, fmt.Sprintf("host %d", hi), got, written)
		}
	}
	check(hosts)
	// Each host says what it moved (/metrics) and what it holds now (the
	// operators' cluster report).
	for hi, h := range hosts {
		var m map[string]float64
		eventually(t, 30*time.Second, "no move under way", func() bool {
			m = scrapeMetrics(t, h)
			return m["cairn_view_moves"] == 0 && m["cairn_view_move_records_behind"] == 0
		})
		// The first two replaced their whole views; the third placed
		// its views as they started (no move).
		if done := m[`cairn_view_moves_total{outcome="done"}`]; hi < 2 && (done < 1 || m["cairn_view_move_seconds_total"] <= 0) {
			t.Errorf("host %d: %v moves done in %vs", hi, done, m["cairn_view_move_seconds_total"])
		}
		var rep struct {
			Self, ViewReplicas any
			Hosts              []struct {
				Name       string
				Live, Self bool
			}
			Holdings []projections.Holding
			Moves    []projections.Move
		}
		getJSON(t, h.h.OperatorToken(), h.h.HTTPURL()+node.ClusterPath, &rep)
		live, self := 0, 0
		for _, x := range rep.Hosts {
			if x.Live {
				live++
			}
			if x.Self {
				self++
			}
		}
		i := slices.IndexFunc(rep.Holdings, func(x projections.Holding) bool { return x.Table == "Moves" })
		if live != 3 || self != 1 || rep.ViewReplicas != float64(2) || i < 0 || rep.Holdings[i].Shards != engine.DefaultShards ||
			rep.Holdings[i].Held < 32 || rep.Holdings[i].Held > 44 || m["cairn_view_shards_held"] < float64(rep.Holdings[i].Held) || len(rep.Moves) != 0 {
			t.Errorf("host %d: the cluster report %+v", hi, rep)
		}
	}
	// The third leaves: the first two hold every shard again.
	third.stop(t)
	for _, h := range []*testHost{first, second} {
		eventually(t, 30*time.Second, "a whole view again", func() bool {
			tv, ok := h.h.Views().Table("Moves")
			return ok && !tv.Partial()
		})
	}
	write(first, 100_000)
	check([]*testHost{first, second})
}

// TestPlacedFunctions: functions read and write partitions whichever
// hosts hold them. The built-in archive function, run by whichever host
// takes each message, reads an entity (of a shard its host may not
// hold), copies it to another table and deletes it: every entity ends in
// the archive, none in its first table.
func TestPlacedFunctions(t *testing.T) {
	hosts := startPlaced(t, 3, 2)
	ctx := ctxT(t)
	for _, name := range []string{"Staff", "Former"} {
		if _, err := hosts[0].c.CreateTable(ctx, name); err != nil {
			t.Fatal(err)
		}
		placedViews(t, hosts, name)
	}
	const n = 30
	var last uint64
	for i := range n {
		rep, err := hosts[i%3].c.Insert(ctx, "Staff", engine.NewEntity(fmt.Sprintf("d%02d", i), "e", engine.Property{Name: "N", Value: engine.Int64(int64(i))}))
		if err != nil {
			t.Fatal(err)
		}
		last = max(last, rep.Seq)
	}
	js, err := jetstream.New(hosts[0].nc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		body := fmt.Sprintf(`{"from":"Staff","to":"Former","partitionKey":"d%02d","rowKey":"e"}`, i)
		if _, err := js.Publish(ctx, "cairn.queue.archive", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	count := func(table string) int {
		k := 0
		for _, err := range hosts[1].c.QueryAll(ctx, table) {
			if err != nil {
				t.Fatal(err)
			}
			k++
		}
		return k
	}
	eventually(t, 30*time.Second, "every entity archived", func() bool { return count("Former") == n && count("Staff") == 0 })
	for i := range n {
		e, _, err := hosts[2].c.Retrieve(ctx, "Former", fmt.Sprintf("d%02d", i), "e")
		if err != nil || e.Properties[0].Value.Int() != int64(i) {
			t.Fatalf("archived entity %d: %+v, %v", i, e, err)
		}
	}
}

// TestPlacedChangeFeed: a waiting change feed request for one partition,
// on whichever host takes it, is answered by a write to that partition,
// held by that host or not.
func TestPlacedChangeFeed(t *testing.T) {
	hosts := startPlaced(t, 3, 2)
	ctx := ctxT(t)
	if _, err := hosts[0].c.CreateTable(ctx, "Feed"); err != nil {
		t.Fatal(err)
	}
	views := placedViews(t, hosts, "Feed")
	for i := range 12 {
		pk := fmt.Sprintf("f%02d", i)
		// Some partition each host does not hold, and some it does.
		from := views[i%3].Snapshot().Seq + 1
		got := make(chan *wire.ChangesReply, 1)
		go func() {
			// A page may hold nothing and say where to ask from next (the
			// host's view was past from already, with records of other
			// partitions only): a client asks again from there, as here.
			// A feed that skipped the write would never answer it.
			for {
				rep, err := hosts[i%3].c.Changes(ctx, "Feed", wire.ChangesRequest{From: from, Wait: 20 * time.Second, Partitions: []string{pk}})
				if err != nil {
					t.Error(err)
				}
				if err != nil || len(rep.Changes) > 0 {
					got <- rep
					return
				}
				from = rep.Next
			}
		}()
		time.Sleep(50 * time.Millisecond) // not a bound: the request may also see the write at once
		if _, err := hosts[(i+1)%3].c.Insert(ctx, "Feed", engine.NewEntity(pk, "1")); err != nil {
			t.Fatal(err)
		}
		select {
		case rep := <-got:
			if rep == nil || len(rep.Changes) != 1 || rep.Changes[0].PartitionKey != pk {
				t.Fatalf("partition %s (held here: %v): %+v", pk, views[i%3].Holds(pk), rep)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("partition %s: the waiting request was not answered", pk)
		}
	}
}

// TestPlacedKill: a host of a placed cluster killed with SIGKILL under a
// write and read load. Writes carry command ids and are resent when
// unanswered, every acknowledged write is read back at its position
// through another host, and at the end every acknowledged write is
// there: nothing acknowledged is lost and no read at a write's position
// misses. The other hosts then hold every shard again (2 hosts, 2
// replicas). The slowest call after the kill, and the time until the
// shards are held again, are logged (figures, not assertions).
func TestPlacedKill(t *testing.T) {
	a := startNode(t, node.Config{ViewReplicas: 2})
	b := startNode(t, node.Config{NATSURL: a.h.ClientURL(), NATSCreds: a.h.NATSCredsFile(), ViewReplicas: 2})
	victim := nodetest.StartChild(t, nodetest.ChildConfig{NATSURL: a.h.ClientURL(), NATSCreds: a.h.NATSCredsFile(), ViewReplicas: 2})
	ctx := ctxT(t)
	for _, h := range []*testHost{a, b} {
		eventually(t, 30*time.Second, "three hosts live", func() bool { return len(h.h.Members().Live()) == 3 })
	}
	if _, err := a.c.CreateTable(ctx, "Kill"); err != nil {
		t.Fatal(err)
	}
	placedViews(t, []*testHost{a, b}, "Kill")
	// Clients that resend an unanswered request (one the killed host took).
	clients := []*client.Client{
		client.New(a.nc, client.WithTimeout(20*time.Second), client.WithResend(500*time.Millisecond)),
		client.New(b.nc, client.WithTimeout(20*time.Second), client.WithResend(500*time.Millisecond)),
	}
	type write struct {
		pk, rk string
		n      int64
	}
	var mu sync.Mutex
	var acked []write
	var killed atomic.Bool
	var slowest atomic.Int64 // after the kill, in nanoseconds
	note := func(start time.Time) {
		if d := time.Since(start); killed.Load() && int64(d) > slowest.Load() {
			slowest.Store(int64(d))
		}
	}
	stop := make(chan struct{})
	var workers sync.WaitGroup
	for w := range 4 {
		workers.Go(func() {
			c := clients[w%2]
			reader := clients[(w+1)%2]
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				pk, rk := fmt.Sprintf("p%02d", (w*7+i)%40), fmt.Sprintf("w%d-%05d", w, i)
				start := time.Now()
				rep, err := c.InsertOrReplace(ctx, "Kill", engine.NewEntity(pk, rk, engine.Property{Name: "N", Value: engine.Int64(int64(i))}), client.WithID(pk+"/"+rk))
				note(start)
				if err != nil {
					if engine.ErrorCode(err) == engine.CodeServerBusy {
						continue // refused, nothing acknowledged: a retry is the client's to make
					}
					t.Errorf("write %s/%s: %v", pk, rk, err)
					return
				}
				mu.Lock()
				acked = append(acked, write{pk, rk, int64(i)})
				mu.Unlock()
				start = time.Now()
				e, _, err := reader.Retrieve(ctx, "Kill", pk, rk, client.AtLeast(rep.Seq))
				note(start)
				if err != nil || e.Properties[0].Value.Int() != int64(i) {
					t.Errorf("read %s/%s at %d: %+v, %v", pk, rk, rep.Seq, e, err)
					return
				}
				time.Sleep(10 * time.Millisecond) // a steady load, not a flood to check afterwards
			}
		})
	}
	time.Sleep(500 * time.Millisecond) // a load before the kill: not a bound
	killed.Store(true)
	killedAt := time.Now()
	victim.Kill(t)
	for _, h := range []*testHost{a, b} {
		eventually(t, 60*time.Second, "every shard held again", func() bool {
			tv, ok := h.h.Views().Table("Kill")
			return ok && !tv.Partial()
		})
	}
	again := time.Since(killedAt)
	time.Sleep(500 * time.Millisecond) // the load goes on a little on the two
	close(stop)
	workers.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(acked) == 0 {
		t.Fatal("no write acknowledged")
	}
	var last uint64
	for _, h := range []*testHost{a, b} {
		tv, _ := h.h.Views().Table("Kill")
		last = max(last, tv.Snapshot().Seq)
	}
	for _, c := range clients {
		for _, w := range acked {
			e, _, err := c.Retrieve(ctx, "Kill", w.pk, w.rk, client.AtLeast(last))
			if err != nil || e.Properties[0].Value.Int() != w.n {
				t.Fatalf("acknowledged write %s/%s: %+v, %v", w.pk, w.rk, e, err)
			}
		}
	}
	t.Logf("%d writes acknowledged and read back; slowest call after the kill %v; every shard held again %v after the kill",
		len(acked), time.Duration(slowest.Load()).Round(time.Millisecond), again.Round(time.Millisecond))
}
