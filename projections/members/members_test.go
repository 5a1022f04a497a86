package members_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/journal/jstest"
	"github.com/cairn-dev/cairn/projections/members"
)

// member runs a node's membership on its own connection to the server at
// url; stop ends it cleanly, die closes its connection first (the node
// dies: its key stays, and it leaves after TTL).
type member struct {
	m    *members.Members
	nc   *nats.Conn
	stop func()
	done chan error
}

const beat, ttl = 100 * time.Millisecond, 1500 * time.Millisecond

func startMember(t *testing.T, url, host string) *member {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	kv, err := members.Open(ctx, js, "cairn", 1)
	if err != nil {
		t.Fatal(err)
	}
	mb := &member{m: members.New(kv, members.Config{Host: host, Name: "machine:" + host, Beat: beat, TTL: ttl}), nc: nc, done: make(chan error, 1)}
	go func() { mb.done <- mb.m.Run(ctx) }()
	mb.stop = func() {
		cancel()
		if err := <-mb.done; err != nil {
			t.Errorf("%s: Run: %v", host, err)
		}
		nc.Close()
	}
	t.Cleanup(func() {
		cancel()
		nc.Close()
	})
	select {
	case <-mb.m.Ready():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s not ready", host)
	}
	return mb
}

// waitLive waits until m sees exactly want live, through Changed.
func waitLive(t *testing.T, m *members.Members, want ...string) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.After(10 * time.Second)
	for {
		ch := m.Changed()
		if got := m.Live(); slices.Equal(got, want) {
			return time.Since(start)
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("live %v, want %v", m.Live(), want)
		}
	}
}

// TestMembers: nodes see each other join; one that stops cleanly leaves
// at once (its key deleted); one that dies (its connection gone, its key
// left behind) leaves once its last heartbeat is TTL older than the
// others', and not before; a node started after a death does not count
// the dead one; the metrics say so.
func TestMembers(t *testing.T) {
	ns, _ := jstest.Server(t)
	url := ns.ClientURL()
	a := startMember(t, url, "a")
	waitLive(t, a.m, "a")
	b := startMember(t, url, "b")
	waitLive(t, a.m, "a", "b")
	waitLive(t, b.m, "a", "b")

	if took := func() time.Duration { b.stop(); return waitLive(t, a.m, "a") }(); took >= ttl {
		t.Fatalf("a clean stop took %v to be seen, as long as a death (%v)", took, ttl)
	}

	c := startMember(t, url, "c")
	waitLive(t, a.m, "a", "c")
	died := time.Now()
	c.nc.Close() // dies: no more heartbeats, no deletion
	waitLive(t, a.m, "a")
	if took := time.Since(died); took < ttl-2*beat {
		t.Fatalf("a death seen after %v, before TTL (%v)", took, ttl)
	}
	d := startMember(t, url, "d")
	if got := d.m.Live(); !slices.Equal(got, []string{"a", "d"}) {
		t.Fatalf("a node started after a death sees %v", got)
	}
	waitLive(t, a.m, "a", "d")
	var sb strings.Builder
	a.m.WriteMetrics(&sb)
	for _, want := range []string{"cairn_cluster_hosts 2\n", "cairn_cluster_host_joins_total 4\n", "cairn_cluster_host_leaves_total 2\n"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, sb.String())
		}
	}
}
