package node_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/admin"
	"github.com/cairn-dev/cairn/journal"
)

// request is one request a client may send: its subject and body.
type request struct{ subject, body string }

// guardedStream is what an attack on a stream would change: its last
// sequence (an append) and its messages (a purge); gone when deleted.
type guardedStream struct {
	last, msgs uint64
	gone       bool
}

// guardedState returns the state of each of the streams a reply subject
// could reach with the node's rights: the catalog, the tables' journals,
// the functions' registry and modules, the queues.
func guardedState(t *testing.T, js jetstream.JetStream, streams []string) map[string]guardedStream {
	t.Helper()
	out := map[string]guardedStream{}
	for _, name := range streams {
		s, err := js.Stream(ctxT(t), name)
		if err != nil {
			out[name] = guardedStream{gone: true}
			continue
		}
		info, err := s.Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = guardedStream{last: info.State.LastSeq, msgs: info.State.Msgs}
	}
	return out
}

// TestReplySubjectAttacks: clients name, as the reply subject of every
// kind of request the node answers, the JetStream API (deleting the
// catalog or a table's stream, purging another account's), a key-value
// bucket, the object store, a table's journal, the catalog and a queue.
// Neither a client without credentials, nor a service user of another
// account (its answers stay in its own account, where it may do what it
// could do itself and nothing more), nor a client of the node's own
// account makes the node act there: the catalog, the journals, the registry and the queues are
// untouched, every table serves, and the requests of the node's own
// account are dropped unanswered, counted in /metrics. The same requests
// with an inbox are answered.
func TestReplySubjectAttacks(t *testing.T) {
	th := startNode(t, node.Config{NATSUsers: usersFile(t, `{"users":[
		{"user":"globex-svc","password":"globex-pw","account":"globex","tables":["Gone"],"manageTables":true,"queues":["mine"],"functions":["nosuch"]}
	]}`)})
	ctx := ctxT(t)
	keep, err := th.c.CreateTable(ctx, "Keep")
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []struct{ account, table string }{{"acme", "Orders"}, {"globex", "Gone"}} {
		c := client.New(th.nc, client.WithAccount(at.account))
		if _, err := c.CreateTable(ctx, at.table); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Insert(ctx, at.table, engine.NewEntity("p", "1")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := th.c.Insert(ctx, "Keep", engine.NewEntity("p", "1")); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(th.nc)
	if err != nil {
		t.Fatal(err)
	}
	keepStream := journal.StreamName("cairn", "Keep", keep.Epoch)
	ordersStream := tableStream(t, js, "acme.Orders").Config.Name
	goneStream := tableStream(t, js, "globex.Gone").Config.Name
	catalog := journal.CatalogStreamName("cairn")
	streams := []string{catalog, keepStream, ordersStream, goneStream, "KV_CAIRN_FUNCTIONS", "OBJ_CAIRN_MODULES", functions.StreamName("cairn")}
	targets := []string{
		"$JS.API.STREAM.DELETE." + catalog,
		"$JS.API.STREAM.DELETE." + keepStream,
		"$JS.API.STREAM.PURGE." + ordersStream,
		"$JS.API.STREAM.DELETE." + functions.StreamName("cairn"),
		"$KV.CAIRN_FUNCTIONS.x",
		"$O.CAIRN_MODULES.M.eA",
		"cairn.j.keep." + strconv.FormatUint(keep.Epoch, 10) + "." + journal.EncodePartition("p"),
		"cairn.catalog.keep",
	}
	// A queue the service user may not enqueue to; the development client
	// may enqueue to every queue, so an answer it sent to one would be
	// nothing it could not do itself.
	queueTarget := "cairn.queue.victim"

	devRequests := []request{
		{"cairn.cmd.Keep", `{"op":"Retrieve","partitionKey":"p","rowKey":"1"}`},
		{"cairn.cmd.Keep", `{"op":"Merge","entity":{"PartitionKey":"p","RowKey":"none"}}`},
		{"cairn.cmd.Keep", `{"op":"Query","top":1}`},
		{"cairn.cmd.Keep", `{"op":"PutValue","partitionKey":"p","rowKey":"v"}`},
		{"cairn.cmd.Keep", `{"op":"GetValue","partitionKey":"p","rowKey":"1","property":"Photo"}`},
		{"cairn.cmd.Keep", `junk`},
		{"cairn.tables", `{"op":"ListTables"}`},
		{"cairn.tables", `{"op":"CreateTable","table":"Keep"}`},
		{"cairn.tables", `{"op":"DeleteTable","table":"Nope"}`},
		{"cairn.changes.Keep", `{"from":1}`},
		{"cairn.fn.nosuch", ``},
	}
	serviceRequests := []request{
		{"cairn.cmd.globex.Gone", `{"op":"Retrieve","partitionKey":"p","rowKey":"1"}`},
		{"cairn.cmd.globex.Gone", `{"op":"Delete","partitionKey":"p","rowKey":"none"}`},
		{"cairn.cmd.globex.Gone", `{"op":"PutValue","partitionKey":"p","rowKey":"v"}`},
		{"cairn.tables.globex", `{"op":"ListTables"}`},
		{"cairn.changes.globex.Gone", `{"from":1}`},
		{"cairn.fn.nosuch", ``},
	}
	nodeRequests := append(append([]request{}, devRequests...), request{functions.HostStatusSubject("cairn"), ``})

	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	dev, err := nats.Connect(th.h.ClientURL(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	svc, err := nats.Connect(th.h.ClientURL(), quiet, nats.UserInfo("globex-svc", "globex-pw"), nats.CustomInboxPrefix("_INBOX_globex-svc"))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	withQueue := append(append([]string{}, targets...), queueTarget)
	clients := []struct {
		name     string
		nc       *nats.Conn
		requests []request
		targets  []string
	}{
		{"development client", dev, devRequests, targets},
		{"service user of globex", svc, serviceRequests, withQueue},
		{"node user", th.nc, nodeRequests, withQueue},
	}

	// With an inbox, every request is answered.
	for _, c := range clients {
		for _, r := range c.requests {
			if _, err := c.nc.RequestWithContext(ctx, r.subject, []byte(r.body)); err != nil {
				t.Fatalf("%s: %s %s: %v", c.name, r.subject, r.body, err)
			}
		}
	}

	before := guardedState(t, js, streams)
	dropped := scrapeMetrics(t, th)[`cairn_nats_requests_dropped_total{reason="reply_subject"}`]
	for _, c := range clients {
		for _, r := range c.requests {
			for _, reply := range c.targets {
				if err := c.nc.PublishRequest(r.subject, reply, []byte(r.body)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := c.nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// Every request that crossed an import has been answered once the
	// server keeps no way back for one; every one of the node's account
	// has been dropped once the counter says so.
	global := th.h.NATSServer().GlobalAccount()
	eventually(t, 30*time.Second, "the imported requests are answered", func() bool { return global.NumPendingAllResponses() == 0 })
	want := dropped + float64(len(nodeRequests)*len(withQueue))
	eventually(t, 30*time.Second, "the node account's requests are dropped", func() bool {
		return scrapeMetrics(t, th)[`cairn_nats_requests_dropped_total{reason="reply_subject"}`] == want
	})

	after := guardedState(t, js, streams)
	for _, name := range streams {
		if before[name] != after[name] {
			t.Errorf("stream %s: %+v before the attacks, %+v after", name, before[name], after[name])
		}
	}
	for _, c := range clients {
		for _, r := range c.requests {
			if _, err := c.nc.RequestWithContext(ctx, r.subject, []byte(r.body)); err != nil {
				t.Errorf("after the attacks, %s: %s %s: %v", c.name, r.subject, r.body, err)
			}
		}
	}
	if _, _, err := th.c.Retrieve(ctx, "Keep", "p", "1"); err != nil {
		t.Errorf("after the attacks: %v", err)
	}
	resp, err := http.Get(th.h.HTTPURL() + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz after the attacks: %v %v", resp, err)
	}
	resp = operatorDo(t, th.h.OperatorToken(), "GET", th.h.HTTPURL()+admin.Prefix+"functions", nil)
	if resp.Body.Close(); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /$cairn/functions after the attacks: %d", resp.StatusCode)
	}
}

// TestValueSessionReplySubjects: a large value's session answers, like
// every request, only on an inbox: a chunk sent by a client of the node's
// own account with the JetStream API, a bucket, a journal or the catalog
// as its reply is dropped and counted, and does not move the session on;
// one from a development client is answered into its own account, where
// it reaches nothing. Nothing changes in the streams, and the sessions
// go on with an inbox.
func TestValueSessionReplySubjects(t *testing.T) {
	th := startNode(t, node.Config{})
	ctx := ctxT(t)
	keep, err := th.c.CreateTable(ctx, "Staff")
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(th.nc)
	if err != nil {
		t.Fatal(err)
	}
	keepStream := journal.StreamName("cairn", "Staff", keep.Epoch)
	catalog := journal.CatalogStreamName("cairn")
	streams := []string{catalog, keepStream, functions.StreamName("cairn")}
	targets := []string{"$JS.API.STREAM.DELETE." + catalog, "$JS.API.STREAM.PURGE.OBJ_CAIRN_VALUES", "$O.CAIRN_VALUES.M.eA",
		"cairn.j.staff." + strconv.FormatUint(keep.Epoch, 10) + "." + journal.EncodePartition("p"), "cairn.catalog.staff", "cairn.queue.victim"}
	dev, err := nats.Connect(th.h.ClientURL(), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	before := guardedState(t, js, streams)
	dropped := scrapeMetrics(t, th)[`cairn_nats_requests_dropped_total{reason="reply_subject"}`]
	for _, c := range []struct {
		name  string
		nc    *nats.Conn
		drops bool
	}{{"node user", th.nc, true}, {"development client", dev, false}} {
		session := openPut(t, c.nc, c.name)
		for i, reply := range targets {
			m := nats.NewMsg(session)
			m.Reply = reply
			m.Header.Set(wire.ChunkHeader, strconv.Itoa(i))
			m.Data = []byte("a chunk")
			if err := c.nc.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if !c.drops {
			// Each taken in turn, and answered in its own account.
			if r := sessionMsg(t, c.nc, session, len(targets), "end", nil); r.Header.Get(wire.ValueHeader) != "end" {
				t.Fatalf("%s: the session after its chunks: %v %q", c.name, r.Header, r.Data)
			}
			continue
		}
		dropped += float64(len(targets))
		eventually(t, 30*time.Second, "the node account's chunks are dropped", func() bool {
			return scrapeMetrics(t, th)[`cairn_nats_requests_dropped_total{reason="reply_subject"}`] == dropped
		})
		if r := sessionMsg(t, c.nc, session, 0, "end", []byte("a chunk")); r.Header.Get(wire.ValueHeader) != "end" {
			t.Fatalf("%s: the session after the dropped chunks: %v %q", c.name, r.Header, r.Data)
		}
	}
	global := th.h.NATSServer().GlobalAccount()
	eventually(t, 30*time.Second, "the imported requests are answered", func() bool { return global.NumPendingAllResponses() == 0 })
	after := guardedState(t, js, streams)
	for _, name := range streams {
		if before[name].gone || before[name] != after[name] {
			t.Errorf("stream %s: %+v before, %+v after", name, before[name], after[name])
		}
	}
	if n := storedCount(t, valueStore(t, th)); n != 2 {
		t.Errorf("%d values in the store after the attacks; want the 2 uploaded", n)
	}
}

// TestReplyGuardOnASharedAccount: on an external server whose clients
// share the node's account (no imports rewrite their reply subjects), the
// node drops every request whose reply is not an inbox and counts it, and
// the serving user it answers as (derived from the node's credentials) may
// not publish to the JetStream API even if the node tried.
func TestReplyGuardOnASharedAccount(t *testing.T) {
	dir := t.TempDir()
	nodeCreds := natsauth.Creds{User: natsauth.NodeUser, Password: "node-secret"}
	serve := natsauth.ServeCreds(nodeCreds)
	app := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{"cairn.cmd.>", "cairn.tables", "cairn.changes.>", "cairn.fn.*"}},
		Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
	}
	ns, err := journal.StartEmbedded(journal.EmbeddedConfig{
		StoreDir: filepath.Join(dir, "store"),
		Port:     -1,
		NoLog:    true,
		Users: []*server.User{
			{Username: nodeCreds.User, Password: nodeCreds.Password},
			{Username: serve.User, Password: serve.Password, Permissions: natsauth.ServePermissions("cairn")},
			{Username: "app", Password: "app-pw", Permissions: app},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	credsFile := filepath.Join(dir, "node.user")
	if err := os.WriteFile(credsFile, []byte(nodeCreds.User+":"+nodeCreds.Password), 0o600); err != nil {
		t.Fatal(err)
	}
	th := startNode(t, node.Config{NATSURL: ns.ClientURL(), NATSCreds: credsFile})
	ctx := ctxT(t)
	keep, err := th.c.CreateTable(ctx, "Keep")
	if err != nil {
		t.Fatal(err)
	}
	keepStream := journal.StreamName("cairn", "Keep", keep.Epoch)
	catalog := journal.CatalogStreamName("cairn")

	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	nc, err := nats.Connect(ns.ClientURL(), quiet, nats.UserInfo("app", "app-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	requests := []request{
		{"cairn.cmd.Keep", `{"op":"Retrieve","partitionKey":"p","rowKey":"1"}`},
		{"cairn.tables", `{"op":"ListTables"}`},
		{"cairn.changes.Keep", `{"from":1}`},
		{"cairn.fn.nosuch", ``},
	}
	for _, r := range requests {
		if _, err := nc.RequestWithContext(ctx, r.subject, []byte(r.body)); err != nil {
			t.Fatalf("%s with an inbox: %v", r.subject, err)
		}
	}
	targets := []string{"$JS.API.STREAM.DELETE." + catalog, "$JS.API.STREAM.DELETE." + keepStream, "$KV.CAIRN_FUNCTIONS.x",
		"cairn.j.keep." + strconv.FormatUint(keep.Epoch, 10) + "." + journal.EncodePartition("p"), "_INBOX", "_INBOX.*", "_R_"}
	js, err := jetstream.New(th.nc)
	if err != nil {
		t.Fatal(err)
	}
	streams := []string{catalog, keepStream, "KV_CAIRN_FUNCTIONS"}
	before := guardedState(t, js, streams)
	for _, r := range requests {
		for _, reply := range targets {
			if err := nc.PublishRequest(r.subject, reply, []byte(r.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	want := float64(len(requests) * len(targets))
	eventually(t, 30*time.Second, "the requests are dropped", func() bool {
		return scrapeMetrics(t, th)[`cairn_nats_requests_dropped_total{reason="reply_subject"}`] == want
	})
	after := guardedState(t, js, streams)
	for _, name := range streams {
		if before[name] != after[name] {
			t.Errorf("stream %s: %+v before the attacks, %+v after", name, before[name], after[name])
		}
	}

	// The serving user itself cannot reach JetStream.
	sc, err := nats.Connect(ns.ClientURL(), quiet, nats.UserInfo(serve.User, serve.Password))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for _, subj := range []string{"$JS.API.STREAM.DELETE." + catalog, "$KV.CAIRN_FUNCTIONS.x", "cairn.catalog.keep", "cairn.queue.victim"} {
		refused(t, sc, subj, func() error { return sc.Publish(subj, []byte(`{}`)) })
	}
	allowed(t, sc, "_INBOX.x", func() error { return sc.Publish("_INBOX.x", nil) })
	if got := guardedState(t, js, streams); got[catalog] != before[catalog] {
		t.Fatalf("catalog after the serving user's attempts: %+v", got[catalog])
	}
}

// TestNodeAccountKeepsTheStore: a data directory whose embedded server
// had no accounts (every stream in the global account, as before the
// clients had accounts of their own) is served as it was: the node
// account is the global account, with JetStream on.
func TestNodeAccountKeepsTheStore(t *testing.T) {
	dir := t.TempDir()
	creds, _, _, _, err := natsauth.LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := journal.StartEmbedded(journal.EmbeddedConfig{StoreDir: filepath.Join(dir, "jetstream"), Port: -1, NoLog: true,
		Users: []*server.User{{Username: creds.User, Password: creds.Password}}})
	if err != nil {
		t.Fatal(err)
	}
	old, err := nats.Connect(ns.ClientURL(), creds.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(old)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EARLIER", Subjects: []string{"earlier.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "earlier.one", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	old.Close()
	ns.Shutdown()
	ns.WaitForShutdown()

	th := startNode(t, node.Config{DataDir: dir})
	js, err = jetstream.New(th.nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "EARLIER")
	if err != nil {
		t.Fatalf("the stream of the earlier server: %v", err)
	}
	m, err := s.GetMsg(ctx, 1)
	if err != nil || string(m.Data) != "kept" {
		t.Fatalf("its message: %v %v", m, err)
	}
	if _, err := th.c.CreateTable(ctx, "After"); err != nil {
		t.Fatal(err)
	}
}
