package node_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/journal"
)

// chaosCluster is three NATS servers, each in a child process with its
// own store and fixed ports, so that a server killed with SIGKILL is
// restarted on the same ports and store.
type chaosCluster struct {
	cfgs     []nodetest.ChildConfig
	children []*nodetest.Child
	urls     []string
}

func startChaosCluster(t *testing.T) *chaosCluster {
	t.Helper()
	var routes []string
	var clusterAddrs []string
	for range 3 {
		a := nodetest.FreeAddr(t)
		clusterAddrs = append(clusterAddrs, a)
		routes = append(routes, "nats://"+a)
	}
	cc := &chaosCluster{}
	for i := range 3 {
		listen := nodetest.FreeAddr(t)
		cc.cfgs = append(cc.cfgs, nodetest.ChildConfig{
			ServerOnly:    true,
			ServerName:    fmt.Sprintf("n%d", i),
			DataDir:       t.TempDir(),
			NATSListen:    listen,
			ClusterListen: clusterAddrs[i],
			Routes:        routes,
		})
		cc.urls = append(cc.urls, "nats://"+listen)
	}
	cc.children = make([]*nodetest.Child, 3)
	for i := range cc.cfgs {
		cc.start(t, i)
	}
	return cc
}

func (cc *chaosCluster) start(t *testing.T, i int) {
	t.Helper()
	cc.children[i] = nodetest.StartServerChild(t, cc.cfgs[i])
}

func (cc *chaosCluster) kill(t *testing.T, i int) {
	t.Helper()
	cc.children[i].Kill(t)
}

func (cc *chaosCluster) url() string { return strings.Join(cc.urls, ",") }

func (cc *chaosCluster) index(name string) int {
	for i, c := range cc.cfgs {
		if c.ServerName == name {
			return i
		}
	}
	return -1
}

// chaosAck is a write the cluster acknowledged.
// longestPause returns the longest time between two answers (times, in
// the order they came) of which the later came after killed, with when it
// began and ended.
func longestPause(times []time.Time, killed time.Time) string {
	slices.SortFunc(times, time.Time.Compare)
	var gap time.Duration
	var from, to time.Time
	for k := 1; k < len(times); k++ {
		if !times[k].Before(killed) && times[k].Sub(times[k-1]) > gap {
			gap, from, to = times[k].Sub(times[k-1]), times[k-1], times[k]
		}
	}
	const clock = "15:04:05.000"
	return fmt.Sprintf("%v [killed %s, from %s to %s]", gap.Round(time.Millisecond), killed.UTC().Format(clock), from.UTC().Format(clock), to.UTC().Format(clock))
}

type chaosAck struct {
	id       string
	sent, at time.Time
	seq      uint64
	etags    [2]string
}

// TestClusterChaos runs two host processes against three NATS server
// processes with R3 streams, under a write load of two-row batches with
// command ids and a stream of queue messages (a native function "marker",
// on both hosts, takes them from one queue and writes a row per message).
// It kills with SIGKILL, in turn, the server leading the table's stream,
// then a follower, each restarted on its store and ports, then a host,
// restarted on its data directory. Afterwards: every acknowledged write is
// in the journal exactly once, whole, at the position and with the ETags
// its reply named, and nothing else is; every acknowledged message wrote
// its row exactly once, and none is left in the queue. The
// writes, and a reader retrieving one row over and over, must resume
// after each kill; their longest pauses and JetStream's own failover time
// are logged side by side, not asserted.
func TestClusterChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server and host processes")
	}
	r := seededRand(t, 7)
	began := time.Now()
	phase := func(what string) { t.Logf("%6.1fs %s", time.Since(began).Seconds(), what) }
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := startChaosCluster(t)
	waitChaosJetStream(t, cl.url())

	phase("servers up")
	hostCfg := func() nodetest.ChildConfig {
		return nodetest.ChildConfig{DataDir: t.TempDir(), NATSURL: cl.url(), Replicas: 3, MarkerQueue: "marker"}
	}
	hostCfgs := []nodetest.ChildConfig{hostCfg(), hostCfg()}
	// A host that starts while JetStream is still settling (after the
	// cluster's start or a server's restart) may give up, a bucket lookup
	// timing out, and exit 1: it is started again, as its supervisor
	// would.
	startHost := func(i int) *nodetest.Child {
		t.Helper()
		for attempt := 1; ; attempt++ {
			h := nodetest.SpawnChild(t, hostCfgs[i])
			err := h.WaitReady(90 * time.Second)
			if err == nil {
				return h
			}
			if attempt == 3 {
				t.Fatalf("host %d not started in 3 attempts: %v", i, err)
			}
			t.Logf("host %d start, attempt %d: %v", i, attempt, err)
		}
	}
	hosts := []*nodetest.Child{startHost(0), startHost(1)}

	nc, err := nats.Connect(cl.url(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// A new cluster may still be electing stream leaders: allow for it.
	slow := client.New(nc, client.WithTimeout(30*time.Second))
	epochs := map[string]uint64{}
	for _, name := range []string{"Chaos", "Markers"} {
		info, err := slow.CreateTable(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		epochs[name] = info.Epoch
	}
	stream := journal.StreamName("cairn", "Chaos", epochs["Chaos"])
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(nc, client.WithTimeout(2*time.Second), client.WithAttempts(1))

	var (
		mu    sync.Mutex
		acks  []chaosAck
		reads []time.Time // when a read was answered
		// when a read was answered that the row does not exist, which a
		// read at its write's position must never be
		notFound []time.Time
		queued   []string // messages JetStream acknowledged
		errs     = map[string]int{}
		stop     = make(chan struct{})
		abort    = make(chan struct{}) // the test failed: give up at once
		wg       sync.WaitGroup
	)
	// However the test ends, no goroutine of it runs on after it.
	defer func() {
		close(abort)
		wg.Wait()
	}()
	countErr := func(err error) {
		code := string(engine.ErrorCode(err))
		if code == "" || code == string(engine.CodeInternalError) {
			code = err.Error()
		}
		mu.Lock()
		errs[code]++
		mu.Unlock()
	}
	// retry runs op until it succeeds: every op is made safe to repeat by
	// its command or message id. It reports false if the test's time ran
	// out first.
	retry := func(what string, op func() error) bool {
		for {
			err := op()
			if err == nil {
				return true
			}
			select {
			case <-abort:
				return false
			default:
			}
			if ctx.Err() != nil {
				t.Errorf("%s never acknowledged: %v", what, err)
				return false
			}
			countErr(err)
			time.Sleep(20 * time.Millisecond)
		}
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		case <-abort:
			return true
		default:
			return false
		}
	}
	const writers = 3
	for w := range writers {
		wg.Go(func() {
			pk := fmt.Sprintf("p%d", w)
			for n := 0; !stopped(); n++ {
				id := fmt.Sprintf("w%d-%d", w, n)
				ops := []engine.Operation{
					{Op: engine.OpInsert, Entity: engine.NewEntity(pk, id+"-a")},
					{Op: engine.OpInsert, Entity: engine.NewEntity(pk, id+"-b")},
				}
				a := chaosAck{id: id}
				if !retry("write "+id, func() error {
					a.sent = time.Now()
					rep, err := c.Batch(ctx, "Chaos", ops, client.WithID(id))
					if err != nil {
						return err
					}
					a.at, a.seq = time.Now(), rep.Seq
					for k := range a.etags {
						a.etags[k] = rep.Results[k].ETag
					}
					return nil
				}) {
					return
				}
				mu.Lock()
				acks = append(acks, a)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond) // a steady load, not a flood
			}
		})
	}
	// The reader retrieves the first row written, again and again, from
	// whichever host answers, at the position its write was acknowledged
	// at (a host whose view is behind waits for it): reads come from the
	// views, so they should barely notice a server's kill.
	wg.Go(func() {
		var pk, rk string
		var seq uint64
		for pk == "" && !stopped() {
			mu.Lock()
			if len(acks) > 0 {
				pk, rk, seq = "p"+strings.TrimPrefix(strings.SplitN(acks[0].id, "-", 2)[0], "w"), acks[0].id+"-a", acks[0].seq
			}
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
		for !stopped() {
			if _, _, err := c.Retrieve(ctx, "Chaos", pk, rk, client.AtLeast(seq)); err != nil {
				countErr(fmt.Errorf("read: %w", err))
				if engine.ErrorCode(err) == engine.CodeResourceNotFound {
					mu.Lock()
					notFound = append(notFound, time.Now())
					mu.Unlock()
				}
			} else {
				mu.Lock()
				reads = append(reads, time.Now())
				mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	// The publisher sends messages to the queue of the hosts' marker
	// function, each with its id as JetStream's message id, so that its
	// retries are one message; the function inserts a row whose RowKey is
	// that id.
	wg.Go(func() {
		for n := 0; !stopped(); n++ {
			id := fmt.Sprintf("m%05d", n)
			if !retry("message "+id, func() error {
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				defer pcancel()
				_, err := js.Publish(pctx, functions.QueueSubject("cairn", "marker"), []byte(id), jetstream.WithMsgID(id))
				return err
			}) {
				return
			}
			mu.Lock()
			queued = append(queued, id)
			mu.Unlock()
			time.Sleep(15 * time.Millisecond)
		}
	})

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
	waitAcks := func(what string, after time.Time, n int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for acked(after) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: only %d writes acknowledged within 60s", what, acked(after))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitReads := func(what string, after time.Time, n int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			mu.Lock()
			k := len(reads) - sort.Search(len(reads), func(i int) bool { return reads[i].After(after) })
			mu.Unlock()
			if k >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: only %d reads answered within 60s", what, k)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	phase("hosts up, tables created")
	waitAcks("start", time.Time{}, 30)
	phase("writes going")

	// streamInfo asks any live server about the table's stream.
	streamInfo := func() (*jetstream.StreamInfo, error) {
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		defer scancel()
		s, err := js.Stream(sctx, stream)
		if err != nil {
			return nil, err
		}
		return s.CachedInfo(), nil
	}
	// healthy waits until the stream has a leader and both other replicas
	// are current: a server restarted has caught up before the next kill.
	healthy := func(what string) string {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			si, err := streamInfo()
			if err == nil && si.Cluster != nil && si.Cluster.Leader != "" && len(si.Cluster.Replicas) == 2 {
				ok := true
				for _, p := range si.Cluster.Replicas {
					ok = ok && p.Current && !p.Offline
				}
				if ok {
					return si.Cluster.Leader
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the stream not whole within 60s: %+v, %v", what, si, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	type measure struct {
		what                        string
		failover, gap, readGap, new string
	}
	var measures []measure
	// observe logs, after a kill at killed, the writes' longest pause and
	// waits until they resumed.
	observe := func(what string, killed time.Time, leader string) measure {
		t.Helper()
		m := measure{what: what, failover: "-"}
		if leader != "" {
			deadline := time.Now().Add(60 * time.Second)
			for {
				si, err := streamInfo()
				if err == nil && si.Cluster != nil && si.Cluster.Leader != "" && si.Cluster.Leader != leader {
					m.failover, m.new = time.Since(killed).Round(time.Millisecond).String(), si.Cluster.Leader
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: no new stream leader within 60s", what)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		waitAcks(what, killed, 20)
		waitReads(what, killed, 20)
		mu.Lock()
		var writes []time.Time
		for _, a := range acks {
			writes = append(writes, a.at)
		}
		m.gap = longestPause(writes, killed)
		m.readGap = longestPause(slices.Clone(reads), killed)
		mu.Unlock()
		return m
	}

	// JetStream announces a stream's new leader: when it did is logged
	// next to when StreamInfo first named it.
	announced := make(chan time.Time, 8)
	asub, err := nc.Subscribe(journal.LeaderElectedSubject(stream), func(*nats.Msg) {
		select {
		case announced <- time.Now():
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer asub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	// 1. The stream's leader.
	leader := healthy("before the leader's kill")
	for len(announced) > 0 {
		<-announced
	}
	victim := cl.index(leader)
	if victim < 0 {
		t.Fatalf("stream leader %q is none of the servers", leader)
	}
	killed := time.Now()
	cl.kill(t, victim)
	m := observe("leader server "+leader, killed, leader)
	select {
	case at := <-announced:
		m.failover += " (announced " + at.Sub(killed).Round(time.Millisecond).String() + ")"
	default:
		m.failover += " (not announced)"
	}
	measures = append(measures, m)
	phase("leader killed, writes resumed")
	cl.start(t, victim)

	// 2. A follower.
	leader = healthy("before the follower's kill")
	phase("leader restarted and current")
	follower := (cl.index(leader) + 1 + r.IntN(2)) % 3
	killed = time.Now()
	cl.kill(t, follower)
	measures = append(measures, observe("follower server "+cl.cfgs[follower].ServerName, killed, ""))
	cl.start(t, follower)
	healthy("after the follower's restart")
	phase("follower killed, restarted and current")

	// 3. A host.
	hv := r.IntN(2)
	killed = time.Now()
	hosts[hv].Kill(t)
	dead := hosts[hv]
	measures = append(measures, observe(fmt.Sprintf("host %d", hv), killed, ""))
	hosts[hv] = startHost(hv)
	waitAcks("after the host's restart", time.Now(), 20)
	phase("host killed and restarted")

	close(stop)
	wg.Wait()
	// CAIRN_CHAOS_LOGS=<dir> keeps every host's log there, to read a
	// pause beside what the hosts did (the measures name its times).
	if d := os.Getenv("CAIRN_CHAOS_LOGS"); d != "" {
		stamp := time.Now().Format("150405")
		for i, h := range append(hosts, dead) {
			_ = os.WriteFile(fmt.Sprintf("%s/%s-host%d.log", d, stamp, i), []byte(h.Log()), 0o644)
		}
	}
	if t.Failed() {
		return
	}
	mu.Lock()
	done := slices.Clone(acks)
	msgs := slices.Clone(queued)
	errCounts := errs
	mu.Unlock()
	for _, m := range measures {
		t.Logf("kill %-20s JetStream failover %-30s (new leader %s)  writes' longest pause %s; reads' %s", m.what, m.failover, m.new, m.gap, m.readGap)
	}
	t.Logf("%d writes, %d queue messages acknowledged; errors answered meanwhile: %v", len(done), len(msgs), errCounts)
	if len(notFound) > 0 {
		t.Errorf("the row read at its write's position was not found %d times, from %s to %s", len(notFound), notFound[0].UTC().Format("15:04:05.000"), notFound[len(notFound)-1].UTC().Format("15:04:05.000"))
	}

	// Every message is processed: its marker row is there.
	consumer := func() *jetstream.ConsumerInfo {
		ictx, icancel := context.WithTimeout(ctx, time.Second)
		defer icancel()
		cons, err := js.Consumer(ictx, functions.StreamName("cairn"), "fn-marker")
		if err != nil {
			return nil
		}
		return cons.CachedInfo()
	}
	deadline := time.Now().Add(90 * time.Second)
	for left := slices.Clone(msgs); len(left) > 0; {
		left = slices.DeleteFunc(left, func(id string) bool {
			_, _, err := c.Retrieve(ctx, "Markers", "m", id)
			return err == nil
		})
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			if ci := consumer(); ci != nil {
				t.Logf("marker consumer: pending %d, ack pending %d, redelivered %d, waiting %d", ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting)
			}
			for i, h := range append(hosts, dead) {
				for _, line := range strings.Split(h.Log(), "\n") {
					if strings.Contains(line, "marker") || strings.Contains(line, "poison") {
						t.Logf("host %d: %s", i, line)
					}
				}
			}
			t.Fatalf("after 90s, %d of %d queue messages not processed, the first %s", len(left), len(msgs), left[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
	phase("queue messages processed")
	// Every acknowledged write is in the journal exactly once, whole, at
	// the position its reply named; nothing else is.
	want := map[string]chaosAck{}
	for _, a := range done {
		want[a.id] = a
	}
	found := map[string]int{}
	for k, rec := range chaosRecords(t, js, stream) {
		seq := uint64(k + 1) // nothing is ever removed
		for _, ref := range rec.Commands {
			found[ref.ID]++
			a, ok := want[ref.ID]
			if !ok {
				t.Errorf("record %d holds command %q, never acknowledged", seq, ref.ID)
				continue
			}
			if ref.Count != 2 || int(ref.First+ref.Count) > len(rec.Events) {
				t.Errorf("record %d: command %s has %d events, want 2", seq, ref.ID, ref.Count)
				continue
			}
			for i, suffix := range []string{"-a", "-b"} {
				if ev := rec.Events[int(ref.First)+i]; ev.Kind != engine.EventPut || ev.RowKey != ref.ID+suffix {
					t.Errorf("record %d: command %s event %d is %v %q", seq, ref.ID, i, ev.Kind, ev.RowKey)
				}
			}
			if found[ref.ID] == 1 && a.seq != seq {
				t.Errorf("command %s answered with position %d, stored at %d", ref.ID, a.seq, seq)
			}
		}
	}
	for id := range want {
		if found[id] != 1 {
			t.Errorf("acknowledged write %s is %d times in the journal", id, found[id])
		}
	}
	// And both rows are readable, with the ETags the reply named, by
	// whichever host answers, at the write's position: a host restarted
	// a moment ago may not yet have applied the last writes others took.
	for _, a := range done {
		pk := "p" + strings.TrimPrefix(strings.SplitN(a.id, "-", 2)[0], "w")
		for i, suffix := range []string{"-a", "-b"} {
			_, rep, err := slow.Retrieve(ctx, "Chaos", pk, a.id+suffix, client.AtLeast(a.seq))
			if err != nil {
				t.Fatalf("row %s of write %s: %v", a.id+suffix, a.id, err)
			}
			if rep.ETag != a.etags[i] {
				t.Errorf("row %s has ETag %s, acknowledged %s", a.id+suffix, rep.ETag, a.etags[i])
			}
		}
	}

	// Every message's effect is there exactly once: one marker row each,
	// whatever was delivered twice, and none for a message never sent.
	markers := map[string]int{}
	for _, rec := range chaosRecords(t, js, journal.StreamName("cairn", "Markers", epochs["Markers"])) {
		for _, ev := range rec.Events {
			if ev.Kind == engine.EventPut {
				markers[ev.RowKey]++
			}
		}
	}
	for _, id := range msgs {
		if markers[id] != 1 {
			t.Errorf("message %s: %d marker rows in the journal, want 1", id, markers[id])
		}
	}
	if len(markers) != len(msgs) {
		t.Errorf("the journal holds markers of %d messages, %d were sent", len(markers), len(msgs))
	}
	// None is left in the queue: the marker consumer has nothing pending
	// or unacknowledged.
	eventually(t, 60*time.Second, "the archive queue drained", func() bool {
		ci := consumer()
		return ci != nil && ci.NumPending == 0 && ci.NumAckPending == 0
	})
	phase("checked")
}

// waitChaosJetStream waits until JetStream answers on the cluster at url.
func waitChaosJetStream(t *testing.T, url string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	eventually(t, 60*time.Second, "JetStream answers on the cluster", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
}

// chaosRecords reads every record of a stream, in order.
func chaosRecords(t *testing.T, js jetstream.JetStream, stream string) []*engine.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info := s.CachedInfo()
	var out []*engine.Record
	for seq := info.State.FirstSeq; seq != 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("record %d of %s: %v", seq, stream, err)
		}
		rec, err := journal.DecodeRecord(m.Data)
		if err != nil {
			t.Fatalf("record %d of %s: %v", seq, stream, err)
		}
		out = append(out, rec)
	}
	return out
}
