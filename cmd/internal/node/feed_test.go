package node_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/journal"
)

// TestChangeFeedPages: the feed of a table is its journal, change by
// change: puts with their entities and ETags, deletes, the previous ETag
// of each, paged by record with next and head, and filtered by partition.
func TestChangeFeedPages(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	info, err := th.c.CreateTable(ctx, "Feed")
	if err != nil {
		t.Fatal(err)
	}
	ins, err := th.c.Insert(ctx, "Feed", engine.NewEntity("a", "1", engine.Property{Name: "N", Value: engine.Int64(1)})) // record 1
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.c.Insert(ctx, "Feed", engine.NewEntity("b", "1")); err != nil { // 2
		t.Fatal(err)
	}
	mer, err := th.c.Merge(ctx, "Feed", engine.NewEntity("a", "1", engine.Property{Name: "M", Value: engine.String("x")}), "*") // 3
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.c.Delete(ctx, "Feed", "a", "1", mer.ETag); err != nil { // 4
		t.Fatal(err)
	}
	if _, err := th.c.Batch(ctx, "Feed", []engine.Operation{ // 5: two changes
		{Op: engine.OpInsert, Entity: engine.NewEntity("b", "2")},
		{Op: engine.OpReplace, Entity: engine.NewEntity("b", "1", engine.Property{Name: "R", Value: engine.Bool(true)})},
	}); err != nil {
		t.Fatal(err)
	}

	p1, err := th.c.Changes(ctx, "Feed", wire.ChangesRequest{From: 0, Max: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(p1.Changes) != 3 || p1.Next != 4 || p1.Head != 5 {
		t.Fatalf("first page: %d changes, next %d, head %d", len(p1.Changes), p1.Next, p1.Head)
	}
	c := p1.Changes[0]
	if c.Seq != 1 || c.Index != 0 || c.PartitionKey != "a" || c.RowKey != "1" || c.Deleted || c.ETag != ins.ETag || c.PrevETag != "" || c.PrevUnknown ||
		c.Entity == nil || len(c.Entity.Properties) != 1 || c.Timestamp != ins.Timestamp {
		t.Fatalf("the insert: %+v", c)
	}
	if c := p1.Changes[2]; c.ETag != mer.ETag || c.PrevETag != ins.ETag || len(c.Entity.Properties) != 2 {
		t.Fatalf("the merge: %+v", c)
	}
	p2, err := th.c.Changes(ctx, "Feed", wire.ChangesRequest{From: p1.Next, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(p2.Changes) != 3 || p2.Next != 6 || p2.Head != 5 {
		t.Fatalf("second page: %+v", p2)
	}
	if c := p2.Changes[0]; !c.Deleted || c.Entity != nil || c.ETag != "" || c.PrevETag != mer.ETag {
		t.Fatalf("the delete: %+v", c)
	}
	if c := p2.Changes[2]; c.Seq != 5 || c.Index != 1 || c.PrevETag != engine.ETag(info.Epoch, engine.Version{Seq: 2}) {
		t.Fatalf("the batch's replace: %+v", c)
	}
	// Caught up: nothing, and next stays.
	p3, err := th.c.Changes(ctx, "Feed", wire.ChangesRequest{From: 6})
	if err != nil || len(p3.Changes) != 0 || p3.Next != 6 || p3.Head != 5 {
		t.Fatalf("caught up: %+v %v", p3, err)
	}
	// One partition: its records only, and next past the rest.
	pb, err := th.c.Changes(ctx, "Feed", wire.ChangesRequest{From: 1, Partitions: []string{"b"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(pb.Changes) != 3 || pb.Changes[0].Seq != 2 || pb.Changes[1].Seq != 5 || pb.Next != 6 {
		t.Fatalf("partition b: %+v", pb)
	}

	// The same in JSON, as `nats req` sends it: Azure-shaped entities.
	msg, err := th.nc.RequestWithContext(ctx, "cairn.changes.Feed", []byte(`{"from": 1, "max": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Changes []struct {
			Op       string          `json:"op"`
			Entity   json.RawMessage `json:"entity"`
			ETag     string          `json:"etag"`
			TS       string          `json:"timestamp"`
			PrevETag *string         `json:"prevEtag"`
		} `json:"changes"`
		Next, Head uint64
	}
	if err := json.Unmarshal(msg.Data, &raw); err != nil || len(raw.Changes) != 1 || raw.Next != 2 || raw.Head != 5 {
		t.Fatalf("JSON reply %s: %v", msg.Data, err)
	}
	if ch := raw.Changes[0]; ch.Op != "put" || ch.ETag != ins.ETag || ch.PrevETag != nil || !strings.Contains(string(ch.Entity), `"N@odata.type":"Edm.Int64"`) ||
		!strings.Contains(string(ch.Entity), `"odata.etag":`) {
		t.Fatalf("JSON change %s", msg.Data)
	}
	// And through the account-qualified subject of the development account.
	if msg, err := th.nc.RequestWithContext(ctx, "cairn.changes.devstoreaccount1.Feed", []byte(`{"from": 5}`)); err != nil || !strings.Contains(string(msg.Data), `"next":6`) {
		t.Fatalf("devstoreaccount1 subject: %v %s", err, msg.Data)
	}
}

// TestChangeFeedWaits: a request with "wait" and nothing new is answered by
// the next write of its partitions.
func TestChangeFeedWaits(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	if _, err := th.c.CreateTable(ctx, "Poll"); err != nil {
		t.Fatal(err)
	}
	// A second client: the first one writes while this one waits.
	reader := client.New(th.nc, client.WithTimeout(20*time.Second))
	got := make(chan *wire.ChangesReply, 1)
	go func() {
		rep, err := reader.Changes(ctx, "Poll", wire.ChangesRequest{From: 1, Wait: 25 * time.Second, Partitions: []string{"mine"}})
		if err != nil {
			t.Error(err)
		}
		got <- rep
	}()
	if _, err := th.c.Insert(ctx, "Poll", engine.NewEntity("other", "1")); err != nil {
		t.Fatal(err)
	}
	if _, err := th.c.Insert(ctx, "Poll", engine.NewEntity("mine", "1")); err != nil {
		t.Fatal(err)
	}
	select {
	case rep := <-got:
		if rep == nil || len(rep.Changes) != 1 || rep.Changes[0].PartitionKey != "mine" || rep.Next != 3 {
			t.Fatalf("waited page: %+v", rep)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a waiting request was not answered by the write")
	}
}

// TestChangeFeedRefuses: bad requests are InvalidInput, a table that does
// not exist TableNotFound, a faulted journal TableFaulted; the development
// user may read its own account's feeds and no other's.
func TestChangeFeedRefuses(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	info, err := th.c.CreateTable(ctx, "Ref")
	if err != nil {
		t.Fatal(err)
	}
	code := func(subject, body string) engine.Code {
		t.Helper()
		msg, err := th.nc.RequestWithContext(ctx, subject, []byte(body))
		if err != nil {
			t.Fatalf("%s %s: %v", subject, body, err)
		}
		rep, err := wire.DecodeChangesReply(msg.Data, wire.Detect(msg.Data, ""))
		if err != nil {
			t.Fatalf("%s %s: %v", subject, body, err)
		}
		if rep.Error == nil {
			return ""
		}
		return rep.Error.Code
	}
	for _, body := range []string{
		`{"max": 1001}`, `{"max": -1}`, `{"from": -3}`, `{"wait": "31s"}`, `{"wait": "soon"}`, `{"wait": "-1s"}`,
		`{"partitions": ["a/b"]}`, `{"mystery": 1}`, `{"from": "1"}`, `{`,
	} {
		if c := code("cairn.changes.Ref", body); c != engine.CodeInvalidInput {
			t.Errorf("%s: %q, want InvalidInput", body, c)
		}
	}
	if c := code("cairn.changes.Ref", `{"max": 1000, "wait": "10ms", "partitions": ["a", ""], "from": 7}`); c != "" {
		t.Errorf("a good request: %s", c)
	}
	if c := code("cairn.changes.Nope", `{}`); c != engine.CodeTableNotFound {
		t.Errorf("a missing table: %s", c)
	}
	if c := code("cairn.changes.acme.Ref", `{}`); c != engine.CodeTableNotFound {
		t.Errorf("another account's table of the same name: %s", c)
	}

	// The development user: its own account's feeds, no other's.
	dev, err := nats.Connect(th.h.ClientURL(), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if msg, err := dev.RequestWithContext(ctx, "cairn.changes.Ref", []byte(`{}`)); err != nil || !strings.Contains(string(msg.Data), `"head":0`) {
		t.Fatalf("the development user's own feed: %v %s", err, msg.Data)
	}
	inbox := dev.NewInbox()
	allowed(t, dev, "cairn.changes.devstoreaccount1.Ref", func() error { return dev.PublishRequest("cairn.changes.devstoreaccount1.Ref", inbox, []byte(`{}`)) })
	refused(t, dev, "cairn.changes.acme.X", func() error { return dev.PublishRequest("cairn.changes.acme.X", inbox, []byte(`{}`)) })

	// A journal holding a record nothing can read.
	if _, err := th.c.Insert(ctx, "Ref", engine.NewEntity("p", "1")); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(th.nc)
	j, _ := journal.New(th.nc, journal.Config{})
	ack, err := js.Publish(ctx, j.PartitionSubject("Ref", info.Epoch, engine.DefaultShards, "p"), []byte{0x81, 0xa1, 'v', 0x09})
	if err != nil {
		t.Fatal(err)
	}
	tv, _ := th.h.Views().Table("Ref")
	if _, err := tv.WaitSeq(ctx, ack.Sequence); engine.ErrorCode(err) != engine.CodeTableFaulted {
		t.Fatalf("the view did not fault: %v", err)
	}
	if c := code("cairn.changes.Ref", `{}`); c != engine.CodeTableFaulted {
		t.Errorf("a faulted journal: %s", c)
	}
}

// TestChangeFeedLargePages: a page whose JSON would not fit into one NATS
// message (entities of control characters, six bytes each in JSON) holds
// fewer records, and next names the first one left out.
func TestChangeFeedLargePages(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	if _, err := th.c.CreateTable(ctx, "Big"); err != nil {
		t.Fatal(err)
	}
	wide := strings.Repeat("\x01", engine.MaxStringUnits)
	for i := range 4 {
		e := engine.NewEntity("p", fmt.Sprint(i))
		for k := range 15 {
			e.Properties = append(e.Properties, engine.Property{Name: fmt.Sprintf("P%02d", k), Value: engine.String(wide)})
		}
		if _, err := th.c.Insert(ctx, "Big", e); err != nil {
			t.Fatal(err)
		}
	}
	from, seen := uint64(1), 0
	for seen < 4 {
		msg, err := th.nc.RequestWithContext(ctx, "cairn.changes.Big", fmt.Appendf(nil, `{"from": %d, "max": 10}`, from))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := wire.DecodeChangesReply(msg.Data, wire.JSON)
		if err != nil || rep.Error != nil {
			t.Fatalf("%v %v", err, rep.Error)
		}
		if len(msg.Data) > int(th.nc.MaxPayload()) || len(rep.Changes) == 0 || len(rep.Changes) == 4 || rep.Next != rep.Changes[len(rep.Changes)-1].Seq+1 {
			t.Fatalf("a page of %d bytes with %d changes, next %d", len(msg.Data), len(rep.Changes), rep.Next)
		}
		for _, c := range rep.Changes {
			if v, _ := c.Entity.Get("P07"); c.Seq != from || v.Str() != wide {
				t.Fatalf("change at %d, want %d, or its entity differs", c.Seq, from)
			}
			from++
			seen++
		}
	}
}
