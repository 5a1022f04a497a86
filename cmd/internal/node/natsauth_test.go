package node_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/journal"
)

// refused sends what send sends on nc and checks that the server refused
// it: a permissions violation naming subject. The server reports it before
// the reply to the flush, so it is known once Flush returns.
func refused(t *testing.T, nc *nats.Conn, subject string, send func() error) {
	t.Helper()
	if err := send(); err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("%s: flush: %v", subject, err)
	}
	err := nc.LastError()
	if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), `"`+subject+`"`) {
		t.Fatalf("%s was not refused (last error: %v)", subject, err)
	}
}

// allowed sends what send sends on nc and checks that the server did not
// refuse it: no new error once Flush returns (each refusal is a new error
// value, so one from an earlier attempt does not count).
func allowed(t *testing.T, nc *nats.Conn, subject string, send func() error) {
	t.Helper()
	before := nc.LastError()
	if err := send(); err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("%s: flush: %v", subject, err)
	}
	if err := nc.LastError(); err != before {
		t.Fatalf("%s was refused: %v", subject, err)
	}
}

// TestNATSDevelopmentUser: a client without credentials runs the
// documented development commands (create a table, insert, retrieve,
// enqueue with a JetStream acknowledgement, call a function) and nothing
// else: another account's tables, forged journal and catalog records, the JetStream API, the
// key-value and object stores, the system account and subscriptions
// beyond its replies are refused. Afterwards the node still serves and no
// table was changed.
func TestNATSDevelopmentUser(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	dev, err := nats.Connect(th.h.ClientURL(), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	c := client.New(dev)
	if _, err := c.CreateTable(ctx, "Guarded"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Insert(ctx, "Guarded", engine.NewEntity("p", "1", engine.Property{Name: "N", Value: engine.Int64(1)})); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Retrieve(ctx, "Guarded", "p", "1"); err != nil {
		t.Fatal(err)
	}
	devJS, err := jetstream.New(dev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := devJS.Publish(ctx, functions.QueueSubject("cairn", "probe"), []byte("hello")); err != nil {
		t.Fatalf("enqueue with a JetStream acknowledgement: %v", err)
	}
	r, err := dev.RequestWithContext(ctx, functions.DirectSubject("cairn", "nothing"), nil)
	if err != nil || !strings.Contains(r.Header.Get(functions.HeaderReplyError), "not deployed") {
		t.Fatalf("direct call: %v %v", err, r)
	}

	js, err := jetstream.New(th.nc) // the node user's
	if err != nil {
		t.Fatal(err)
	}
	info := tableStream(t, js, "Guarded")
	stream := info.Config.Name
	before := info.State.Msgs
	catalog := journal.CatalogStreamName("cairn")
	inbox := dev.NewInbox()
	pub := func(subj string) {
		refused(t, dev, subj, func() error { return dev.PublishRequest(subj, inbox, []byte(`{}`)) })
	}
	// The development account's subjects with the account named are its
	// own (no front door serves them yet: the publish alone is checked).
	for _, subj := range []string{"cairn.cmd.devstoreaccount1.Guarded", "cairn.tables.devstoreaccount1"} {
		allowed(t, dev, subj, func() error { return dev.PublishRequest(subj, inbox, []byte(`{}`)) })
	}
	for _, subj := range []string{
		"cairn.cmd.acme.Guarded", // another account's table
		"cairn.tables.acme",      // another account's table commands
		"cairn.j.guarded.1.p",
		"cairn.catalog.guarded",
		"$JS.API.INFO",
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.STREAM.PURGE." + stream,
		"$JS.API.STREAM.DELETE." + stream,
		"$JS.API.STREAM.DELETE." + catalog,
		"$JS.API.CONSUMER.CREATE." + stream,
		"$JS.API.CONSUMER.DURABLE.CREATE." + stream + ".spy",
		"$JS.ACK." + stream + ".spy.1.1.1.1.0",
		"$KV.cairn-functions.probe",
		"$O.cairn-modules.C.probe",
		"$SYS.REQ.SERVER.PING",
		functions.LoadReportSubject("cairn", "probe"), // a forged load report
		functions.HostStatusSubject("cairn"),          // asking the hosts what they run
	} {
		pub(subj)
	}
	for _, subj := range []string{">", "cairn.j.>", "cairn.catalog.>", "$JS.API.>", "_CAIRN_INBOX.>", functions.LoadReportSubject("cairn", "probe")} {
		refused(t, dev, subj, func() error { _, err := dev.SubscribeSync(subj); return err })
	}

	// The node serves on, and no table changed.
	if _, _, err := c.Retrieve(ctx, "Guarded", "p", "1"); err != nil {
		t.Fatalf("after the attempts: %v", err)
	}
	if after := tableStream(t, js, "Guarded").State.Msgs; after != before {
		t.Fatalf("Guarded's journal went from %d to %d records", before, after)
	}
	if _, err := js.Stream(ctx, catalog); err != nil {
		t.Fatalf("catalog stream: %v", err)
	}
	tables, err := c.ListTables(ctx)
	if err != nil || len(tables) != 1 {
		t.Fatalf("tables after the attempts: %v %v", tables, err)
	}
}

// TestNATSNodeUser: the node user may do everything the development user
// may not; wrong credentials are refused.
func TestNATSNodeUser(t *testing.T) {
	th := startHost(t, "")
	nc := th.nc
	if _, err := nc.SubscribeSync(">"); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.SubscribeSync("$JS.API.>"); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := nc.LastError(); err != nil {
		t.Fatalf("node user: %v", err)
	}
	js, _ := jetstream.New(nc)
	if _, err := js.AccountInfo(ctxT(t)); err != nil {
		t.Fatalf("node user, JetStream API: %v", err)
	}
	for _, u := range [][2]string{{natsauth.NodeUser, "wrong"}, {natsauth.DevUser, "wrong"}, {"nobody", "x"}} {
		if nc, err := nats.Connect(th.h.ClientURL(), nats.UserInfo(u[0], u[1])); err == nil {
			nc.Close()
			t.Fatalf("%s with a wrong password connected", u[0])
		} else if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("%s with a wrong password: %v, want an authorization violation", u[0], err)
		}
	}
}

// TestNATSNoDevelopmentAccount: with the development account off, a
// connection without credentials is refused; the node user's is not.
func TestNATSNoDevelopmentAccount(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{HTTP: "off", API: httpapi.Config{NoDevAccount: true}})
	if nc, err := nats.Connect(h.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("connected without credentials")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("without credentials: %v, want an authorization violation", err)
	}
	nc := nodetest.Connect(t, h)
	if _, err := client.New(nc).CreateTable(ctxT(t), "Private"); err != nil {
		t.Fatal(err)
	}
}

// TestNATSCredentialsFile: the node credentials are made on first start,
// 0600 in a 0700 directory, and kept across restarts.
func TestNATSCredentialsFile(t *testing.T) {
	dir := t.TempDir()
	th := startHost(t, dir)
	path := th.h.NATSCredsFile()
	if path != filepath.Join(dir, "nats", "node.user") {
		t.Fatalf("credentials file %s", path)
	}
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode().Perm(), want)
		}
	}
	th.stop(t)
	th = startHost(t, dir) // connects with the file's credentials
	again, err := os.ReadFile(th.h.NATSCredsFile())
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(first) {
		t.Fatal("the credentials changed on restart")
	}
}

// TestNATSJoinNeedsCredentials: a node that joins another node's server
// without its credentials (as the development user) stops at once saying
// what it needs, instead of waiting for JetStream replies; with them it
// serves (TestTwoHosts).
func TestNATSJoinNeedsCredentials(t *testing.T) {
	a := startHost(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := node.Run(ctx, node.Config{DataDir: t.TempDir(), NATSURL: a.h.ClientURL(), HTTP: "off", Log: quietLog()}, func(*node.Node) { cancel() })
	if err == nil || !strings.Contains(err.Error(), "-nats-creds") || !errors.Is(err, nats.ErrPermissionViolation) {
		t.Fatalf("joined without credentials: %v", err)
	}
	wrong := filepath.Join(t.TempDir(), "node.user")
	if err := os.WriteFile(wrong, []byte(natsauth.NodeUser+":wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = node.Run(ctx, node.Config{DataDir: t.TempDir(), NATSURL: a.h.ClientURL(), NATSCreds: wrong, HTTP: "off", Log: quietLog()}, func(*node.Node) { cancel() })
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("joined with a wrong password: %v", err)
	}
}
