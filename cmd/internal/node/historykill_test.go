package node_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/journal"
)

// TestCrashBetweenHorizonAndPurge: a node killed by SIGKILL after its
// pruner recorded a table's new horizon and before it purged the records
// below it leaves a stream that still holds them; the node started again
// serves every acknowledged write, refuses an as-of read below the
// recorded horizon (the records are going), and its pruner finishes the
// purge on its own.
func TestCrashBetweenHorizonAndPurge(t *testing.T) {
	if testing.Short() {
		t.Skip("starts host processes")
	}
	const table, entities = "Torn", 50
	dir, listen := t.TempDir(), nodetest.FreeAddr(t)
	cc := nodetest.ChildConfig{DataDir: dir, NATSListen: listen, SnapshotEvery: 200, SnapshotCompact: 0.1,
		History: "1000", PruneEvery: 100 * time.Millisecond, PruneGrace: time.Millisecond, DedupWindow: 100 * time.Millisecond}
	failing := cc
	failing.Failpoint = "history.between-horizon-and-purge"
	c1 := nodetest.StartChild(t, failing)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := retryingClient(t, listen)
	info, err := cl.CreateTable(ctx, table)
	if err != nil {
		t.Fatal(err)
	}

	// Updates round fifty entities until the node dies at the failpoint.
	// The write in flight then may or may not be in the journal.
	want := map[string][]int64{} // RowKey: the values it may hold
	wctx, stop := context.WithCancel(ctx)
	go func() {
		select {
		case <-c1.Done():
		case <-ctx.Done():
		}
		stop()
	}()
	for i := 0; wctx.Err() == nil; i++ {
		rk := fmt.Sprintf("%03d", i%entities)
		_, err := cl.InsertOrReplace(wctx, table, engine.NewEntity("hot", rk, engine.Property{Name: "N", Value: engine.Int64(int64(i))}))
		switch {
		case err == nil:
			want[rk] = []int64{int64(i)}
		default:
			// The node's death fails the write in flight (the
			// connection lost, or the context ended): its outcome is
			// unknown. Anything else is a failure.
			select {
			case <-c1.Done():
			case <-time.After(10 * time.Second):
				t.Fatal(err)
			}
			want[rk] = append(want[rk], int64(i))
		}
	}
	if !strings.Contains(c1.Log(), "failpoint reached") {
		t.Fatalf("the node exited (%v) without reaching the failpoint:\n%s", c1.Wait(), c1.Tail())
	}

	// The stream as the node left it: a horizon, the records below it,
	// seen by a node that prunes nothing (it keeps all history).
	creds, err := natsauth.Read(filepath.Join(dir, "nats", "node.user"))
	if err != nil {
		t.Fatal(err)
	}
	keeping := cc
	keeping.History = ""
	c2 := nodetest.StartChild(t, keeping)
	nc, err := nats.Connect("nats://"+listen, append(creds.Options(), nats.MaxReconnects(-1))...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	j, err := journal.New(nc, journal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := j.History(ctx, table, info.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	if h.Horizon <= 1 || h.First >= h.Horizon {
		t.Fatalf("after the kill the stream says %+v: want a horizon above its first record", h)
	}
	horizon := h.Horizon

	// Every acknowledged write is there.
	checkValues(ctx, t, cl, table, want)
	// Below the recorded horizon is refused, whether or not the records
	// are still there.
	if _, _, err := cl.Retrieve(ctx, table, "hot", "000", asOf(2)); engine.ErrorCode(err) != engine.CodeHistoryTruncated {
		t.Fatalf("as of 2, below the horizon %d: %v, want HistoryTruncated", horizon, err)
	}
	if _, err := cl.Changes(ctx, table, wire.ChangesRequest{From: 2}); engine.ErrorCode(err) != engine.CodeHistoryTruncated {
		t.Fatalf("changes from 2, below the horizon %d: %v, want HistoryTruncated", horizon, err)
	}
	// A node that prunes finishes what the killed one began.
	c2.Kill(t)
	c3 := nodetest.StartChild(t, cc)
	for {
		h, err = j.History(ctx, table, info.Epoch)
		if err != nil {
			t.Fatal(err)
		}
		if h.First >= horizon {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the journal still starts at %d, below the horizon %d:\n%s", h.First, horizon, c3.Tail())
		case <-time.After(50 * time.Millisecond): // the pruner looks every 100 ms
		}
	}
	// The prune's line comes on the child's stderr, read on the side.
	waitLog(t, c3, "history pruned", "table="+table)
	checkValues(ctx, t, cl, table, want)
}

// checkValues fails unless each entity hot/<RowKey> of table holds in N
// one of the values want gives it.
func checkValues(ctx context.Context, t *testing.T, cl *client.Client, table string, want map[string][]int64) {
	t.Helper()
	for rk, values := range want {
		e, _, err := cl.Retrieve(ctx, table, "hot", rk)
		if err != nil {
			t.Fatalf("hot/%s: %v", rk, err)
		}
		if got := e.Properties[0].Value.Int(); !slices.Contains(values, got) {
			t.Fatalf("hot/%s holds %d, want one of %v", rk, got, values)
		}
	}
}
