package node_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
)

// probe is one answer of a health endpoint.
type probe struct {
	status int
	body   string
}

// getProbe sends GET url and returns the answer (status 0 when nothing
// answered).
func getProbe(url string) probe {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return probe{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return probe{resp.StatusCode, string(b)}
}

// waitProbe asks url until ok holds of the answer (60 s at the most) and
// returns that answer.
func waitProbe(t *testing.T, url string, ok func(probe) bool) probe {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last probe
	for time.Now().Before(deadline) {
		if last = getProbe(url); ok(last) {
			return last
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not a wait for a race
	}
	t.Fatalf("%s: still %d %q after 60s", url, last.status, last.body)
	return last
}

// notReady decodes a 503 of /readyz.
func notReady(t *testing.T, p probe) []string {
	t.Helper()
	var r struct {
		Ready    bool     `json:"ready"`
		NotReady []string `json:"notReady"`
	}
	if err := json.Unmarshal([]byte(p.body), &r); err != nil || r.Ready || len(r.NotReady) == 0 {
		t.Fatalf("readyz %d %q: %v", p.status, p.body, err)
	}
	return r.NotReady
}

// TestHealthAndReadiness: a node whose NATS server does not answer (its
// process stopped with SIGSTOP) is alive but not ready, and answers the
// APIs 503; once the server answers it replays the journal (with history
// from an earlier node) and is ready; when the server shuts down it is not
// ready again, and ready once a server is back on the same store.
func TestHealthAndReadiness(t *testing.T) {
	cc := nodetest.ChildConfig{DataDir: t.TempDir(), NATSListen: nodetest.FreeAddr(t)}
	srv := nodetest.StartServerChild(t, cc)
	url := "nats://" + cc.NATSListen

	// History: an earlier node writes a table the next one replays.
	first := startNode(t, node.Config{NATSURL: url})
	if _, err := first.c.CreateTable(ctxT(t), "History"); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := first.c.Insert(ctxT(t), "History", engine.NewEntity("p", string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	first.stop(t)

	if err := srv.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	httpAddr := nodetest.FreeAddr(t)
	base := "http://" + httpAddr
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan *node.Node, 1)
	go func() {
		done <- node.Run(ctx, node.Config{DataDir: t.TempDir(), NATSURL: url, HTTP: httpAddr, Log: quietLog()}, func(n *node.Node) { ready <- n })
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = srv.Signal(syscall.SIGCONT)
			cancel()
			<-done
		}
	})

	// Alive at once; not ready while the server is frozen.
	h := waitProbe(t, base+node.HealthPath, func(p probe) bool { return p.status != 0 })
	if h.status != http.StatusOK || h.body != "ok\n" {
		t.Fatalf("healthz while starting: %d %q", h.status, h.body)
	}
	p := getProbe(base + node.ReadyPath)
	if p.status != http.StatusServiceUnavailable {
		t.Fatalf("readyz while NATS does not answer: %d %q", p.status, p.body)
	}
	why := strings.Join(notReady(t, p), "; ")
	for _, want := range []string{"node: starting", "views: not started"} {
		if !strings.Contains(why, want) {
			t.Fatalf("readyz reasons %q lack %q", why, want)
		}
	}
	if api := getProbe(base + "/devstoreaccount1/Tables"); api.status != http.StatusServiceUnavailable {
		t.Fatalf("the Tables API while starting: %d %q", api.status, api.body)
	}
	if m := getProbe(base + "/metrics"); m.status != http.StatusServiceUnavailable {
		t.Fatalf("/metrics while starting: %d %q", m.status, m.body)
	}

	// The server answers: the node replays and becomes ready.
	if err := srv.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var n *node.Node
	select {
	case n = <-ready:
	case err := <-done:
		t.Fatalf("node stopped while starting: %v", err)
	case <-time.After(90 * time.Second):
		t.Fatal("node not ready within 90s")
	}
	waitProbe(t, base+node.ReadyPath, func(p probe) bool { return p.status == http.StatusOK && p.body == "{\"ready\":true}\n" })
	if tb, ok := n.Views().Table("History"); !ok || tb.Snapshot().Len() != 20 {
		t.Fatalf("History after the replay: %v", ok)
	}
	if h := getProbe(base + node.HealthPath); h.status != http.StatusOK {
		t.Fatalf("healthz when ready: %d %q", h.status, h.body)
	}
	// Neither endpoint changes anything or takes a body.
	resp, err := http.Post(base+node.ReadyPath, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST readyz: %d", resp.StatusCode)
	}

	// The server shuts down: alive, not ready.
	if err := srv.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = srv.Wait()
	p = waitProbe(t, base+node.ReadyPath, func(p probe) bool { return p.status == http.StatusServiceUnavailable })
	if why := strings.Join(notReady(t, p), "; "); !strings.Contains(why, "nats: ") {
		t.Fatalf("readyz reasons without NATS: %q", why)
	}
	if h := getProbe(base + node.HealthPath); h.status != http.StatusOK {
		t.Fatalf("healthz without NATS: %d %q", h.status, h.body)
	}

	// A server on the same store and address: ready again.
	nodetest.StartServerChild(t, cc)
	waitProbe(t, base+node.ReadyPath, func(p probe) bool { return p.status == http.StatusOK })

	stopped = true
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("node stopped with %v", err)
	}
	if got := getProbe(base + node.HealthPath); got.status != 0 {
		t.Fatalf("healthz after the node stopped: %d", got.status)
	}
}

// TestReservedAccountNames: an account cannot take the name of a path the
// node serves itself, though it is a valid storage account name.
func TestReservedAccountNames(t *testing.T) {
	for _, name := range httpapi.ReservedAccountNames {
		if err := engine.ValidateAccountName(name); err != nil {
			t.Fatalf("%s is not even a valid name: %v", name, err)
		}
		a, err := httpapi.ParseAccount(name + ":" + "c2VjcmV0c2VjcmV0c2VjcmV0")
		if err != nil {
			t.Fatal(err)
		}
		cfg := node.Config{DataDir: t.TempDir(), API: httpapi.Config{Accounts: []httpapi.Account{a}}}
		err = cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Fatalf("account %s: %v", name, err)
		}
	}
	a, _ := httpapi.ParseAccount("healthzz:c2VjcmV0c2VjcmV0c2VjcmV0")
	cfg := node.Config{DataDir: t.TempDir(), API: httpapi.Config{Accounts: []httpapi.Account{a}}}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("healthzz: %v", err)
	}
}

// TestReadyOnceStarted: a node with its embedded server is ready as soon
// as it has started, and /readyz and /healthz need no token while /metrics
// does.
func TestReadyOnceStarted(t *testing.T) {
	th := startHost(t, "")
	base := th.h.HTTPURL()
	if p := getProbe(base + node.ReadyPath); p.status != http.StatusOK || p.body != "{\"ready\":true}\n" {
		t.Fatalf("readyz after start: %d %q", p.status, p.body)
	}
	if p := getProbe(base + node.HealthPath); p.status != http.StatusOK {
		t.Fatalf("healthz: %d %q", p.status, p.body)
	}
	if p := getProbe(base + "/metrics"); p.status != http.StatusUnauthorized {
		t.Fatalf("/metrics without the token: %d", p.status)
	}
	// A further segment is the Tables API's, which wants a signature.
	if p := getProbe(base + node.HealthPath + "/Tables"); p.status != http.StatusForbidden {
		t.Fatalf("/healthz/Tables: %d %q", p.status, p.body)
	}
}
