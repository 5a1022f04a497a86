package node_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/projections"
)

// TestRetrieveAsOfOverNATS: a Retrieve with "asOf" answers the entity as
// it was at that position (msgpack with the Go client, and JSON); one
// with "position" waits for the view to reach it, and fails with
// PositionNotReached when it does not in time; wrong uses are coded
// errors.
func TestRetrieveAsOfOverNATS(t *testing.T) {
	th := startNode(t, node.Config{
		API:   httpapi.Config{PositionWait: 300 * time.Millisecond},
		Views: projections.Config{AsOfMaxRecords: 3},
	})
	ctx := ctxT(t)
	c := th.c
	info, err := c.CreateTable(ctx, "History")
	if err != nil {
		t.Fatal(err)
	}
	v := func(n int64) *engine.Entity {
		return engine.NewEntity("p", "r", engine.Property{Name: "V", Value: engine.Int64(n)})
	}
	var pos []uint64
	for _, write := range []func() (*engine.Reply, error){
		func() (*engine.Reply, error) { return c.Insert(ctx, "History", v(1)) },
		func() (*engine.Reply, error) { return c.Replace(ctx, "History", v(2), "*") },
		func() (*engine.Reply, error) { return c.Delete(ctx, "History", "p", "r", "*") },
		func() (*engine.Reply, error) { return c.Insert(ctx, "History", engine.NewEntity("q", "r")) },
	} {
		rep, err := write()
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, rep.Seq)
	}
	if pos[3] != 4 {
		t.Fatalf("positions %v", pos)
	}
	for n, want := range map[uint64]int64{1: 1, 2: 2} {
		e, rep, err := c.Retrieve(ctx, "History", "p", "r", client.AsOf(n))
		if err != nil {
			t.Fatalf("as of %d: %v", n, err)
		}
		if got, _ := e.Get("V"); got.Int() != want || rep.Seq != n || rep.ETag != engine.ETag(info.Epoch, engine.Version{Seq: n}) {
			t.Errorf("as of %d: V=%d seq %d etag %s, want V=%d", n, got.Int(), rep.Seq, rep.ETag, want)
		}
	}
	if _, _, err := c.Retrieve(ctx, "History", "p", "r", client.AsOf(3)); engine.ErrorCode(err) != engine.CodeResourceNotFound {
		t.Errorf("as of 3, after the delete: %v", err)
	}
	if _, _, err := c.Retrieve(ctx, "History", "p", "r"); engine.ErrorCode(err) != engine.CodeResourceNotFound {
		t.Errorf("now: %v", err)
	}

	// JSON, as the nats CLI sends it.
	ask := func(body string) map[string]any {
		t.Helper()
		m, err := th.nc.RequestWithContext(ctx, "cairn.cmd.History", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		var r map[string]any
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := ask(`{"op":"Retrieve","partitionKey":"p","rowKey":"r","asOf":1}`); r["seq"] != float64(1) || r["entity"].(map[string]any)["V"] != "1" {
		t.Errorf("JSON as of 1: %v", r)
	}
	codeOf := func(r map[string]any) string {
		if e, ok := r["error"].(map[string]any); ok {
			return e["code"].(string)
		}
		return ""
	}
	for body, want := range map[string]string{
		`{"op":"Retrieve","partitionKey":"p","rowKey":"r","asOf":0}`:                        "InvalidAsOfPosition",
		`{"op":"Retrieve","partitionKey":"p","rowKey":"r","asOf":5}`:                        "InvalidAsOfPosition",
		`{"op":"Retrieve","partitionKey":"p","rowKey":"r","asOf":-1}`:                       "InvalidInput",
		`{"op":"Retrieve","partitionKey":"p","rowKey":"r","asOf":1,"position":1}`:           "InvalidInput",
		`{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"x"},"asOf":1}`:               "InvalidInput",
		`{"op":"Retrieve","partitionKey":"q","rowKey":"r","position":99}`:                   "PositionNotReached",
		`{"op":"Retrieve","partitionKey":"q","rowKey":"r","position":4}`:                    "",
		`{"op":"Retrieve","partitionKey":"q","rowKey":"r","asOf":4}`:                        "",
		`{"op":"Retrieve","partitionKey":"p","rowKey":"r","asOf":1,"id":"a read has none"}`: "InvalidInput", // once ignored
	} {
		if got := codeOf(ask(body)); got != want {
			t.Errorf("%s: code %q, want %q", body, got, want)
		}
	}
	// Beyond the limit: as of 3 is still 3 records, 4 is the present.
	if _, err := c.Insert(ctx, "History", engine.NewEntity("q", "s")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Retrieve(ctx, "History", "q", "r", client.AsOf(4)); engine.ErrorCode(err) != engine.CodeAsOfTooFar {
		t.Errorf("as of 4 with a limit of 3 records: %v", err)
	}

	// A position ahead of the view: the read waits, then fails; or is
	// answered once a write brings the view there.
	start := time.Now()
	if _, _, err := c.Retrieve(ctx, "History", "q", "r", client.AtLeast(6)); engine.ErrorCode(err) != engine.CodePositionNotReached || time.Since(start) < 300*time.Millisecond {
		t.Errorf("ahead of the view: %v after %v", err, time.Since(start))
	}
	done := make(chan error, 1)
	go func() {
		_, rep, err := c.Retrieve(ctx, "History", "q", "r", client.AtLeast(6))
		if err == nil && rep.Seq < 6 {
			err = engine.Errorf(engine.CodeInternalError, "answered at %d", rep.Seq)
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := c.Insert(ctx, "History", engine.NewEntity("q", "t")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("the waiting read: %v", err)
	}
}
