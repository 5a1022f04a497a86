package client_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/wire"
)

// natsServer is a plain NATS server (no JetStream: the client needs none)
// that a test can restart on the same port, as a server killed and
// started again by its supervisor.
type natsServer struct {
	t    *testing.T
	opts *server.Options
	s    *server.Server
}

func startNATS(t *testing.T, port int) *natsServer {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	n := &natsServer{t: t, opts: opts, s: s}
	t.Cleanup(func() { n.s.Shutdown(); n.s.WaitForShutdown() })
	return n
}

func (n *natsServer) url() string { return n.s.ClientURL() }

// restart stops the server, closing every connection (a request in
// flight is lost with it), and starts a new one on the same port.
func (n *natsServer) restart() {
	n.t.Helper()
	port := n.s.Addr().(*net.TCPAddr).Port
	n.s.Shutdown()
	n.s.WaitForShutdown()
	*n = *startNATS(n.t, port)
}

// dropFirst answers requests on subject with reply, except the first of
// each body, which it keeps unanswered (as if lost with a server) and
// reports on dropped. seen counts the requests of each body.
type dropFirst struct {
	mu      sync.Mutex
	seen    map[string]int
	dropped chan struct{}
}

func respond(t *testing.T, url, subject string, reply []byte) *dropFirst {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	d := &dropFirst{seen: map[string]int{}, dropped: make(chan struct{}, 1)}
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) {
		d.mu.Lock()
		d.seen[string(m.Data)]++
		first := d.seen[string(m.Data)] == 1
		d.mu.Unlock()
		if first {
			d.dropped <- struct{}{}
			return
		}
		_ = m.Respond(reply)
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *dropFirst) sends() (n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range d.seen {
		n += k
	}
	return n
}

// TestConnectionLostWhileWaiting: a request in flight when the client's
// server goes away is not left to its timeout. Commands with an id and
// reads are sent again once the connection is back; a command without an
// id returns ErrConnectionLost at once. Each call's context ends long
// before the client's one-minute timeout, so a call that waited for it
// fails the test.
func TestConnectionLostWhileWaiting(t *testing.T) {
	ns := startNATS(t, -1)
	nc, err := nats.Connect(ns.url(), nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cl := client.New(nc, client.WithTimeout(time.Minute), client.WithResend(0)) // the loss alone sends again
	ok := wire.EncodeReplyMsgpack(&engine.Reply{Seq: 7})

	cases := []struct {
		name      string
		table     string
		reply     []byte
		call      func(ctx context.Context) error
		wantSends int
		wantLost  bool
	}{
		{
			name: "command with an id", table: "WithID", reply: ok, wantSends: 2,
			call: func(ctx context.Context) error {
				rep, err := cl.Insert(ctx, "WithID", engine.NewEntity("p", "r"), client.WithID("c1"))
				if err == nil && rep.Seq != 7 {
					t.Errorf("reply %+v", rep)
				}
				return err
			},
		},
		{
			name: "command without an id", table: "NoID", reply: ok, wantSends: 1, wantLost: true,
			call: func(ctx context.Context) error {
				_, err := cl.Insert(ctx, "NoID", engine.NewEntity("p", "r"))
				return err
			},
		},
		{
			name: "retrieve", table: "Get", reply: wire.EncodeReplyMsgpack(&engine.Reply{Seq: 7, Entity: engine.NewEntity("p", "r")}), wantSends: 2,
			call: func(ctx context.Context) error {
				e, _, err := cl.Retrieve(ctx, "Get", "p", "r")
				if err == nil && e.RowKey != "r" {
					t.Errorf("entity %+v", e)
				}
				return err
			},
		},
		{
			name: "query", table: "Q", reply: wire.EncodeQueryReply(&wire.QueryReply{}, wire.Msgpack), wantSends: 2,
			call: func(ctx context.Context) error {
				_, err := cl.Query(ctx, "Q")
				return err
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := respond(t, ns.url(), "cairn.cmd."+tc.table, tc.reply)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- tc.call(ctx) }()
			select {
			case <-d.dropped:
			case err := <-done:
				t.Fatalf("returned before its request arrived: %v", err)
			}
			ns.restart()
			err := <-done
			switch {
			case tc.wantLost && !errors.Is(err, client.ErrConnectionLost):
				t.Fatalf("err = %v, want ErrConnectionLost", err)
			case !tc.wantLost && err != nil:
				t.Fatalf("err = %v, want the reply to the request sent again", err)
			}
			if got := d.sends(); got != tc.wantSends {
				t.Errorf("sent %d times, want %d", got, tc.wantSends)
			}
		})
	}
}

// TestResendWhenNoReplyComes: a request lost without the client's
// connection noticing (taken by a host that died) is sent again after the
// resend wait when it is safe to (a command with an id, a read, a page of
// the change feed that does not wait), and not otherwise. Each call's
// context ends long before the client's one-minute timeout.
func TestResendWhenNoReplyComes(t *testing.T) {
	ns := startNATS(t, -1)
	nc, err := nats.Connect(ns.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ok := wire.EncodeReplyMsgpack(&engine.Reply{Seq: 7})
	cases := []struct {
		name, subject string
		reply         []byte
		timeout       time.Duration
		call          func(ctx context.Context, cl *client.Client) error
		wantSends     int
		wantErr       error
	}{
		{
			name: "command with an id", subject: "cairn.cmd.A", reply: ok, timeout: time.Minute, wantSends: 2,
			call: func(ctx context.Context, cl *client.Client) error {
				_, err := cl.Insert(ctx, "A", engine.NewEntity("p", "r"), client.WithID("c1"))
				return err
			},
		},
		{
			name: "retrieve", subject: "cairn.cmd.B", reply: wire.EncodeReplyMsgpack(&engine.Reply{Entity: engine.NewEntity("p", "r")}), timeout: time.Minute, wantSends: 2,
			call: func(ctx context.Context, cl *client.Client) error {
				_, _, err := cl.Retrieve(ctx, "B", "p", "r")
				return err
			},
		},
		{
			name: "change feed page", subject: "cairn.changes.C", reply: wire.EncodeChangesReply(&wire.ChangesReply{}, wire.Msgpack), timeout: time.Minute, wantSends: 2,
			call: func(ctx context.Context, cl *client.Client) error {
				_, err := cl.Changes(ctx, "C", wire.ChangesRequest{From: 1})
				return err
			},
		},
		{
			// Sent once: the client's timeout ends it.
			name: "command without an id", subject: "cairn.cmd.D", reply: ok, timeout: 300 * time.Millisecond, wantSends: 1, wantErr: context.DeadlineExceeded,
			call: func(ctx context.Context, cl *client.Client) error {
				_, err := cl.Insert(ctx, "D", engine.NewEntity("p", "r"))
				return err
			},
		},
		{
			// A long poll waits on purpose: sent once.
			name: "change feed page that waits", subject: "cairn.changes.E", reply: ok, timeout: 300 * time.Millisecond, wantSends: 1, wantErr: context.DeadlineExceeded,
			call: func(ctx context.Context, cl *client.Client) error {
				_, err := cl.Changes(ctx, "E", wire.ChangesRequest{From: 1, Wait: 200 * time.Millisecond})
				return err
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := respond(t, ns.url(), tc.subject, tc.reply)
			cl := client.New(nc, client.WithTimeout(tc.timeout), client.WithAttempts(1), client.WithResend(50*time.Millisecond))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := tc.call(ctx, cl)
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if got := d.sends(); got != tc.wantSends {
				t.Errorf("sent %d times, want %d", got, tc.wantSends)
			}
		})
	}
}
