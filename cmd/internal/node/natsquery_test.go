package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/wire"
)

// queryModel is what the tests wrote: N per entity key.
type queryModel map[[2]string]int64

// want returns the keys of the entities match selects, in key order (or
// reverse key order).
func (m queryModel) want(match func(pk, rk string, n int64) bool, desc bool) [][2]string {
	var keys [][2]string
	for k, n := range m {
		if match(k[0], k[1], n) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	if desc {
		slices.Reverse(keys)
	}
	return keys
}

// check compares a query's entities with the model's: keys, order, N,
// and an ETag on each.
func (m queryModel) check(t *testing.T, what string, got []wire.QueryEntity, want [][2]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entities, want %d", what, len(got), len(want))
	}
	for i, qe := range got {
		k := [2]string{qe.Entity.PartitionKey, qe.Entity.RowKey}
		if k != want[i] {
			t.Fatalf("%s: entity %d is %v, want %v", what, i, k, want[i])
		}
		if n, ok := qe.Entity.Get("N"); !ok || n.Int() != m[k] {
			t.Fatalf("%s: %v has N=%v, want %d", what, k, n, m[k])
		}
		if !strings.HasPrefix(qe.ETag, `W/"`) || qe.Entity.Timestamp == 0 {
			t.Fatalf("%s: %v without its ETag or Timestamp: %q %d", what, k, qe.ETag, qe.Entity.Timestamp)
		}
	}
}

// writeQueryTable fills a table with 5 partitions of 60 entities (a batch
// each) and returns the model and the last write's position.
func writeQueryTable(t *testing.T, c *client.Client, table string) (queryModel, uint64) {
	t.Helper()
	ctx := ctxT(t)
	mustTable(t, c, table)
	m := queryModel{}
	var seq uint64
	for p := range 5 {
		pk := fmt.Sprintf("p%d", p)
		var ops []engine.Operation
		for r := range 60 {
			rk := fmt.Sprintf("r%03d", r)
			n := int64(p*100 + r)
			tag := "odd"
			if r%2 == 0 {
				tag = "even"
			}
			ops = append(ops, engine.Operation{Op: engine.OpInsert, Entity: engine.NewEntity(pk, rk,
				engine.Property{Name: "N", Value: engine.Int64(n)}, engine.Property{Name: "Tag", Value: engine.String(tag)})})
			m[[2]string{pk, rk}] = n
		}
		rep, err := c.Batch(ctx, table, ops)
		if err != nil {
			t.Fatal(err)
		}
		seq = rep.Seq
	}
	return m, seq
}

// collect pages through a query with the client's iterator.
func collect(t *testing.T, c *client.Client, table string, opts ...client.QueryOption) []wire.QueryEntity {
	t.Helper()
	var out []wire.QueryEntity
	for qe, err := range c.QueryAll(ctxT(t), table, opts...) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, qe)
	}
	return out
}

// TestQueryOverNATS: a Query on the command subject reads a partition, a
// filter, a selection, pages of top entities through the continuation
// until done (compared with a model of what was written), descending
// order, the held snapshot of the first page while the table is written,
// a position wait and a read of the past.
func TestQueryOverNATS(t *testing.T) {
	th := startNode(t, node.Config{API: httpapi.Config{PositionWait: 300 * time.Millisecond}})
	ctx := ctxT(t)
	c := th.c
	m, last := writeQueryTable(t, c, "Things")

	// One partition, on one page.
	page, err := c.Query(ctx, "Things", client.QueryFilter("PartitionKey eq 'p1'"))
	if err != nil {
		t.Fatal(err)
	}
	if page.Continuation != "" || page.Seq != last {
		t.Fatalf("one partition: continuation %q, seq %d (want %d)", page.Continuation, page.Seq, last)
	}
	m.check(t, "partition p1", page.Entities, m.want(func(pk, _ string, _ int64) bool { return pk == "p1" }, false))

	// A filter on properties, across partitions.
	got := collect(t, c, "Things", client.QueryFilter("N gt 150 and Tag eq 'even' and RowKey lt 'r030'"))
	m.check(t, "filter", got, m.want(func(_, rk string, n int64) bool { return n > 150 && n%2 == 0 && rk < "r030" }, false))

	// A selection: the keys, Timestamp and the named properties only.
	page, err = c.Query(ctx, "Things", client.QueryFilter("PartitionKey eq 'p0' and RowKey eq 'r002'"), client.QuerySelect("Tag"))
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entities) != 1 || len(page.Entities[0].Entity.Properties) != 1 || page.Entities[0].Entity.Properties[0].Name != "Tag" {
		t.Fatalf("select Tag: %+v", page.Entities)
	}

	// Pages of 7, by hand: each full but the last, a continuation on each
	// but the last, the whole table in key order.
	var paged []wire.QueryEntity
	pages, next := 0, ""
	for {
		page, err := c.Query(ctx, "Things", client.QueryTop(7), client.QueryContinue(next))
		if err != nil {
			t.Fatal(err)
		}
		pages++
		paged = append(paged, page.Entities...)
		if page.Continuation == "" {
			break
		}
		if len(page.Entities) != 7 {
			t.Fatalf("page %d holds %d entities and a continuation", pages, len(page.Entities))
		}
		next = page.Continuation
	}
	m.check(t, "pages of 7", paged, m.want(func(string, string, int64) bool { return true }, false))
	if pages != (len(m)+6)/7 {
		t.Fatalf("%d pages of 7 for %d entities", pages, len(m))
	}

	// Descending, through the iterator.
	got = collect(t, c, "Things", client.QueryTop(11), client.QueryDescending())
	m.check(t, "descending", got, m.want(func(string, string, int64) bool { return true }, true))
	// A descending continuation is refused in ascending order.
	page, err = c.Query(ctx, "Things", client.QueryTop(3), client.QueryDescending())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Query(ctx, "Things", client.QueryTop(3), client.QueryContinue(page.Continuation)); engine.ErrorCode(err) != "InvalidContinuationToken" {
		t.Fatalf("a descending continuation in ascending order: %v", err)
	}

	// The pages after the first read its snapshot: a write made between
	// them does not show, the next query sees it.
	first, err := c.Query(ctx, "Things", client.QueryFilter("PartitionKey eq 'p4'"), client.QueryTop(10))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := c.Insert(ctx, "Things", engine.NewEntity("p4", "r050x", engine.Property{Name: "N", Value: engine.Int64(-1)}))
	if err != nil {
		t.Fatal(err)
	}
	rest := collect(t, c, "Things", client.QueryFilter("PartitionKey eq 'p4'"), client.QueryTop(10), client.QueryContinue(first.Continuation))
	m.check(t, "p4 on the held snapshot", append(first.Entities, rest...), m.want(func(pk, _ string, _ int64) bool { return pk == "p4" }, false))
	m[[2]string{"p4", "r050x"}] = -1
	got = collect(t, c, "Things", client.QueryFilter("PartitionKey eq 'p4'"), client.QueryAtLeast(rep.Seq))
	m.check(t, "p4 after the write", got, m.want(func(pk, _ string, _ int64) bool { return pk == "p4" }, false))

	// A read of the past: the table before the insert, on every page.
	got = collect(t, c, "Things", client.QueryFilter("PartitionKey eq 'p4'"), client.QueryTop(9), client.QueryAsOf(last))
	delete(m, [2]string{"p4", "r050x"})
	m.check(t, "p4 as of the batches", got, m.want(func(pk, _ string, _ int64) bool { return pk == "p4" }, false))

	// A position ahead of the view: the query waits, then fails; or is
	// answered once a write brings the view there.
	start := time.Now()
	if _, err := c.Query(ctx, "Things", client.QueryAtLeast(rep.Seq+1)); engine.ErrorCode(err) != engine.CodePositionNotReached || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("ahead of the view: %v after %v", err, time.Since(start))
	}
	done := make(chan error, 1)
	go func() {
		page, err := client.New(th.nc, client.WithTimeout(20*time.Second)).Query(ctx, "Things",
			client.QueryFilter("PartitionKey eq 'late'"), client.QueryAtLeast(rep.Seq+1))
		if err == nil && len(page.Entities) != 1 {
			err = fmt.Errorf("the page at position %d holds %d entities, want the late one", page.Seq, len(page.Entities))
		}
		done <- err
	}()
	if _, err := c.Insert(ctx, "Things", engine.NewEntity("late", "1", engine.Property{Name: "N", Value: engine.Int64(1)})); err != nil {
		t.Fatal(err)
	}
	// Either the query was waiting when the write came, or it was sent
	// after: both must answer with the write.
	if err := <-done; err != nil {
		t.Fatalf("a query waiting for a position: %v", err)
	}
}

// ask sends body on subject and returns the reply's bytes.
func ask(t *testing.T, nc *nats.Conn, subject string, body []byte, header nats.Header) []byte {
	t.Helper()
	msg := nats.NewMsg(subject)
	msg.Data, msg.Header = body, header
	r, err := nc.RequestMsgWithContext(ctxT(t), msg)
	if err != nil {
		t.Fatal(err)
	}
	return r.Data
}

// jsonCode reads a JSON error reply's code ("" when it is not one).
func jsonCode(t *testing.T, b []byte) string {
	t.Helper()
	var r struct {
		Error *struct{ Code, Message string }
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("reply %q is not JSON: %v", b, err)
	}
	if r.Error == nil {
		return ""
	}
	if r.Error.Message == "" {
		t.Fatalf("error without a message: %s", b)
	}
	return r.Error.Code
}

// TestQueryOverNATSJSON: a Query in JSON, as `nats req` sends it, pages
// with its continuation; a bad filter, top, field or continuation is a
// coded error in JSON; a body that is neither JSON nor msgpack (text at a
// terminal, an empty one) is answered in JSON, on the change feed's and
// the table commands' subjects too, while a msgpack request's error stays
// msgpack; none of them writes anything.
func TestQueryOverNATSJSON(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	m, last := writeQueryTable(t, th.c, "Things")
	nc := th.nc

	var got []wire.QueryEntity
	next := ""
	for {
		body := `{"op":"Query","filter":"PartitionKey eq 'p2' and N lt 230","top":4,"select":["N"]}`
		if next != "" {
			body = `{"op":"Query","filter":"PartitionKey eq 'p2' and N lt 230","top":4,"select":["N"],"continuation":` + string(wire.AppendJSONString(nil, next)) + `}`
		}
		b := ask(t, nc, "cairn.cmd.Things", []byte(body), nil)
		page, err := wire.DecodeQueryReply(b, wire.JSON)
		if err != nil || page.Error != nil {
			t.Fatalf("%s: %v %v", b, err, page.Error)
		}
		for _, qe := range page.Entities {
			if len(qe.Entity.Properties) != 1 {
				t.Fatalf("select N: %s", b)
			}
		}
		got = append(got, page.Entities...)
		if next = page.Continuation; next == "" {
			break
		}
	}
	m.check(t, "JSON pages", got, m.want(func(pk, _ string, n int64) bool { return pk == "p2" && n < 230 }, false))

	for body, want := range map[string]string{
		`{"op":"Query","filter":"N gt"}`:                          "InvalidInput",
		`{"op":"Query","filter":"N gt 'x' or"}`:                   "InvalidInput",
		`{"op":"Query","top":1001}`:                               "InvalidInput",
		`{"op":"Query","top":-1}`:                                 "InvalidInput",
		`{"op":"Query","select":["no-name"]}`:                     "InvalidInput",
		`{"op":"Query","sort":"N"}`:                               "InvalidInput",
		`{"op":"Query","asOf":0}`:                                 "InvalidAsOfPosition",
		`{"op":"Query","asOf":1,"position":1}`:                    "InvalidInput",
		`{"op":"Query","continuation":"not one"}`:                 "InvalidContinuationToken",
		`{"op":"Query","continuation":"q1!a!1!0!@@!x"}`:           "InvalidContinuationToken",
		`{"op":"Query","filter":"PartitionKey eq 'p1'"} trailing`: "InvalidInput",
		`{"op":"Query"`:                                           "InvalidInput",
		`{"op":"Query","top":2}`:                                  "",
	} {
		if got := jsonCode(t, ask(t, nc, "cairn.cmd.Things", []byte(body), nil)); got != want {
			t.Errorf("%s: code %q, want %q", body, got, want)
		}
	}
	if got := jsonCode(t, ask(t, nc, "cairn.cmd.Missing", []byte(`{"op":"Query"}`), nil)); got != "TableNotFound" {
		t.Errorf("a query of a missing table: %q", got)
	}

	// Not msgpack: text, an empty body, a truncated map. The errors come
	// back as JSON on every subject.
	for _, subject := range []string{"cairn.cmd.Things", "cairn.changes.Things", "cairn.tables"} {
		for _, body := range [][]byte{[]byte("hello"), nil, []byte("list the tables please"), {0x82, 0xa2, 'o', 'p'}} {
			if body == nil && strings.HasPrefix(subject, "cairn.changes.") {
				continue // an empty change feed request reads from the beginning
			}
			if got := jsonCode(t, ask(t, nc, subject, body, nil)); got != "InvalidInput" {
				t.Errorf("%s, body %q: code %q, want InvalidInput in JSON", subject, body, got)
			}
		}
	}
	if b := ask(t, nc, "cairn.cmd.Things", []byte("hello"), nil); !strings.Contains(string(b), "a request is a JSON object") {
		t.Errorf("the error to text at a terminal does not say what a request is: %s", b)
	}
	// A msgpack request's error is msgpack, and so is any body sent with a
	// msgpack Content-Type.
	bad, err := msgpack.Marshal(map[string]any{"op": "Query", "top": 5000})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		body   []byte
		header nats.Header
	}{{bad, nil}, {[]byte("hello"), nats.Header{"Content-Type": []string{"application/msgpack"}}}} {
		b := ask(t, nc, "cairn.cmd.Things", c.body, c.header)
		rep, err := wire.DecodeReplyMsgpack(b)
		if err != nil || rep.Error == nil || rep.Error.Code != engine.CodeInvalidInput {
			t.Errorf("body %q: reply %q (%v), want an InvalidInput in msgpack", c.body, b, err)
		}
	}

	// Nothing was written by any of it.
	page, err := th.c.Query(ctx, "Things", client.QueryTop(1))
	if err != nil {
		t.Fatal(err)
	}
	if page.Seq != last {
		t.Fatalf("the table moved from position %d to %d", last, page.Seq)
	}
}

// TestQueryOverNATSProjection: a declared projection (read-only) answers
// a Query as a table does.
func TestQueryOverNATSProjection(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	mustTable(t, th.c, "Employees")
	for i, email := range []string{"bond@contoso.com", "moneypenny@contoso.com", "q@contoso.com"} {
		if _, err := th.c.Insert(ctx, "Employees", engine.NewEntity("Sales", fmt.Sprint(i),
			engine.Property{Name: "Email", Value: engine.String(email)}, engine.Property{Name: "FirstName", Value: engine.String(fmt.Sprint("name", i))})); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := declare(t, th.h, emailIndex(1)); got != "declared" {
		t.Fatal(got)
	}
	waitProjection(t, th.h, emailIndex(1))
	got := collect(t, th.c, "EmployeesByEmail", client.QueryTop(2))
	if len(got) != 3 {
		t.Fatalf("%d index entries, want 3", len(got))
	}
	page, err := th.c.Query(ctx, "EmployeesByEmail", client.QueryFilter("PartitionKey eq 'moneypenny@contoso.com'"))
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entities) != 1 {
		t.Fatalf("the index entry of moneypenny: %+v", page.Entities)
	}
	if v, _ := page.Entities[0].Entity.Get("FirstName"); v.Str() != "name1" {
		t.Fatalf("the index entry of moneypenny: %+v", page.Entities[0].Entity)
	}
}

// TestQueryOverNATSServiceUser: a service user queries the tables it was
// given, over the same subjects as its other commands, and no other.
func TestQueryOverNATSServiceUser(t *testing.T) {
	th := startNode(t, node.Config{NATSUsers: usersFile(t, `{"users":[
		{"user":"billing","password":"billing-pw","account":"devstoreaccount1","tables":["Invoices"]},
		{"user":"ops","password":"ops-pw","account":"acme","tables":["*"],"manageTables":true}
	]}`)})
	ctx := ctxT(t)
	mustTable(t, th.c, "Invoices", "Customers")
	for _, table := range []string{"Invoices", "Customers"} {
		if _, err := th.c.Insert(ctx, table, engine.NewEntity("2026", "1")); err != nil {
			t.Fatal(err)
		}
	}
	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	svc, err := nats.Connect(th.h.ClientURL(), nats.UserInfo("billing", "billing-pw"), nats.CustomInboxPrefix("_INBOX_billing"), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	c := client.New(svc, client.WithTimeout(2*time.Second))
	page, err := c.Query(ctx, "Invoices")
	if err != nil || len(page.Entities) != 1 {
		t.Fatalf("a query of its table: %v %v", page, err)
	}
	body, err := wire.EncodeQueryRequest(&wire.QueryRequest{}, wire.Msgpack)
	if err != nil {
		t.Fatal(err)
	}
	inbox := svc.NewInbox()
	for _, subj := range []string{"cairn.cmd.Customers", "cairn.cmd.devstoreaccount1.Customers", "cairn.cmd.acme.Invoices"} {
		refused(t, svc, subj, func() error { return svc.PublishRequest(subj, inbox, body) })
	}
	qctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := c.Query(qctx, "Customers"); err == nil {
		t.Fatal("a query of a table it was not given was answered")
	}

	// Another account's user queries its account's tables, by the
	// account's subjects, and sees none of the development account's.
	ops, err := nats.Connect(th.h.ClientURL(), nats.UserInfo("ops", "ops-pw"), nats.CustomInboxPrefix("_INBOX_ops"), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer ops.Close()
	oc := client.New(ops, client.WithAccount("acme"))
	if _, err := oc.CreateTable(ctx, "Invoices"); err != nil {
		t.Fatal(err)
	}
	if _, err := oc.Insert(ctx, "Invoices", engine.NewEntity("acme", "1")); err != nil {
		t.Fatal(err)
	}
	page, err = oc.Query(ctx, "Invoices")
	if err != nil || len(page.Entities) != 1 || page.Entities[0].Entity.PartitionKey != "acme" {
		t.Fatalf("acme's query of its Invoices: %+v %v", page, err)
	}
	refused(t, ops, "cairn.cmd.Invoices", func() error { return ops.PublishRequest("cairn.cmd.Invoices", ops.NewInbox(), body) })
}

// TestQueryOverNATSLargePage: a page that would not fit into one NATS
// message is cut, its continuation naming the first entity left out, and
// paging still returns every entity once, in order (msgpack and JSON).
func TestQueryOverNATSLargePage(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	mustTable(t, th.c, "Wide")
	big := strings.Repeat("x", engine.MaxStringUnits)
	m := queryModel{}
	for b := range 6 { // batches of 50: 64 KiB each by Azure's size formula
		var ops []engine.Operation
		for r := range 50 {
			rk := fmt.Sprintf("r%03d", b*50+r)
			ops = append(ops, engine.Operation{Op: engine.OpInsert, Entity: engine.NewEntity("p", rk,
				engine.Property{Name: "N", Value: engine.Int64(int64(b*50 + r))}, engine.Property{Name: "Big", Value: engine.String(big)})})
			m[[2]string{"p", rk}] = int64(b*50 + r)
		}
		if _, err := th.c.Batch(ctx, "Wide", ops); err != nil {
			t.Fatal(err)
		}
	}
	limit := int(th.nc.MaxPayload())
	if 300*len(big) <= limit {
		t.Fatalf("the server takes messages of %d bytes: 300 entities of %d fit", limit, len(big))
	}
	page, err := th.c.Query(ctx, "Wide")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(page.Entities); n == 0 || n >= 300 || page.Continuation == "" {
		t.Fatalf("the first page holds %d entities (continuation %q), want fewer than 300 and a continuation", n, page.Continuation)
	}
	m.check(t, "paged in msgpack", collect(t, th.c, "Wide"), m.want(func(string, string, int64) bool { return true }, false))

	var got []wire.QueryEntity
	next := ""
	for {
		body := `{"op":"Query"}`
		if next != "" {
			body = `{"op":"Query","continuation":` + string(wire.AppendJSONString(nil, next)) + `}`
		}
		b := ask(t, th.nc, "cairn.cmd.Wide", []byte(body), nil)
		if len(b) > limit {
			t.Fatalf("a reply of %d bytes", len(b))
		}
		page, err := wire.DecodeQueryReply(b, wire.JSON)
		if err != nil || page.Error != nil {
			t.Fatalf("%v %v", err, page.Error)
		}
		got = append(got, page.Entities...)
		if next = page.Continuation; next == "" {
			break
		}
	}
	m.check(t, "paged in JSON", got, m.want(func(string, string, int64) bool { return true }, false))
}
