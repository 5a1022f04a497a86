package node_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/journal"
)

// writeCreds writes a credentials file, "user:password", mode 0600.
func writeCreds(t *testing.T, c natsauth.Creds) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), c.User)
	if err := os.WriteFile(path, []byte(c.User+":"+c.Password), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestExternalServerConfiguration runs a node on a NATS server configured
// with docs/nats-server.conf, as docs/PROTOCOL.md says: the node connects
// as cairn-node and answers as cairn-serve; a client without credentials
// and the service user billing do what the file gives them; a reply
// subject on the JetStream API deletes nothing.
func TestExternalServerConfiguration(t *testing.T) {
	pw := map[string]string{"CAIRN_NODE_PASSWORD": "node-pw", "CAIRN_SERVE_PASSWORD": "serve-pw", "BILLING_PASSWORD": "billing-pw",
		"ACME_PASSWORD": "acme-pw", "CAIRN_DEV_PASSWORD": "dev-pw"}
	for k, v := range pw {
		t.Setenv(k, v)
	}
	opts, err := server.ProcessConfigFile(filepath.Join("..", "..", "..", "docs", "nats-server.conf"))
	if err != nil {
		t.Fatal(err)
	}
	opts.Host, opts.Port, opts.StoreDir, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, t.TempDir(), true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("the server did not start")
	}
	t.Cleanup(ns.Shutdown)
	th := startNode(t, node.Config{NATSURL: ns.ClientURL(),
		NATSCreds:      writeCreds(t, natsauth.Creds{User: natsauth.NodeUser, Password: pw["CAIRN_NODE_PASSWORD"]}),
		NATSServeCreds: writeCreds(t, natsauth.Creds{User: natsauth.ServeUser, Password: pw["CAIRN_SERVE_PASSWORD"]})})
	ctx := ctxT(t)

	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	dev, err := nats.Connect(ns.ClientURL(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	dc := client.New(dev)
	for _, table := range []string{"Invoices", "Customers"} {
		if _, err := dc.CreateTable(ctx, table); err != nil {
			t.Fatalf("a client without credentials creates %s: %v", table, err)
		}
	}
	if _, err := dc.Insert(ctx, "Customers", engine.NewEntity("p", "1")); err != nil {
		t.Fatal(err)
	}
	if _, err := mustJS(t, dev).Publish(ctx, functions.QueueSubject("cairn", "probe"), []byte("x")); err != nil {
		t.Fatalf("a client without credentials enqueues: %v", err)
	}
	if r, err := dev.RequestWithContext(ctx, functions.DirectSubject("cairn", "nothing"), nil); err != nil || !strings.Contains(r.Header.Get(functions.HeaderReplyError), "not deployed") {
		t.Fatalf("direct call: %v %v", err, r)
	}

	svc, err := nats.Connect(ns.ClientURL(), quiet, nats.UserInfo("billing", pw["BILLING_PASSWORD"]), nats.CustomInboxPrefix("_INBOX_billing"))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	sc := client.New(svc)
	if _, err := sc.Insert(ctx, "Invoices", engine.NewEntity("2026", "1")); err != nil {
		t.Fatalf("the service user inserts into its table: %v", err)
	}
	if _, _, err := sc.Retrieve(ctx, "Customers", "p", "1"); err != nil {
		t.Fatalf("the service user reads its table: %v", err)
	}
	if _, err := mustJS(t, svc).Publish(ctx, functions.QueueSubject("cairn", "invoices"), []byte("x")); err != nil {
		t.Fatalf("the service user enqueues: %v", err)
	}
	refused(t, svc, "cairn.cmd.acme.Orders", func() error { return svc.Publish("cairn.cmd.acme.Orders", nil) })

	js := mustJS(t, th.nc)
	catalog := journal.CatalogStreamName("cairn")
	invoices := tableStream(t, js, "Invoices").Config.Name
	streams := []string{catalog, invoices}
	before := guardedState(t, js, streams)
	for _, c := range []*nats.Conn{dev, svc} {
		for _, reply := range []string{"$JS.API.STREAM.DELETE." + catalog, "$JS.API.STREAM.DELETE." + invoices} {
			if err := c.PublishRequest("cairn.cmd.Invoices", reply, []byte(`{"op":"Retrieve","partitionKey":"2026","rowKey":"1"}`)); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	cairnAcc, err := ns.LookupAccount("CAIRN")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the imported requests are answered", func() bool { return cairnAcc.NumPendingAllResponses() == 0 })
	if after := guardedState(t, js, streams); after[catalog] != before[catalog] || after[invoices] != before[invoices] {
		t.Fatalf("streams %+v before the attacks, %+v after", before, after)
	}
	if _, _, err := sc.Retrieve(ctx, "Invoices", "2026", "1"); err != nil {
		t.Fatalf("after the attacks: %v", err)
	}
}
