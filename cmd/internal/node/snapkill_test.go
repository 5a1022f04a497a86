package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/projections"
)

// replayedRe reads a view's replay line: the records it replayed after
// the snapshot it loaded, and that snapshot's position.
var replayedRe = regexp.MustCompile(`msg="view replayed" table=(\S+) records=(\d+) from_snapshot=(\d+)`)

// replayed returns what the log says table's view replayed at its start.
func replayed(t *testing.T, log, table string) (records, from uint64) {
	t.Helper()
	for _, m := range replayedRe.FindAllStringSubmatch(log, -1) {
		if m[1] == table {
			records, _ = strconv.ParseUint(m[2], 10, 64)
			from, _ = strconv.ParseUint(m[3], 10, 64)
			return records, from
		}
	}
	t.Fatalf("no replay line of %s in the log:\n%s", table, log)
	return 0, 0
}

// TestKillReplayBounded: a node at its default settings, killed with
// SIGKILL while a loader writes a table's history (40,000 entities each
// written five times, one record per write: 200,000 records), replays at
// its next start no more than its tail bound after the snapshot it loads
// (DefaultSnapshotEvery records, and what a snapshot write in progress
// let through: half as many again at most), whatever the history. Before
// the tail was bounded, a snapshot came at most every five minutes, and
// the start replayed every record since the first one (at 100,000):
// about 90,000 here. No time is asserted: what was replayed is.
func TestKillReplayBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts host processes and writes 200,000 records")
	}
	const (
		table    = "Bounded"
		entities = 40_000
		rounds   = 5
		// killAt is the records written when the node is killed:
		// near the end, while the loader writes.
		killAt = rounds*entities - entities/4
		// writers is the loader's partitions, each appended to by one
		// goroutine.
		writers = 64
	)
	dir, listen := t.TempDir(), nodetest.FreeAddr(t)
	cc := nodetest.ChildConfig{DataDir: dir, NATSListen: listen}
	c1 := nodetest.StartChild(t, cc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	creds, err := natsauth.Read(filepath.Join(dir, "nats", "node.user"))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect("nats://"+listen, append(creds.Options(), nats.NoReconnect(), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	j, err := journal.New(nc, journal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	epoch, err := j.AppendCatalog(ctx, &engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: table, Time: engine.TimeToTicks(time.Now()), Shards: engine.DefaultShards}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.EnsureTableStream(ctx, table, epoch); err != nil {
		t.Fatal(err)
	}
	var appended atomic.Int64
	var wg sync.WaitGroup
	wctx, stopWriting := context.WithCancel(ctx)
	defer stopWriting()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pk := fmt.Sprintf("p%02d", w)
			var last uint64
			for r := 0; r < rounds; r++ {
				for i := w; i < entities; i += writers {
					rec := &engine.Record{Time: engine.TimeToTicks(time.Now()), PartitionKey: pk, Nonce: fmt.Sprintf("%d-%d", r, i),
						Commands: []engine.CommandRef{{Count: 1}},
						Events: []engine.Event{{Kind: engine.EventPut, RowKey: fmt.Sprintf("r%06d", i), Properties: []engine.Property{
							{Name: "Round", Value: engine.Int64(int64(r))},
							{Name: "Text", Value: engine.String("some text to make the entity a hundred bytes long, as a small entity is")},
						}}}}
					seq, err := j.Append(wctx, table, epoch, engine.DefaultShards, rec, last)
					if err != nil {
						return // killed with the node's server, or stopped
					}
					last = seq
					appended.Add(1)
				}
			}
		}()
	}
	for appended.Load() < killAt {
		select {
		case <-ctx.Done():
			t.Fatalf("the loader wrote %d records of %d", appended.Load(), killAt)
		case <-time.After(10 * time.Millisecond): // polled: the loader takes seconds
		}
	}
	c1.Kill(t)
	written := appended.Load()
	stopWriting()
	wg.Wait()

	c2 := nodetest.StartChild(t, cc)
	// The child's log comes through a pipe read on the side: its ready
	// answer can come before the replay's line is read.
	waitLog(t, c2, `msg="view replayed"`, "table="+table+" ")
	records, from := replayed(t, c2.Log(), table)
	t.Logf("killed after %d records; the restart replayed %d records after its snapshot at %d", written, records, from)
	if from == 0 || records > projections.DefaultSnapshotEvery*3/2 {
		t.Fatalf("the restart replayed %d records after its snapshot at %d, want at most %d (the tail bound %d and half as many again):\n%s",
			records, from, projections.DefaultSnapshotEvery*3/2, projections.DefaultSnapshotEvery, c2.Tail())
	}
	if from+records < uint64(written) {
		t.Fatalf("the view reached %d, but %d records were acknowledged before the kill", from+records, written)
	}
}

// TestCrashDuringSnapshotWrite kills a node with SIGKILL in the middle of
// writing a snapshot (the failpoints snapshot.delta-write and
// snapshot.base-write: the content in its temporary file, before it is
// fsynced and renamed), under a write load with command ids. The node
// first builds a chain of bases and deltas (a snapshot every 25 records,
// a new base once the deltas hold a tenth of the base's entities), then
// is started again with the failpoint and dies at its next write of that
// kind. Started once more, it loads a valid chain ("snapshot loaded"),
// leaves no temporary file, holds every acknowledged command with its
// ETags and nothing else, answers a command retried with its id as a
// duplicate, and its table equals the one a full replay builds (a node
// with snapshots off). Run it with -count=20.
func TestCrashDuringSnapshotWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts host processes")
	}
	for _, point := range []string{"snapshot.delta-write", "snapshot.base-write"} {
		t.Run(point, func(t *testing.T) {
			dir, listen := t.TempDir(), nodetest.FreeAddr(t)
			cc := nodetest.ChildConfig{DataDir: dir, NATSListen: listen, SnapshotEvery: 25, SnapshotCompact: 0.1}
			c1 := nodetest.StartChild(t, cc)
			cl := retryingClient(t, listen)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if _, err := cl.CreateTable(ctx, "Torn"); err != nil {
				t.Fatal(err)
			}
			load := startCrashLoad(ctx, cl, "Torn")
			// A chain first: the load runs until the node wrote a base
			// and a delta.
			waitLog(t, c1, "snapshot written", "kind=base")
			waitLog(t, c1, "snapshot written", "kind=delta")
			if err := c1.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := c1.Wait(); err != nil {
				t.Fatalf("the first node exited with %v:\n%s", err, c1.Tail())
			}
			failing := cc
			failing.Failpoint = point
			// The load goes on meanwhile, so the node may write, and
			// die at, its first snapshot before it says it is ready.
			c2 := nodetest.SpawnChild(t, failing)
			select {
			case <-c2.Done():
			case <-ctx.Done():
				t.Fatalf("the node did not reach the failpoint %s:\n%s", point, c2.Tail())
			}
			if !strings.Contains(c2.Log(), "failpoint reached") {
				t.Fatalf("the node exited (%v) without reaching the failpoint:\n%s", c2.Wait(), c2.Tail())
			}
			// The torn write's temporary file is there, and goes at the
			// restart.
			torn, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", ".*"+".tmp"))
			if len(torn) == 0 {
				t.Fatal("the failpoint left no temporary file")
			}
			c3 := nodetest.StartChild(t, cc)
			acked := load.stop(t, c3)
			// Its log comes on stderr, read on the side: waited for.
			waitLog(t, c3, `msg="view replayed"`, "table=Torn ")
			if !strings.Contains(c3.Log(), "snapshot loaded") {
				t.Fatalf("the restarted node loaded no snapshot:\n%s", c3.Tail())
			}
			records, from := replayed(t, c3.Log(), "Torn")
			t.Logf("%d commands; the restart loaded its chain to %d and replayed %d records", len(acked), from, records)
			for _, f := range torn {
				if _, err := os.Stat(f); err == nil {
					t.Fatalf("the torn write's temporary file %s is still there after the restart", f)
				}
			}
			checkAcked(ctx, t, cl, "Torn", acked, "after the torn write")
			last := acked[len(acked)-1]
			ops := make([]engine.Operation, 3)
			for i := range ops {
				ops[i] = engine.Operation{Op: engine.OpInsert, Entity: engine.NewEntity(last.pk, last.rows[i], engine.Property{Name: "Cmd", Value: engine.String(last.id)})}
			}
			rep, err := cl.Batch(ctx, "Torn", ops, client.WithID(last.id))
			if err != nil || !rep.Duplicate {
				t.Fatalf("the last command retried with its id: duplicate %v, %v", rep != nil && rep.Duplicate, err)
			}
			fromChain := tableRows(ctx, t, cl, "Torn")
			c3.Kill(t)
			full := cc
			full.NoSnapshots = true
			nodetest.StartChild(t, full)
			if replay := tableRows(ctx, t, cl, "Torn"); !reflect.DeepEqual(fromChain, replay) {
				t.Fatalf("the table loaded from the chain (%d rows) differs from the full replay's (%d)", len(fromChain), len(replay))
			}
		})
	}
}

// tableRows returns every row of a table with its ETag and properties.
func tableRows(ctx context.Context, t *testing.T, cl *client.Client, table string) []string {
	t.Helper()
	var out []string
	for e, err := range cl.QueryAll(ctx, table) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s/%s %s %v", e.Entity.PartitionKey, e.Entity.RowKey, e.ETag, e.Entity.Properties))
	}
	return out
}

// waitLog waits until the child's log has a line holding every one of
// parts (polled, for two minutes at most).
func waitLog(t *testing.T, c *nodetest.Child, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !hasLine(c.Log(), parts...) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q:\n%s", parts, c.Tail())
		}
		time.Sleep(10 * time.Millisecond) // polled: a snapshot takes milliseconds to come
	}
}

// hasLine reports whether a line of log holds every one of parts.
func hasLine(log string, parts ...string) bool {
next:
	for _, line := range strings.Split(log, "\n") {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		return true
	}
	return false
}
