package node_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/projections"
)

// historyNode is a node that prunes at a test's pace: snapshots every
// 200 records, shared, a base every half second; a command-id window and
// a grace of 100 ms; a look at every table every 100 ms.
func historyNode(t *testing.T) *testHost {
	t.Helper()
	cfg := node.Config{PruneEvery: 100 * time.Millisecond, PruneGrace: time.Millisecond}
	cfg.Views.SnapshotEvery, cfg.Views.SnapshotInterval, cfg.Views.DedupWindow = 200, -1, 100*time.Millisecond
	cfg.Views.SnapshotBaseAge = 500 * time.Millisecond
	return startNode(t, cfg)
}

// tableHistory reads a table's history through the operators' API; a
// retention, when not nil, is set first.
func tableHistory(t *testing.T, th *testHost, table string, retention *string) httpapi.TableHistory {
	t.Helper()
	url := th.h.HTTPURL() + httpapi.OperatorPrefix + "devstoreaccount1/$history?table=" + table
	method, body := "GET", io.Reader(nil)
	if retention != nil {
		method, body = "PUT", strings.NewReader(fmt.Sprintf(`{"retention":%q}`, *retention))
	}
	resp := operatorDo(t, th.h.OperatorToken(), method, url, body)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s $history: %d %s", method, resp.StatusCode, b)
	}
	if retention != nil {
		var h httpapi.TableHistory
		if err := json.Unmarshal(b, &h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	var out struct{ Tables []httpapi.TableHistory }
	if err := json.Unmarshal(b, &out); err != nil || len(out.Tables) != 1 {
		t.Fatalf("$history: %s %v", b, err)
	}
	return out.Tables[0]
}

// updates writes n updates round the entities hot/000 to hot/049.
func updates(t *testing.T, th *testHost, table string, from, n int) {
	t.Helper()
	ctx := ctxT(t)
	for i := from; i < from+n; i++ {
		e := engine.NewEntity("hot", fmt.Sprintf("%03d", i%50), engine.Property{Name: "N", Value: engine.Int64(int64(i))})
		if _, err := th.c.InsertOrReplace(ctx, table, e); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHistoryPruned: a table with a retention of 1,000 records under a
// steady load of updates to fifty entities keeps its journal from growing
// (each round pruned back to at most the retention plus two snapshots'
// worth), refuses a change feed, an as-of read and an outbox skip before
// its horizon with HistoryTruncated and serves them after it, takes
// conditional writes to a partition whose every record was pruned, and a
// node started afterwards serves exactly what the first one does.
func TestHistoryPruned(t *testing.T) {
	th := historyNode(t)
	ctx := ctxT(t)
	if _, err := th.c.CreateTable(ctx, "Hist"); err != nil {
		t.Fatal(err)
	}
	cold, err := th.c.Insert(ctx, "Hist", engine.NewEntity("cold", "1", engine.Property{Name: "V", Value: engine.String("first")}))
	if err != nil {
		t.Fatal(err)
	}
	retention := "1000"
	if h := tableHistory(t, th, "Hist", &retention); h.Retention != "1000" || !h.Own || h.Horizon != 1 {
		t.Fatalf("after the PUT: %+v", h)
	}
	bad := "5"
	resp := operatorDo(t, th.h.OperatorToken(), "PUT", th.h.HTTPURL()+httpapi.OperatorPrefix+"devstoreaccount1/$history?table=Hist", strings.NewReader(fmt.Sprintf(`{"retention":%q}`, bad)))
	if resp.Body.Close(); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a retention of 5 records: %d, want 400", resp.StatusCode)
	}

	// Rounds of 1,500 updates, each followed by more of the same load in
	// steps of 100 until the journal is pruned back to the retention
	// (the snapshots the pruner cuts at come with the writes).
	const round, step, steps = 1500, 100, 100
	written := 0
	var bounded, counts []uint64
	for r := 0; r < 4; r++ {
		updates(t, th, "Hist", written, round)
		written += round
		var h httpapi.TableHistory
		for i := 0; ; i++ {
			// The retention, a quarter of it and the grace between the
			// bases the store keeps, two snapshots' worth: what a steady
			// load leaves.
			if h = tableHistory(t, th, "Hist", nil); h.Records <= 2500 {
				break
			}
			if i == steps {
				t.Fatalf("round %d: after %d more updates the journal holds %d records: %+v", r, steps*step, h.Records, h)
			}
			updates(t, th, "Hist", written, step)
			written += step
		}
		bounded, counts = append(bounded, h.Bytes), append(counts, h.Records)
	}
	// The records all have the size of the first round's (one entity,
	// one property): the bytes are bounded with the records, not with
	// what was written (about three times as many records).
	t.Logf("%d records written; the journal's records and bytes after each round: %v %v", written, counts, bounded)
	perRecord := float64(bounded[0]) / float64(counts[0])
	for r, b := range bounded {
		if float64(b) > 1.1*perRecord*2500 {
			t.Fatalf("round %d: the journal holds %d bytes, more than 2,500 records' worth (%.0f bytes each)", r, b, perRecord)
		}
	}
	// Before the horizon: refused; from it: served. The pruner goes on
	// (its grace passes), so a horizon read now may have moved by the
	// time the feed is read: a record written now is among the last
	// 1,000, which the retention never cuts.
	if _, err := th.c.Changes(ctx, "Hist", wire.ChangesRequest{From: 1}); engine.ErrorCode(err) != engine.CodeHistoryTruncated {
		t.Fatalf("changes from 1: %v, want HistoryTruncated", err)
	}
	newest, err := th.c.InsertOrReplace(ctx, "Hist", engine.NewEntity("hot", "new"))
	if err != nil {
		t.Fatal(err)
	}
	page, err := th.c.Changes(ctx, "Hist", wire.ChangesRequest{From: newest.Seq, Max: 10})
	if err != nil || len(page.Changes) != 1 {
		t.Fatalf("changes from %d, after the horizon %d: %v %+v", newest.Seq, tableHistory(t, th, "Hist", nil).Horizon, err, page)
	}
	if _, _, err := th.c.Retrieve(ctx, "Hist", "cold", "1", asOf(2)); engine.ErrorCode(err) != engine.CodeHistoryTruncated {
		t.Fatalf("as of 2: %v, want HistoryTruncated", err)
	}
	resp = operatorDo(t, th.h.OperatorToken(), "POST", th.h.HTTPURL()+"/$cairn/outbox/skip?table=Hist&seq=1&index=0", nil)
	if resp.Body.Close(); resp.StatusCode != http.StatusGone {
		t.Fatalf("an outbox skip before the horizon: %d, want 410", resp.StatusCode)
	}

	// The cold partition's only record is gone; its entity is not.
	e, _, err := th.c.Retrieve(ctx, "Hist", "cold", "1")
	if err != nil || e.Properties[0].Value.Str() != "first" {
		t.Fatalf("the cold entity: %v %v", e, err)
	}
	if _, err := th.c.Merge(ctx, "Hist", engine.NewEntity("cold", "1", engine.Property{Name: "V", Value: engine.String("stale")}), `W/"1.9.0"`); engine.ErrorCode(err) != engine.CodeUpdateConditionNotSatisfied {
		t.Fatalf("a merge with a wrong ETag: %v", err)
	}
	if _, err := th.c.Merge(ctx, "Hist", engine.NewEntity("cold", "1", engine.Property{Name: "V", Value: engine.String("second")}), cold.ETag); err != nil {
		t.Fatalf("a merge of the pruned partition with its ETag: %v", err)
	}
	if _, err := th.c.Insert(ctx, "Hist", engine.NewEntity("cold", "2")); err != nil {
		t.Fatalf("an insert into the pruned partition: %v", err)
	}

	// A node started now: the newest shared snapshot and what is left.
	other := startHostOn(t, th)
	want, _ := th.h.Views().Table("Hist")
	got, ok := other.h.Views().Table("Hist")
	if !ok {
		t.Fatal("the new node has no table Hist")
	}
	seq := want.Snapshot().Seq
	if _, err := got.WaitSeq(ctx, seq); err != nil {
		t.Fatalf("the new node's view did not reach %d: %v", seq, err)
	}
	sameView(t, want.Snapshot(), got.Snapshot())
}

// asOf reads as of a position.
func asOf(seq uint64) client.CallOption { return client.AsOf(seq) }

// sameView fails unless two snapshots hold the same entities, ETags and
// properties.
func sameView(t *testing.T, a, b *projections.Snapshot) {
	t.Helper()
	if a.Len() != b.Len() {
		t.Fatalf("%d entities, the other node %d", a.Len(), b.Len())
	}
	var diffs []string
	a.Scan(func(e *engine.Entity) bool {
		f, ok := b.Get(e.PartitionKey, e.RowKey)
		if !ok || f.Version != e.Version || f.Timestamp != e.Timestamp || !sameProperties(f.Properties, e.Properties) {
			diffs = append(diffs, e.PartitionKey+"/"+e.RowKey)
		}
		return len(diffs) < 10
	})
	if len(diffs) > 0 {
		t.Fatalf("entities that differ between the nodes: %v", diffs)
	}
}

// sameProperties reports whether two property lists hold the same names
// and values in the same order.
func sameProperties(a, b []engine.Property) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !a[i].Value.Equal(b[i].Value) {
			return false
		}
	}
	return true
}
