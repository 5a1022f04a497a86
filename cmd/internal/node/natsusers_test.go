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
	"golang.org/x/crypto/bcrypt"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/functions"
)

// usersFile writes a users file (mode 0600) and returns its path.
func usersFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNATSServiceUser: a node started with a users file lets a service
// user (bcrypt-hashed password) send commands to the development
// account's table it was given, enqueue to its queue with a JetStream
// acknowledgement on its own inbox prefix, and nothing else: another
// table (or another spelling of its table), the table commands without
// manageTables, another account's tables, other queues and functions,
// the JetStream API, the journal, the catalog, and every subscription
// but its own inbox are refused. Another client cannot read its
// replies. A user of another account may send to that account's subjects
// only. The development user still works beside them.
func TestNATSServiceUser(t *testing.T) {
	if engine.DevAccount != httpapi.DevAccountName {
		t.Fatalf("engine.DevAccount %q, the HTTP API's %q", engine.DevAccount, httpapi.DevAccountName)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("billing-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	th := startNode(t, node.Config{NATSUsers: usersFile(t, `{"users":[
		{"user":"billing","password":"`+string(hash)+`","account":"devstoreaccount1","tables":["Invoices"],"queues":["invoices"],"functions":["hello"]},
		{"user":"ops","password":"ops-pw","account":"acme","tables":["*"],"manageTables":true}
	]}`)})
	ctx := ctxT(t)
	for _, table := range []string{"Invoices", "Customers"} {
		if _, err := th.c.CreateTable(ctx, table); err != nil {
			t.Fatal(err)
		}
	}
	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	svc, err := nats.Connect(th.h.ClientURL(), nats.UserInfo("billing", "billing-pw"), nats.CustomInboxPrefix("_INBOX_billing"), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()

	// What it was given.
	c := client.New(svc)
	if _, err := c.Insert(ctx, "Invoices", engine.NewEntity("2026", "1", engine.Property{Name: "Total", Value: engine.Int64(42)})); err != nil {
		t.Fatalf("insert into its table: %v", err)
	}
	if e, _, err := c.Retrieve(ctx, "Invoices", "2026", "1"); err != nil || e == nil {
		t.Fatalf("retrieve from its table: %v %v", e, err)
	}
	js, err := jetstream.New(svc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, functions.QueueSubject("cairn", "invoices"), []byte("hello")); err != nil {
		t.Fatalf("enqueue with a JetStream acknowledgement: %v", err)
	}
	inbox := svc.NewInbox()
	for _, subj := range []string{"cairn.cmd.devstoreaccount1.Invoices", "cairn.fn.hello"} {
		allowed(t, svc, subj, func() error { return svc.PublishRequest(subj, inbox, []byte(`{}`)) })
	}

	// Nothing else.
	stream := tableStream(t, mustJS(t, th.nc), "Invoices").Config.Name
	for _, subj := range []string{
		"cairn.cmd.Customers",
		"cairn.cmd.invoices", // the same table, another spelling: permissions name the file's
		"cairn.cmd.devstoreaccount1.Customers",
		"cairn.cmd.acme.Invoices",
		"cairn.tables",
		"cairn.tables.devstoreaccount1",
		"cairn.queue.other",
		"cairn.fn.other",
		"cairn.j.invoices.1.p",
		"cairn.catalog.invoices",
		"$JS.API.INFO",
		"$JS.API.STREAM.PURGE." + stream,
		"$JS.API.STREAM.DELETE." + stream,
		"$JS.API.CONSUMER.CREATE." + stream,
		"$KV.cairn-functions.probe",
		"$SYS.REQ.SERVER.PING",
	} {
		refused(t, svc, subj, func() error { return svc.PublishRequest(subj, inbox, []byte(`{}`)) })
	}
	for _, subj := range []string{">", "_INBOX.>", "_CAIRN_INBOX.>", "_INBOX_ops.>", "cairn.j.>", "$JS.API.>"} {
		refused(t, svc, subj, func() error { _, err := svc.SubscribeSync(subj); return err })
	}

	// The development user cannot read the service's replies.
	dev, err := nats.Connect(th.h.ClientURL(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	refused(t, dev, "_INBOX_billing.>", func() error { _, err := dev.SubscribeSync("_INBOX_billing.>"); return err })
	if _, _, err := client.New(dev).Retrieve(ctx, "Invoices", "2026", "1"); err != nil {
		t.Fatalf("the development user beside the service users: %v", err)
	}

	// A wrong password is refused.
	if nc, err := nats.Connect(th.h.ClientURL(), nats.UserInfo("billing", "wrong")); err == nil {
		nc.Close()
		t.Fatal("billing with a wrong password connected")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("billing with a wrong password: %v", err)
	}

	// A user of another account: that account's subjects only.
	ops, err := nats.Connect(th.h.ClientURL(), nats.UserInfo("ops", "ops-pw"), nats.CustomInboxPrefix("_INBOX_ops"), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer ops.Close()
	opsInbox := ops.NewInbox()
	for _, subj := range []string{"cairn.cmd.acme.Invoices", "cairn.cmd.acme.Anything", "cairn.tables.acme"} {
		allowed(t, ops, subj, func() error { return ops.PublishRequest(subj, opsInbox, []byte(`{}`)) })
	}
	for _, subj := range []string{"cairn.cmd.Invoices", "cairn.cmd.devstoreaccount1.Invoices", "cairn.tables", "cairn.tables.devstoreaccount1", "cairn.cmd.other.Invoices", "cairn.queue.invoices"} {
		refused(t, ops, subj, func() error { return ops.PublishRequest(subj, opsInbox, []byte(`{}`)) })
	}

	// The attempts changed nothing: the one insert is the table's only record.
	if n := tableStream(t, mustJS(t, th.nc), "Invoices").State.Msgs; n != 1 {
		t.Fatalf("Invoices' journal holds %d records, want 1", n)
	}
}

// mustJS returns a JetStream context on nc.
func mustJS(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestNATSUsersFileRefused: a node given a bad users file, one that others
// may read, or a users file with an external server does not start, and
// says why; the data directory is left unlocked.
func TestNATSUsersFileRefused(t *testing.T) {
	loose := usersFile(t, `{"users":[{"user":"billing","password":"pw","queues":["invoices"]}]}`)
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		cfg  node.Config
		want string
	}{
		{node.Config{NATSUsers: usersFile(t, `{"users":[{"user":"cairn-node","password":"pw","queues":["invoices"]}]}`)}, `user 1 ("cairn-node"): user name "cairn-node" is the node's own`},
		{node.Config{NATSUsers: usersFile(t, `{"users":[{"user":"billing","password":"pw","account":"acme","tables":["Invoices"],"manage":true}]}`)}, `unknown field "manage"`},
		{node.Config{NATSUsers: usersFile(t, `{"users":[{"user":"billing","password":"","queues":["invoices"]}]}`)}, `user 1 ("billing"): password is empty`},
		{node.Config{NATSUsers: usersFile(t, `{"users":[{"user":"billing","password":"pw","account":"Acme","tables":["Invoices"]}]}`)}, `account name "Acme"`},
		{node.Config{NATSUsers: loose}, "chmod 600"},
		{node.Config{NATSUsers: filepath.Join(dir, "missing.json")}, "missing.json"},
		{node.Config{NATSUsers: loose, NATSURL: "nats://127.0.0.1:1"}, "configure the users on that server"},
	} {
		c.cfg.DataDir, c.cfg.HTTP, c.cfg.Log = dir, "off", quietLog()
		ctx, cancel := context.WithCancel(context.Background())
		err := node.Run(ctx, c.cfg, func(*node.Node) { cancel() })
		cancel()
		if err == nil || !strings.Contains(err.Error(), "-nats-users") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.cfg.NATSUsers, err, c.want)
		}
	}
	// The refusals left the data directory to the next node.
	startNode(t, node.Config{DataDir: dir, HTTP: "off"})
}
