package functions_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/host"
	"github.com/cairn-dev/cairn/engine/host/hosttest"
	"github.com/cairn-dev/cairn/functions"
)

// TestMain lets the test binary double as a host process, which the crash
// tests start as a child and kill.
func TestMain(m *testing.M) {
	if os.Getenv("CAIRN_CHILD") != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		err := host.Run(ctx, host.Config{
			DataDir:    os.Getenv("CAIRN_DATA"),
			NATSListen: os.Getenv("CAIRN_NATS_LISTEN"),
			NATSURL:    os.Getenv("CAIRN_NATS_URL"),
			HTTP:       "off",
			Functions:  host.FunctionsConfig{Failpoint: os.Getenv("CAIRN_FAILPOINT")},
			Log:        slog.New(slog.NewTextHandler(os.Stderr, nil)),
		}, func(*host.Host) { fmt.Println("READY") })
		if err != nil {
			fmt.Fprintln(os.Stderr, "child host:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// testHost is a host started in the test's process.
type testHost struct {
	h    *host.Host
	nc   *nats.Conn
	c    *client.Client
	stop func()
}

// startHost starts a host with an embedded server in dir, or, with natsURL,
// one connected to another host's server.
func startHost(t testing.TB, dir, natsURL string) *testHost {
	t.Helper()
	h, stop := hosttest.Start(t, host.Config{DataDir: dir, NATSURL: natsURL})
	nc, err := nats.Connect(h.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	th := &testHost{h: h, nc: nc, c: client.New(nc)}
	th.stop = func() { nc.Close(); stop() }
	t.Cleanup(th.stop)
	return th
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustTable(t testing.TB, c *client.Client, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := c.CreateTable(ctxT(t), n); err != nil {
			t.Fatal(err)
		}
	}
}

func employee(dept, id, name string) *engine.Entity {
	return engine.NewEntity(dept, id, engine.Property{Name: "Name", Value: engine.String(name)})
}

// exists reports whether an entity is in a table.
func exists(t testing.TB, c *client.Client, table, pk, rk string) bool {
	t.Helper()
	_, _, err := c.Retrieve(ctxT(t), table, pk, rk)
	if engine.ErrorCode(err) == engine.CodeResourceNotFound {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func archiveMsg(dept, id string) []byte {
	return fmt.Appendf(nil, `{"from":"Current","to":"Archive","partitionKey":%q,"rowKey":%q}`, dept, id)
}

func fast(m functions.Manifest) functions.Manifest {
	m.BackoffMin = functions.Duration(30 * time.Millisecond)
	m.BackoffMax = functions.Duration(200 * time.Millisecond)
	return m
}

var _ = strings.Contains
