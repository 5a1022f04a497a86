package node

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/journal"
)

// TestReadinessFollowsTheServingConnection: a node whose connection that
// answers requests is lost is not ready, though its own connection is.
func TestReadinessFollowsTheServingConnection(t *testing.T) {
	ns, err := journal.StartEmbedded(journal.EmbeddedConfig{StoreDir: filepath.Join(t.TempDir(), "js"), Port: -1, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	serve, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	var r readiness
	r.nc.Store(nc)
	r.serve.Store(serve)
	if why := strings.Join(r.notReady(time.Now()), "; "); strings.Contains(why, "serving") {
		t.Fatalf("not ready with both connections up: %q", why)
	}
	serve.Close()
	if why := strings.Join(r.notReady(time.Now()), "; "); !strings.Contains(why, "nats (serving requests): CLOSED") {
		t.Fatalf("the serving connection lost, not named: %q", why)
	}
}
