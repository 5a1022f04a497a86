package node_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// TestReadyzJournalMissing: a node whose table's stream, then catalog
// stream, is deleted behind its back answers /readyz 503 naming what is
// missing, in fixed phrases; dropping the table whose history is gone
// makes it ready again.
func TestReadyzJournalMissing(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	gone, err := th.c.CreateTable(ctx, "Gone")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.c.CreateTable(ctx, "Kept"); err != nil {
		t.Fatal(err)
	}
	if _, err := th.c.Insert(ctx, "Gone", engine.NewEntity("p", "1")); err != nil {
		t.Fatal(err)
	}
	ready := th.h.HTTPURL() + node.ReadyPath
	waitProbe(t, ready, func(p probe) bool { return p.status == http.StatusOK })
	js, err := jetstream.New(th.nc) // the node user's
	if err != nil {
		t.Fatal(err)
	}
	reasons := func(p probe) []string {
		if p.status != http.StatusServiceUnavailable {
			return nil
		}
		return notReady(t, p)
	}

	// A table's stream.
	if err := js.DeleteStream(ctx, journal.StreamName("cairn", "Gone", gone.Epoch)); err != nil {
		t.Fatal(err)
	}
	p := waitProbe(t, ready, func(p probe) bool { return slices.Contains(reasons(p), "journal: the stream of 1 table missing") })
	if why := reasons(p); len(why) != 1 {
		t.Fatalf("readyz reasons %q, want only the stream", why)
	}
	if _, _, err := th.c.Retrieve(ctx, "Gone", "p", "1"); engine.ErrorCode(err) != engine.CodeTableFaulted {
		t.Fatalf("a read of the table without its stream: %v", err)
	}
	if _, err := th.c.Insert(ctx, "Kept", engine.NewEntity("p", "1")); err != nil {
		t.Fatalf("a write to another table: %v", err)
	}
	// The operator drops the table (its history is gone): ready again.
	if err := th.c.DeleteTable(ctx, "Gone"); err != nil {
		t.Fatalf("dropping the table without its stream: %v", err)
	}
	waitProbe(t, ready, func(p probe) bool { return p.status == http.StatusOK })

	// The catalog's stream.
	if err := js.DeleteStream(ctx, journal.CatalogStreamName("cairn")); err != nil {
		t.Fatal(err)
	}
	p = waitProbe(t, ready, func(p probe) bool { return slices.Contains(reasons(p), "journal: catalog stream missing") })
	if strings.Contains(p.body, "CAIRN") || strings.Contains(p.body, "nats") {
		t.Fatalf("readyz names a server detail: %s", p.body)
	}
	if _, _, err := th.c.Retrieve(ctx, "Kept", "p", "1"); err != nil {
		t.Fatalf("a read of a table while the catalog is missing: %v", err)
	}
}
