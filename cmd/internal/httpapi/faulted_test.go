package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/projections"
)

// TestFaultedTableServesTheRest is the attack on an unauthenticated NATS
// server: a 1-byte and a junk catalog record, 19 junk bytes on a table's
// journal subject, and a table's stream purged. The node stays up; the
// table with junk is faulted (TableFaulted, 503 over HTTP, the same code
// over NATS; its fault in $load and /metrics) while another table serves;
// after a restart the node becomes ready and the same holds, and the purged
// table is faulted too.
func TestFaultedTableServesTheRest(t *testing.T) {
	dir := t.TempDir()
	h, stop := nodetest.Start(t, node.Config{DataDir: dir})
	s := &server{h: h, endpoint: h.HTTPURL() + "/" + httpapi.DevAccountName}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound on a broken test
	t.Cleanup(cancel)
	for _, name := range []string{"Good", "Bad", "Purged"} {
		s.table(t, name)
		if resp, body := s.raw(t, "POST", "/"+name, entity("p", "1", nil), nil); resp.StatusCode != http.StatusCreated {
			t.Fatalf("insert into %s: %s %s", name, resp.Status, body)
		}
	}
	nc := nodetest.Connect(t, h) // the journal's subjects and streams need the node user
	js, _ := jetstream.New(nc)
	j, _ := journal.New(nc, journal.Config{})
	publish := func(subj string, data []byte) uint64 {
		t.Helper()
		ack, err := js.Publish(ctx, subj, data)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	_, bad, _ := h.Views().CatalogEntry("Bad")
	_, purged, _ := h.Views().CatalogEntry("Purged")
	publish("cairn.catalog.x", []byte("1"))
	last := publish("cairn.catalog.junk", []byte("nineteen junk bytes"))
	junk := publish(j.PartitionSubject("Bad", bad.Epoch, bad.Shards, "p"), []byte("nineteen junk bytes"))
	if err := h.Views().WaitCatalog(ctx, last); err != nil {
		t.Fatal(err)
	}
	tv, _ := h.Views().Table("Bad")
	if _, err := tv.WaitSeq(ctx, junk); engine.ErrorCode(err) != engine.CodeTableFaulted {
		t.Fatalf("the view of Bad after junk: %v", err)
	}

	// check asks over HTTP and NATS, on the node as it runs now.
	check := func(h *node.Node, nc *nats.Conn, faulted map[string]uint64) {
		t.Helper()
		s := &server{h: h, endpoint: h.HTTPURL() + "/" + httpapi.DevAccountName}
		c := client.New(nc, client.WithTimeout(20*time.Second))
		for _, name := range []string{"Good", "Bad", "Purged"} {
			seq, isFaulted := faulted[name]
			want := http.StatusOK
			if isFaulted {
				want = http.StatusServiceUnavailable
			}
			for _, req := range []struct{ method, path string }{
				{"GET", fmt.Sprintf("/%s(PartitionKey='p',RowKey='1')", name)},
				{"GET", "/" + name + "()"},
			} {
				resp, body := s.raw(t, req.method, req.path, nil, nil)
				if resp.StatusCode != want || isFaulted && resp.Header.Get("x-ms-error-code") != string(engine.CodeTableFaulted) {
					t.Errorf("%s %s: %s %s", req.method, req.path, resp.Status, body)
				}
			}
			resp, body := s.raw(t, "POST", "/"+name, entity("p", fmt.Sprint(time.Now().UnixNano()), nil), nil)
			if isFaulted != (resp.StatusCode == http.StatusServiceUnavailable) || isFaulted && !strings.Contains(string(body), "TableFaulted") {
				t.Errorf("insert into %s over HTTP: %s %s", name, resp.Status, body)
			}
			_, err := c.Insert(ctx, name, engine.NewEntity("p", fmt.Sprint("n", time.Now().UnixNano())))
			_, _, rerr := c.Retrieve(ctx, name, "p", "1")
			for _, err := range []error{err, rerr} {
				if isFaulted && engine.ErrorCode(err) != engine.CodeTableFaulted || !isFaulted && err != nil {
					t.Errorf("%s over NATS: %v", name, err)
				}
			}
			if isFaulted {
				var load struct{ Tables []projections.Load }
				_, body := s.raw(t, "GET", "/$load?table="+name, nil, nil)
				if err := json.Unmarshal(body, &load); err != nil || len(load.Tables) != 1 || load.Tables[0].Fault == nil || load.Tables[0].Fault.Seq != seq {
					t.Errorf("$load of %s: %s", name, body)
				}
			}
		}
		var b strings.Builder
		b.WriteString(metrics(t, h))
		for _, name := range []string{"Good", "Bad", "Purged"} {
			v := "0"
			if _, ok := faulted[name]; ok {
				v = "1"
			}
			if line := fmt.Sprintf("\ncairn_table_faulted{table=%q} %s\n", name, v); !strings.Contains(b.String(), line) {
				t.Errorf("/metrics lacks %q", line)
			}
		}
		if !strings.Contains(b.String(), "\ncairn_catalog_records_skipped_total 2\n") {
			t.Errorf("/metrics does not count the two skipped catalog records")
		}
	}
	check(h, nc, map[string]uint64{"Bad": junk})

	// Purge a table's stream behind the node's back, then restart: the
	// node becomes ready, both tables are faulted, the other serves.
	st, err := js.Stream(ctx, journal.StreamName("cairn", "Purged", purged.Epoch))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	stop()
	h, _ = nodetest.Start(t, node.Config{DataDir: dir})
	nc = nodetest.Connect(t, h)
	defer nc.Close()
	check(h, nc, map[string]uint64{"Bad": junk, "Purged": 1})
}
