package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
)

// fill writes n entities into partitions p0..p(parts-1) with batches of 100.
func fill(t *testing.T, c *aztables.Client, n, parts int) {
	t.Helper()
	ctx := context.Background()
	per := n / parts
	for p := 0; p < parts; p++ {
		for start := 0; start < per; start += 100 {
			var ops []aztables.TransactionAction
			for i := start; i < min(start+100, per); i++ {
				ops = append(ops, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd,
					Entity: entity(fmt.Sprintf("p%d", p), fmt.Sprintf("%05d", i), map[string]any{"N": int32(i), "Even": i%2 == 0, "Pad": "xxxxxxxxxxxxxxxx"})})
			}
			if _, err := c.SubmitTransaction(ctx, ops, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func keysOf(es []aztables.EDMEntity) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.PartitionKey + "/" + e.RowKey
	}
	return out
}

// TestPagingWhileWriting pages through 4,000 entities while another client
// inserts into and deletes from the table: every page comes from the
// snapshot of the first (on a placed cluster, each host's held snapshot),
// so the pages hold exactly the entities present when the query began,
// in order, once each.
func TestPagingWhileWriting(t *testing.T) {
	s := startServer(t, httpapiDefaults)
	c := s.table(t, "Big")
	fill(t, c, 4000, 4)
	stop, firstPage := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx := context.Background()
		<-firstPage // the query's snapshot is taken: write from now on
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// New rows between existing ones, and deletions of existing ones.
			if _, err := c.AddEntity(ctx, entity(fmt.Sprintf("p%d", i%4), fmt.Sprintf("%05d-new", i%1000), nil), nil); err != nil {
				t.Errorf("concurrent insert: %v", err)
				return
			}
			if _, err := c.DeleteEntity(ctx, fmt.Sprintf("p%d", i%4), fmt.Sprintf("%05d", 999-i%1000), nil); err != nil && code(err) != "ResourceNotFound" {
				t.Errorf("concurrent delete: %v", err)
				return
			}
		}
	}()
	var got []string
	pages := 0
	p := c.NewListEntitiesPager(nil)
	for p.More() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if pages == 1 {
			close(firstPage)
		}
		for _, raw := range page.Entities {
			var e aztables.EDMEntity
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			got = append(got, e.PartitionKey+"/"+e.RowKey)
		}
		time.Sleep(20 * time.Millisecond) // let the writer change the table between pages
	}
	close(stop)
	wg.Wait()
	if pages != 4 || len(got) != 4000 {
		t.Fatalf("%d entities in %d pages, want 4000 in 4", len(got), pages)
	}
	for i, k := range got {
		want := fmt.Sprintf("p%d/%05d", i/1000, i%1000)
		if k != want {
			t.Fatalf("entity %d is %s, want %s", i, k, want)
		}
	}
	// A fresh query sees the writer's changes.
	if fresh := keysOf(list(t, c, nil)); strings.Join(fresh, ",") == strings.Join(got, ",") {
		t.Fatal("the concurrent writes are not visible to a new query")
	}
}

func TestQueryOptions(t *testing.T) {
	s := startServer(t, httpapiDefaults)
	c := s.table(t, "Query")
	fill(t, c, 2400, 3)
	// Range query within a partition, with $select and a non-key filter.
	got := list(t, c, &aztables.ListEntitiesOptions{
		Filter: ptr("PartitionKey eq 'p1' and RowKey ge '00100' and RowKey lt '00200' and Even eq true"),
		Select: ptr("N"),
	})
	if len(got) != 50 || got[0].RowKey != "00100" || got[49].RowKey != "00198" {
		t.Fatalf("range: %d entities %v", len(got), keysOf(got))
	}
	if len(got[0].Properties) != 1 || got[0].Properties["N"] != int32(100) || got[0].ETag == "" || time.Time(got[0].Timestamp).IsZero() {
		t.Fatalf("$select N: %+v", got[0])
	}
	// $top: each page holds at most $top; the pager goes on.
	p := c.NewListEntitiesPager(&aztables.ListEntitiesOptions{Top: ptr(int32(7)), Filter: ptr("PartitionKey eq 'p2' and RowKey lt '00020'")})
	page, err := p.NextPage(context.Background())
	if err != nil || len(page.Entities) != 7 || page.NextPartitionKey == nil {
		t.Fatalf("$top 7: %d entities, continuation %v, %v", len(page.Entities), page.NextPartitionKey, err)
	}
	// An or on RowKey, and a PartitionKey range across partitions.
	if got := list(t, c, &aztables.ListEntitiesOptions{Filter: ptr("PartitionKey eq 'p0' and (RowKey eq '00001' or RowKey eq '00700')")}); len(got) != 2 {
		t.Fatalf("or on RowKey: %v", keysOf(got))
	}
	if got := list(t, c, &aztables.ListEntitiesOptions{Filter: ptr("PartitionKey gt 'p0' and N eq 5")}); strings.Join(keysOf(got), ",") != "p1/00005,p2/00005" {
		t.Fatalf("PartitionKey range: %v", keysOf(got))
	}
	// Descending (a Cairn option, sent as a header), paged.
	ctx := policy.WithHTTPHeader(context.Background(), http.Header{httpapi.OrderHeader: []string{"desc"}})
	got = listCtx(t, ctx, c, &aztables.ListEntitiesOptions{Filter: ptr("PartitionKey le 'p1'"), Top: ptr(int32(300))})
	if len(got) != 1600 || got[0].PartitionKey+"/"+got[0].RowKey != "p1/00799" || got[1599].PartitionKey+"/"+got[1599].RowKey != "p0/00000" {
		t.Fatalf("descending: %d entities, first %v", len(got), keysOf(got[:1]))
	}
	for i := 1; i < len(got); i++ {
		if got[i-1].PartitionKey+"/"+got[i-1].RowKey <= got[i].PartitionKey+"/"+got[i].RowKey {
			t.Fatalf("descending order broken at %d", i)
		}
	}
	// Errors: positioned filter syntax, bad $top, a forged continuation.
	for q, want := range map[string]string{
		"$filter=" + escape("N eq 5 and"):          "at 10",
		"$filter=" + escape("N eq datetime'nope'"): "datetime",
		"$top=0":                                      "InvalidQueryParameterValue",
		"NextPartitionKey=abc&NextRowKey=def":         "InvalidContinuationToken",
		"cairn-order=sideways":                        "asc or desc",
		"$filter=" + escape("PartitionKey eq 'p0' x"): "at 21",
	} {
		resp, body := s.raw(t, "GET", "/Query()?"+q, nil, nil)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d %s (want %q)", q, resp.StatusCode, body, want)
		}
	}
}

func escape(s string) string { return strings.NewReplacer(" ", "%20", "'", "%27").Replace(s) }

// TestReadYourWrites: a write's reply carries its journal position; a read
// naming a position the view has not reached waits for it, up to a bound.
func TestReadYourWrites(t *testing.T) {
	s := startServer(t, httpapi.Config{PositionWait: 300 * time.Millisecond})
	s.table(t, "RYW")
	resp, body := s.raw(t, "POST", "/RYW", []byte(`{"PartitionKey":"a","RowKey":"1"}`), nil)
	pos := resp.Header.Get(httpapi.PositionHeader)
	if resp.StatusCode != http.StatusCreated || pos == "" {
		t.Fatalf("insert: %d %s, position %q", resp.StatusCode, body, pos)
	}
	resp, body = s.raw(t, "GET", "/RYW(PartitionKey='a',RowKey='1')", nil, map[string]string{httpapi.PositionHeader: pos})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("read at the write's position: %d %s", resp.StatusCode, body)
	}
	n, _ := strconv.Atoi(pos)
	// A position ahead of the view: the read waits, then fails clearly...
	start := time.Now()
	resp, body = s.raw(t, "GET", "/RYW()", nil, map[string]string{httpapi.PositionHeader: strconv.Itoa(n + 1)})
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "PositionNotReached") || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("read ahead of the view: %d %s after %v", resp.StatusCode, body, time.Since(start))
	}
	// ...or is answered as soon as a write (here from NATS-side traffic
	// through the same committer) brings the view there.
	done := make(chan []byte)
	go func() {
		_, body := s.raw(t, "GET", "/RYW()", nil, map[string]string{httpapi.PositionHeader: strconv.Itoa(n + 1)})
		done <- body
	}()
	time.Sleep(50 * time.Millisecond)
	s.raw(t, "POST", "/RYW", []byte(`{"PartitionKey":"a","RowKey":"2"}`), nil)
	if body := <-done; !strings.Contains(string(body), `"RowKey":"2"`) {
		t.Fatalf("the waiting read did not see the write: %s", body)
	}
	if resp, _ := s.raw(t, "GET", "/RYW()", nil, map[string]string{httpapi.PositionHeader: "x"}); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a bad position: %d", resp.StatusCode)
	}
	// The load of a table waits for a position as a read does; a position
	// is one table's, so the load of every table refuses it.
	if resp, body := s.raw(t, "GET", "/$load?table=RYW", nil, map[string]string{httpapi.PositionHeader: strconv.Itoa(n + 1)}); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"table":"RYW"`) {
		t.Fatalf("load at a position reached: %d %s", resp.StatusCode, body)
	}
	if resp, body := s.raw(t, "GET", "/$load?table=RYW", nil, map[string]string{httpapi.PositionHeader: strconv.Itoa(n + 2)}); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "PositionNotReached") {
		t.Fatalf("load ahead of the view: %d %s", resp.StatusCode, body)
	}
	for _, pos := range []string{"x", strconv.Itoa(n)} {
		if resp, body := s.raw(t, "GET", "/$load", nil, map[string]string{httpapi.PositionHeader: pos}); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("load of every table at position %s: %d %s", pos, resp.StatusCode, body)
		}
	}
}

// TestLoad: per-partition write and read counters show a hot partition, on
// the load endpoint and in /metrics.
func TestLoad(t *testing.T) {
	skipPlaced(t, "a host's load counts the reads and the partitions of its own views")
	s := startServer(t, httpapiDefaults)
	c := s.table(t, "Hot")
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		if _, err := c.AddEntity(ctx, entity("hot", strconv.Itoa(i), nil), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.AddEntity(ctx, entity("cold", "1", nil), nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		get(t, c, "hot", "1")
	}
	_, body := s.raw(t, "GET", "/$load?table=Hot&top=1", nil, nil)
	var l struct {
		Tables []struct {
			Table  string
			Writes uint64
			Hot    []struct {
				PartitionKey  string
				Writes, Reads uint64
			}
		}
	}
	if err := json.Unmarshal(body, &l); err != nil || len(l.Tables) != 1 {
		t.Fatalf("load: %s %v", body, err)
	}
	if tb := l.Tables[0]; tb.Writes != 31 || len(tb.Hot) != 1 || tb.Hot[0].PartitionKey != "hot" || tb.Hot[0].Writes != 30 || tb.Hot[0].Reads != 5 {
		t.Fatalf("load: %s", body)
	}
	var m strings.Builder
	m.WriteString(metrics(t, s.h))
	for _, want := range []string{
		`cairn_partition_writes_total{table="Hot",partition="hot"} 30`,
		`cairn_partition_reads_total{table="Hot",partition="hot"} 5`,
		`cairn_table_entities{table="Hot"} 31`,
		`cairn_http_requests_total{op="Insert",table="Hot"} 31`,
	} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("%s not in /metrics:\n%s", want, m.String())
		}
	}
}
