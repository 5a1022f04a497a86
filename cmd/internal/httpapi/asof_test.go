package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/projections"
)

// asOfPage is one page of a query: the entities' keys with V, and the
// continuation.
type asOfPage struct {
	keys     []string
	position string
	npk, nrk string
}

// queryPage sends GET /<table>() with the query and headers; it fails the
// test unless the answer is 200.
func (s *server) queryPage(t *testing.T, table string, q url.Values, header map[string]string) asOfPage {
	t.Helper()
	resp, body := s.raw(t, "GET", "/"+table+"()?"+q.Encode(), nil, header)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("query %v %v: %s %s", q, header, resp.Status, body)
	}
	var v struct {
		Value []map[string]any `json:"value"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	p := asOfPage{position: resp.Header.Get(httpapi.PositionHeader),
		npk: resp.Header.Get("x-ms-continuation-NextPartitionKey"), nrk: resp.Header.Get("x-ms-continuation-NextRowKey")}
	for _, e := range v.Value {
		p.keys = append(p.keys, fmt.Sprintf("%s/%s=%v", e["PartitionKey"], e["RowKey"], e["V"]))
	}
	return p
}

// queryAll pages through a query with $top=2, sending header with the
// first page and next(header) with the later ones (the SDKs send the same
// headers again; a client may not), sleeping pause between pages.
func (s *server) queryAll(t *testing.T, table string, header map[string]string, next map[string]string, pause time.Duration) (keys []string, positions []string) {
	t.Helper()
	q := url.Values{"$top": {"2"}}
	h := header
	for i := 0; ; i++ {
		p := s.queryPage(t, table, q, h)
		keys = append(keys, p.keys...)
		positions = append(positions, p.position)
		if p.npk == "" {
			return keys, positions
		}
		if i > 10 {
			t.Fatal("the query does not end")
		}
		q.Set("NextPartitionKey", p.npk)
		q.Set("NextRowKey", p.nrk)
		h = next
		time.Sleep(pause)
	}
}

// TestAsOf: a retrieve and a query with X-Cairn-As-Of answer exactly what
// the table held at that journal position, over several pages (with the
// hold of the first page's snapshot, and after it was released, with or
// without the header on the later pages); every wrong use is a coded
// error with its status.
func TestAsOf(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{
		API:   httpapi.Config{HoldSnapshot: 100 * time.Millisecond},
		Views: projections.Config{AsOfMaxRecords: 4, HistoryCheck: time.Hour},
	})
	s := &server{h: h, endpoint: h.HTTPURL() + "/" + httpapi.DevAccountName}
	s.table(t, "AsOf")
	write := func(method, path, body string, header map[string]string) string {
		t.Helper()
		var b []byte
		if body != "" {
			b = []byte(body)
		}
		resp, rb := s.raw(t, method, path, b, header)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %s %s", method, path, resp.Status, rb)
		}
		return resp.Header.Get(httpapi.PositionHeader)
	}
	const pr = "/AsOf(PartitionKey='p',RowKey='r')"
	pos := []string{"",
		write("POST", "/AsOf", `{"PartitionKey":"p","RowKey":"r","V":1}`, nil),
		write("PUT", pr, `{"V":2}`, map[string]string{"If-Match": "*"}),
		write("DELETE", pr, "", map[string]string{"If-Match": "*"}),
	}
	// Record 4: five entities in one batch, for paging.
	var ops []aztables.TransactionAction
	for i := 1; i <= 5; i++ {
		ops = append(ops, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd,
			Entity: entity("q", strconv.Itoa(i), map[string]any{"V": int32(10 + i)})})
	}
	if _, err := s.service(t, "").NewClient("AsOf").SubmitTransaction(context.Background(), ops, nil); err != nil {
		t.Fatal(err)
	}
	pos = append(pos, "4")
	// Records 5 and 6, which no read as of 4 may show.
	pos = append(pos, write("POST", "/AsOf", `{"PartitionKey":"q","RowKey":"6","V":16}`, nil))
	pos = append(pos, write("PUT", "/AsOf(PartitionKey='q',RowKey='1')", `{"V":99}`, nil))
	if strings.Join(pos, ",") != ",1,2,3,4,5,6" {
		t.Fatalf("positions %v", pos)
	}
	asOf := func(n int) map[string]string { return map[string]string{httpapi.AsOfHeader: strconv.Itoa(n)} }

	// Retrieve.
	for n, want := range map[int]string{1: `"V":1`, 2: `"V":2`, 3: "ResourceNotFound"} {
		resp, body := s.raw(t, "GET", pr, nil, asOf(n))
		if !strings.Contains(string(body), want) || resp.Header.Get(httpapi.PositionHeader) != strconv.Itoa(n) {
			t.Errorf("retrieve as of %d: %s %s position %q, want %s", n, resp.Status, body, resp.Header.Get(httpapi.PositionHeader), want)
		}
	}
	if resp, body := s.raw(t, "GET", "/AsOf(PartitionKey='q',RowKey='1')", nil, asOf(4)); !strings.Contains(string(body), `"V":11`) {
		t.Errorf("retrieve of q/1 as of 4: %s %s", resp.Status, body)
	}

	// Queries, one page.
	for n, want := range map[int]string{1: "[p/r=1]", 2: "[p/r=2]", 3: "[]", 6: "[q/1=99 q/2=12 q/3=13 q/4=14 q/5=15 q/6=16]"} {
		p := s.queryPage(t, "AsOf", url.Values{}, asOf(n))
		if got := fmt.Sprint(p.keys); got != want || p.position != strconv.Itoa(n) {
			t.Errorf("query as of %d: %s at %s, want %s", n, got, p.position, want)
		}
	}
	// Paging as of 4: on the held snapshot, then with the holds released
	// between pages (the token names the position), with the header on
	// every page and without it on the later ones.
	const want4 = "[q/1=11 q/2=12 q/3=13 q/4=14 q/5=15]"
	for _, c := range []struct {
		name  string
		next  map[string]string
		pause time.Duration
	}{
		{"held", asOf(4), 0},
		{"held, no header after the first page", nil, 0},
		{"released", asOf(4), 300 * time.Millisecond},
		{"released, no header after the first page", nil, 300 * time.Millisecond},
	} {
		keys, positions := s.queryAll(t, "AsOf", asOf(4), c.next, c.pause)
		if fmt.Sprint(keys) != want4 || strings.Trim(strings.Repeat("4 ", len(positions)), " ") != strings.Join(positions, " ") {
			t.Errorf("%s: %v at %v, want %s at 4 on every page", c.name, keys, positions, want4)
		}
	}
	// The SDK's pager sends the header on every page.
	ctx := policy.WithHTTPHeader(context.Background(), http.Header{httpapi.AsOfHeader: {"4"}})
	if got := keysOf(listCtx(t, ctx, s.service(t, "").NewClient("AsOf"), &aztables.ListEntitiesOptions{Top: ptr(int32(2))})); fmt.Sprint(got) != "[q/1 q/2 q/3 q/4 q/5]" {
		t.Errorf("SDK pages as of 4: %v", got)
	}
	// A query of the present pages through the present.
	if keys, _ := s.queryAll(t, "AsOf", nil, nil, 0); len(keys) != 6 {
		t.Errorf("query of the present: %v", keys)
	}

	// A write as of a position: refused, nothing stored.
	if resp, body := s.raw(t, "POST", "/AsOf", entity("z", "1", nil), asOf(1)); resp.StatusCode != 400 || resp.Header.Get("x-ms-error-code") != "InvalidHeaderValue" {
		t.Errorf("a write with %s: %s %s", httpapi.AsOfHeader, resp.Status, body)
	}
	if resp, _ := s.raw(t, "GET", "/AsOf(PartitionKey='z',RowKey='1')", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the refused write was stored: %s", resp.Status)
	}

	// Continuations that do not belong to the request.
	first := s.queryPage(t, "AsOf", url.Values{"$top": {"2"}}, asOf(4))
	present := s.queryPage(t, "AsOf", url.Values{"$top": {"2"}}, nil)
	cont := func(p asOfPage) url.Values {
		return url.Values{"$top": {"2"}, "NextPartitionKey": {p.npk}, "NextRowKey": {p.nrk}}
	}
	type bad struct {
		name   string
		path   string
		header map[string]string
		status int
		code   string
	}
	purged := s.purgedTable(t)
	for _, c := range []bad{
		{"not a number", pr, asOf(-1), 400, "InvalidHeaderValue"},
		{"not a number (query)", "/AsOf()", map[string]string{httpapi.AsOfHeader: "x"}, 400, "InvalidHeaderValue"},
		{"0", pr, asOf(0), 400, "InvalidAsOfPosition"},
		{"beyond the view", pr, asOf(7), 400, "InvalidAsOfPosition"},
		{"beyond the view (query)", "/AsOf()", asOf(1 << 30), 400, "InvalidAsOfPosition"},
		{"with X-Cairn-Position", pr, map[string]string{httpapi.AsOfHeader: "1", httpapi.PositionHeader: "1"}, 400, "InvalidHeaderValue"},
		{"with X-Cairn-Position (query)", "/AsOf()", map[string]string{httpapi.AsOfHeader: "1", httpapi.PositionHeader: "1"}, 400, "InvalidHeaderValue"},
		{"more records than the limit", pr, asOf(5), 400, "AsOfTooFar"},
		{"an as-of continuation of another position", "/AsOf()?" + cont(first).Encode(), asOf(2), 400, "InvalidContinuationToken"},
		{"a continuation of the present", "/AsOf()?" + cont(present).Encode(), asOf(4), 400, "InvalidContinuationToken"},
		{"an as-of continuation with X-Cairn-Position", "/AsOf()?" + cont(first).Encode(), map[string]string{httpapi.PositionHeader: "1"}, 400, "InvalidHeaderValue"},
		{"purged history", "/" + purged + "()", asOf(1), 410, "HistoryTruncated"},
		{"a table with no record", "/Empty()", asOf(1), 400, "InvalidAsOfPosition"},
	} {
		if c.path == "/Empty()" {
			s.table(t, "Empty")
		}
		resp, body := s.raw(t, "GET", c.path, nil, c.header)
		if resp.StatusCode != c.status || resp.Header.Get("x-ms-error-code") != c.code || !strings.Contains(string(body), c.code) {
			t.Errorf("%s: %s %s, want %d %s", c.name, resp.Status, body, c.status, c.code)
		}
	}
}

// purgedTable makes a table of two records whose stream is then purged
// behind Cairn's back (the node's views check every hour, so the table is
// not faulted yet) and returns its name.
func (s *server) purgedTable(t *testing.T) string {
	t.Helper()
	s.table(t, "Purged")
	for _, rk := range []string{"1", "2"} {
		if resp, body := s.raw(t, "POST", "/Purged", entity("p", rk, nil), nil); resp.StatusCode != http.StatusCreated {
			t.Fatalf("insert: %s %s", resp.Status, body)
		}
	}
	nc := nodetest.Connect(t, s.h)
	js, _ := jetstream.New(nc)
	_, info, _ := s.h.Views().CatalogEntry("Purged")
	st, err := js.Stream(context.Background(), journal.StreamName("cairn", "Purged", info.Epoch))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	return "Purged"
}
