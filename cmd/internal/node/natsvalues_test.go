package node_test

import (
	"bytes"
	"crypto/rand"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/journal/values"
)

// randomBytes returns n random bytes.
func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// downloadNATS reads a value whole over NATS.
func downloadNATS(t *testing.T, c *client.Client, table, pk, rk, prop string) ([]byte, client.ValueInfo, error) {
	t.Helper()
	rc, info, err := c.OpenValue(ctxT(t), table, pk, rk, prop)
	if err != nil {
		return nil, info, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return b, info, err
}

// storedCount is how many values the store holds.
func storedCount(t *testing.T, s *values.Store) int {
	t.Helper()
	list, err := s.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// TestValuesOverNATS: a value goes up and comes down over NATS as over
// HTTP, in chunks on one node's session, whatever its size (none, a
// chunk's multiple, several MiB); the doors read each other's values; a
// development client reaches the development account's tables only, and
// a service user its own tables only; every refusal is coded and stores
// nothing.
func TestValuesOverNATS(t *testing.T) {
	th := startNode(t, node.Config{NATSUsers: usersFile(t, `{"users":[
		{"user":"billing","password":"billing-pw","account":"devstoreaccount1","tables":["Invoices"]},
		{"user":"ops","password":"ops-pw","account":"acme","tables":["*"],"manageTables":true}
	]}`)})
	ctx := ctxT(t)
	mustTable(t, th.c, "Staff", "Invoices")
	store := valueStore(t, th)
	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	dev, err := nats.Connect(th.h.ClientURL(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	c := client.New(dev, client.WithTimeout(20*time.Second))

	for _, size := range []int{0, 1, 256 << 10, 512 << 10, 3<<20 + 17} {
		body := randomBytes(t, size)
		rk := strconv.Itoa(size)
		up, err := c.PutValue(ctx, "Staff", "Sales", rk, bytes.NewReader(body))
		if err != nil {
			t.Fatalf("put %d bytes: %v", size, err)
		}
		if !strings.HasPrefix(up.Reference, engine.ValueRefPrefix) || up.Size != uint64(size) || time.Since(up.Uploaded) > time.Minute {
			t.Fatalf("put %d bytes: %+v", size, up)
		}
		if _, err := c.Insert(ctx, "Staff", withRef("Sales", rk, "Photo", up.Reference)); err != nil {
			t.Fatal(err)
		}
		got, info, err := downloadNATS(t, c, "Staff", "Sales", rk, "Photo")
		if err != nil || !bytes.Equal(got, body) || info.Size != uint64(size) || info.Reference != up.Reference {
			t.Fatalf("get %d bytes: %d bytes back, %+v, %v", size, len(got), info, err)
		}
		resp, b := signedValue(t, th, http.MethodGet, "Staff", "Sales", rk, "Photo", nil)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(b, body) {
			t.Fatalf("a value put over NATS, read over HTTP: %s, %d bytes", resp.Status, len(b))
		}
	}
	// A value put over HTTP, read over NATS; an early Close tells the
	// node, and the session's slot is free again.
	ref := uploadValue(t, th, "Staff", "Sales", "http", bytes.Repeat([]byte("x"), 2<<20))
	if _, err := c.Insert(ctx, "Staff", withRef("Sales", "http", "Photo", ref)); err != nil {
		t.Fatal(err)
	}
	if got, _, err := downloadNATS(t, c, "Staff", "Sales", "http", "Photo"); err != nil || len(got) != 2<<20 {
		t.Fatalf("a value put over HTTP, read over NATS: %d bytes, %v", len(got), err)
	}
	rc, _, err := c.OpenValue(ctx, "Staff", "Sales", "http", "Photo")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}

	// Refusals: coded, and nothing stored.
	before := storedCount(t, store)
	if _, err := c.Insert(ctx, "Staff", engine.NewEntity("Sales", "plain", engine.Property{Name: "Photo", Value: engine.String("a photo")})); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		name string
		do   func() error
		code engine.Code
	}{
		{"put into no table", func() error {
			_, err := c.PutValue(ctx, "Nothing", "Sales", "1", strings.NewReader("x"))
			return err
		}, engine.CodeTableNotFound},
		{"put with a bad key", func() error {
			_, err := c.PutValue(ctx, "Staff", "Sa/les", "1", strings.NewReader("x"))
			return err
		}, engine.CodeOutOfRangeInput},
		{"get of no entity", func() error {
			_, _, err := c.OpenValue(ctx, "Staff", "Sales", "none", "Photo")
			return err
		}, engine.CodeResourceNotFound},
		{"get of no property", func() error {
			_, _, err := c.OpenValue(ctx, "Staff", "Sales", "http", "Nothing")
			return err
		}, engine.CodeInvalidInput},
		{"get of a property holding no reference", func() error {
			_, _, err := c.OpenValue(ctx, "Staff", "Sales", "plain", "Photo")
			return err
		}, engine.CodeInvalidInput},
	} {
		if err := r.do(); engine.ErrorCode(err) != r.code {
			t.Errorf("%s: %v, want %s", r.name, err, r.code)
		}
	}
	if n := storedCount(t, store); n != before {
		t.Fatalf("refusals stored values: %d, then %d", before, n)
	}

	// A service user: its table, not another, and never another table's
	// session.
	billing, err := nats.Connect(th.h.ClientURL(), nats.UserInfo("billing", "billing-pw"), nats.CustomInboxPrefix("_INBOX_billing"), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer billing.Close()
	bc := client.New(billing, client.WithTimeout(2*time.Second))
	if _, err := bc.PutValue(ctx, "Invoices", "2026", "1", strings.NewReader("a scan")); err != nil {
		t.Fatalf("a service user's value of its table: %v", err)
	}
	if _, err := bc.PutValue(ctx, "Staff", "Sales", "1", strings.NewReader("x")); err == nil {
		t.Fatal("a service user put a value into a table it was not given")
	}
	body, _ := wire.EncodeValueRequest(&wire.ValueRequest{Op: wire.PutValueOp, PartitionKey: "Sales", RowKey: "s"}, wire.JSON)
	m, err := dev.Request("cairn.cmd.Staff", body, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	open, err := wire.DecodeValueReply(m.Data, wire.JSON)
	if err != nil || open.Error != nil || !strings.HasPrefix(open.Session, "cairn.cmd.devstoreaccount1.Staff.") || open.Chunk != 256<<10 {
		t.Fatalf("a session opened in JSON: %+v %v", open, err)
	}
	if _, err := billing.Request(open.Session, []byte("not yours"), time.Second); err == nil {
		t.Fatal("a service user wrote into another table's session")
	}
	// The development user: not another account's tables.
	acme := client.New(dev, client.WithAccount("acme"), client.WithTimeout(time.Second))
	if _, err := acme.PutValue(ctx, "Orders", "p", "r", strings.NewReader("x")); err == nil {
		t.Fatal("the development user put a value into another account's table")
	}
	ops, err := nats.Connect(th.h.ClientURL(), nats.UserInfo("ops", "ops-pw"), nats.CustomInboxPrefix("_INBOX_ops"), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer ops.Close()
	oc := client.New(ops, client.WithAccount("acme"))
	if _, err := oc.CreateTable(ctx, "Orders"); err != nil {
		t.Fatal(err)
	}
	up, err := oc.PutValue(ctx, "Orders", "p", "r", strings.NewReader("an invoice"))
	if err != nil {
		t.Fatalf("a service user of another account: %v", err)
	}
	if _, err := oc.Insert(ctx, "Orders", withRef("p", "r", "Doc", up.Reference)); err != nil {
		t.Fatal(err)
	}
	if got, _, err := downloadNATS(t, oc, "Orders", "p", "r", "Doc"); err != nil || string(got) != "an invoice" {
		t.Fatalf("its value back: %q %v", got, err)
	}
}

// sessionMsg sends message n of a value session by hand and returns the
// node's reply.
func sessionMsg(t *testing.T, nc *nats.Conn, subject string, n int, mark string, data []byte) *nats.Msg {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Header.Set(wire.ChunkHeader, strconv.Itoa(n))
	if mark != "" {
		m.Header.Set(wire.ValueHeader, mark)
	}
	m.Data = data
	r, err := nc.RequestMsg(m, 5*time.Second)
	if err != nil {
		t.Fatalf("message %d: %v", n, err)
	}
	return r
}

// openPut opens an upload session by hand and returns its subject.
func openPut(t *testing.T, nc *nats.Conn, rk string) string {
	t.Helper()
	body, _ := wire.EncodeValueRequest(&wire.ValueRequest{Op: wire.PutValueOp, PartitionKey: "Sales", RowKey: rk}, wire.JSON)
	m, err := nc.Request("cairn.cmd.Staff", body, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := wire.DecodeValueReply(m.Data, wire.JSON)
	if err != nil || rep.Error != nil {
		t.Fatalf("open: %+v %v", rep, err)
	}
	return rep.Session
}

// replyError is the coded error of a session's reply marked "error".
func replyError(t *testing.T, m *nats.Msg) *engine.Error {
	t.Helper()
	if m.Header.Get(wire.ValueHeader) != "error" {
		t.Fatalf("reply %q, %q: not an error", m.Header.Get(wire.ValueHeader), m.Data)
	}
	rep, err := wire.DecodeValueReply(m.Data, wire.JSON)
	if err != nil || rep.Error == nil {
		t.Fatalf("error reply %q: %v", m.Data, err)
	}
	return rep.Error
}

// TestValueSessionRefusals: a session taken by hand, as a client of
// another language would: a chunk out of order, one too large, a value
// past the node's limit, an abort and a session left idle each end the
// session, store nothing and free its slot; past the cap of sessions a
// new one is ServerBusy.
func TestValueSessionRefusals(t *testing.T) {
	cfg := node.Config{ValueSessions: 2, ValueIdle: 500 * time.Millisecond}
	cfg.API.MaxValue = 600 << 10
	th := startNode(t, cfg)
	mustTable(t, th.c, "Staff")
	store := valueStore(t, th)
	nc, err := nats.Connect(th.h.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	chunk := bytes.Repeat([]byte("v"), 256<<10)
	gone := func(subject string) {
		t.Helper()
		m := nats.NewMsg(subject)
		m.Header.Set(wire.ChunkHeader, "0")
		if _, err := nc.RequestMsg(m, 5*time.Second); err != nats.ErrNoResponders {
			t.Fatalf("the session answers after its end: %v", err)
		}
	}

	s := openPut(t, nc, "order")
	if m := sessionMsg(t, nc, s, 0, "", chunk); m.Header.Get(wire.ValueHeader) != "" || m.Header.Get(wire.ChunkHeader) != "0" {
		t.Fatalf("chunk 0: %v %q", m.Header, m.Data)
	}
	if e := replyError(t, sessionMsg(t, nc, s, 2, "", chunk)); e.Code != engine.CodeInvalidInput || !strings.Contains(e.Message, "chunk 2 came where 1 was due") {
		t.Fatalf("a chunk out of order: %v", e)
	}
	gone(s)

	s = openPut(t, nc, "big-chunk")
	if e := replyError(t, sessionMsg(t, nc, s, 0, "", append(chunk, 'x'))); e.Code != engine.CodeRequestBodyTooLarge {
		t.Fatalf("a chunk too large: %v", e)
	}
	gone(s)

	s = openPut(t, nc, "too-large")
	sessionMsg(t, nc, s, 0, "", chunk)
	sessionMsg(t, nc, s, 1, "", chunk)
	if e := replyError(t, sessionMsg(t, nc, s, 2, "end", chunk)); e.Code != engine.CodeRequestBodyTooLarge {
		t.Fatalf("a value past the limit: %v", e)
	}
	gone(s)

	s = openPut(t, nc, "aborted")
	sessionMsg(t, nc, s, 0, "", chunk)
	if m := sessionMsg(t, nc, s, 1, "abort", nil); m.Header.Get(wire.ValueHeader) != "end" {
		t.Fatalf("abort: %v", m.Header)
	}
	gone(s)

	s = openPut(t, nc, "no-number")
	m := nats.NewMsg(s)
	m.Data = []byte("no header")
	r, err := nc.RequestMsg(m, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if e := replyError(t, r); e.Code != engine.CodeInvalidInput || !strings.Contains(e.Message, wire.ChunkHeader) {
		t.Fatalf("a message without its number: %v", e)
	}
	gone(s)

	// The cap: two sessions open, a third is ServerBusy; once one idles
	// out, a new one opens.
	a, b := openPut(t, nc, "a"), openPut(t, nc, "b")
	body, _ := wire.EncodeValueRequest(&wire.ValueRequest{Op: wire.PutValueOp, PartitionKey: "Sales", RowKey: "c"}, wire.JSON)
	busy := func() bool {
		t.Helper()
		r, err := nc.Request("cairn.cmd.Staff", body, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := wire.DecodeValueReply(r.Data, wire.JSON)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Error != nil && rep.Error.Code != engine.CodeServerBusy {
			t.Fatalf("a session past the cap: %v", rep.Error)
		}
		return rep.Error != nil
	}
	if !busy() {
		t.Fatal("a third session opened past a cap of 2")
	}
	// Left alone, both end after ValueIdle, a first: a new one opens in
	// a's slot, then another in b's (b, opened before the first new one,
	// idles out before it).
	for opened, deadline := 0, time.Now().Add(20*time.Second); opened < 2; {
		if !busy() {
			opened++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle sessions still hold their slots")
		}
		time.Sleep(50 * time.Millisecond)
	}
	gone(a)
	gone(b)
	if n := storedCount(t, store); n != 0 {
		t.Fatalf("%d values stored by sessions that never ended well", n)
	}
}
