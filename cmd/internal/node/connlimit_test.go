package node

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// fakeConn is a connection from a given remote address that records its
// closing.
type fakeConn struct {
	net.Conn
	remote net.Addr
	closed atomic.Bool
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.remote }
func (c *fakeConn) Close() error         { c.closed.Store(true); return nil }

// answerTimeout bounds the waits of these tests for an answer: no
// timing claim, only a bound on a test that would otherwise hang.
const answerTimeout = 5 * time.Second

// limitFixture drives a connLimit's admissions and states the way its
// Accept and an http.Server do, without a network.
type limitFixture struct {
	t *testing.T
	l *connLimit
}

func newLimitFixture(t *testing.T, max int) *limitFixture {
	return &limitFixture{t: t, l: newConnLimit(nil, max, slog.New(slog.DiscardHandler))}
}

func fakeFrom(ip string) *fakeConn {
	return &fakeConn{remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}}
}

// open admits a connection from a client at ip, failing the test if it
// is refused, and moves it through the given states.
func (f *limitFixture) open(ip string, states ...http.ConnState) *fakeConn {
	f.t.Helper()
	c := fakeFrom(ip)
	if !f.l.admit(c) || c.closed.Load() {
		f.t.Fatalf("a connection from %s was refused", ip)
	}
	f.l.ConnState(c, http.StateNew)
	for _, s := range states {
		f.l.ConnState(c, s)
	}
	return c
}

// refuse requires a connection from a client at ip refused and closed.
func (f *limitFixture) refuse(ip string) {
	f.t.Helper()
	c := fakeFrom(ip)
	if f.l.admit(c) || !c.closed.Load() {
		f.t.Fatalf("a connection from %s was not refused", ip)
	}
}

// TestConnLimitPolicy: at the cap a new connection takes the place of
// the connection idle longest, else of the oldest without a complete
// request header, else of the oldest request of the busiest client
// address when it holds two more than the newcomer's; else it is refused.
func TestConnLimitPolicy(t *testing.T) {
	const a, b, c = "192.0.2.1", "192.0.2.2", "192.0.2.3"
	active := []http.ConnState{http.StateActive}
	idle := []http.ConnState{http.StateActive, http.StateIdle}

	t.Run("idle longest goes first", func(t *testing.T) {
		f := newLimitFixture(t, 4)
		fresh := f.open(a)
		first := f.open(a, idle...)
		second := f.open(a, idle...)
		busy := f.open(a, active...)
		f.open(b)
		if !first.closed.Load() || second.closed.Load() || fresh.closed.Load() || busy.closed.Load() {
			t.Fatalf("closed: first idle %v, second idle %v, new %v, active %v; want only the first idle",
				first.closed.Load(), second.closed.Load(), fresh.closed.Load(), busy.closed.Load())
		}
		// Idle again after a request: now the youngest idle.
		f.l.ConnState(second, http.StateActive)
		f.l.ConnState(second, http.StateIdle)
		f.open(b)
		if !second.closed.Load() {
			t.Fatal("the only idle connection left open at the cap")
		}
	})

	t.Run("then the oldest without a request header", func(t *testing.T) {
		f := newLimitFixture(t, 3)
		busy := f.open(a, active...)
		older := f.open(a)
		younger := f.open(a)
		f.open(a)
		if !older.closed.Load() || younger.closed.Load() || busy.closed.Load() {
			t.Fatalf("closed: older %v, younger %v, active %v; want the older new one", older.closed.Load(), younger.closed.Load(), busy.closed.Load())
		}
	})

	t.Run("then the busiest client's oldest request", func(t *testing.T) {
		f := newLimitFixture(t, 4)
		old := f.open(a, active...)
		f.open(b, active...)
		young := f.open(a, active...)
		f.open(a, active...)
		// Back from idle: its request is the newest of a's.
		f.l.ConnState(old, http.StateIdle)
		f.l.ConnState(old, http.StateActive)
		f.open(c)
		if !young.closed.Load() || old.closed.Load() {
			t.Fatalf("closed: oldest request %v, newest %v", young.closed.Load(), old.closed.Load())
		}
		if got := f.l.evicted[evictActive].Load(); got != 1 {
			t.Fatalf("%d active evictions counted, want 1", got)
		}
	})

	t.Run("refused when no client holds two more", func(t *testing.T) {
		f := newLimitFixture(t, 3)
		f.open(a, active...)
		f.open(a, active...)
		f.open(b, active...)
		// a holds 2, b 1: b would hold as many as a after taking one.
		f.refuse(b)
		if f.l.refused.Load() != 1 {
			t.Fatalf("%d refusals counted", f.l.refused.Load())
		}
		f.open(c) // c holds none: a's oldest goes
	})

	t.Run("the busiest client's own connection is refused", func(t *testing.T) {
		f := newLimitFixture(t, 2)
		f.open(a, active...)
		f.open(a, active...)
		f.refuse(a)
	})

	t.Run("a TLS connection's states are its own", func(t *testing.T) {
		f := newLimitFixture(t, 2)
		c := f.open(a)
		// The server reports a TLS connection by its *tls.Conn.
		f.l.ConnState(tls.Server(c, &tls.Config{}), http.StateActive)
		f.l.ConnState(tls.Server(c, &tls.Config{}), http.StateIdle)
		if f.l.idle.Len() != 1 || f.l.fresh.Len() != 0 {
			t.Fatalf("%d idle, %d new; want the TLS connection idle", f.l.idle.Len(), f.l.fresh.Len())
		}
	})

	t.Run("closed and evicted connections free their places", func(t *testing.T) {
		f := newLimitFixture(t, 2)
		gone := f.open(a, active...)
		evicted := f.open(a, idle...)
		f.l.ConnState(gone, http.StateClosed)
		f.open(b, active...)
		if evicted.closed.Load() {
			t.Fatal("a connection was evicted below the cap")
		}
		f.open(b, active...)
		if !evicted.closed.Load() {
			t.Fatal("the idle connection was not evicted at the cap")
		}
		// The server's later word on the evicted connection is ignored.
		f.l.ConnState(evicted, http.StateIdle)
		f.l.ConnState(evicted, http.StateClosed)
		if n := len(f.l.conns); n != 2 || f.l.idle.Len() != 0 {
			t.Fatalf("%d tracked, %d idle; want 2 and 0", n, f.l.idle.Len())
		}
	})
}

// TestClientOf: an IPv4 address is a client, and so is an IPv6 /64.
func TestClientOf(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"192.0.2.1", "::ffff:192.0.2.1"},
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff::9"},
	} {
		if clientOf(&net.TCPAddr{IP: net.ParseIP(tc.a)}) != clientOf(&net.TCPAddr{IP: net.ParseIP(tc.b)}) {
			t.Errorf("%s and %s are not one client", tc.a, tc.b)
		}
	}
	if clientOf(&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::1")}) == clientOf(&net.TCPAddr{IP: net.ParseIP("2001:db8:1:3::1")}) {
		t.Error("two /64s are one client")
	}
}

// TestConnLimitActiveHoarder: over TCP, a client whose every connection
// is in a request that does not end (held by the handler) does not lock
// out a client from another address, and its own connection past the cap
// is refused at once.
func TestConnLimitActiveHoarder(t *testing.T) {
	const max = 8
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newConnLimit(ln, max, slog.New(slog.DiscardHandler))
	entered := make(chan struct{}, max)
	release := make(chan struct{})
	srv := &http.Server{
		ConnState:         l.ConnState,
		ReadHeaderTimeout: readHeaderTimeout,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				entered <- struct{}{}
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}
		}),
	}
	go srv.Serve(l)
	t.Cleanup(func() {
		close(release)
		srv.Close()
	})
	addr := ln.Addr().String()
	hoarder := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: answerTimeout}
	for range max {
		hold(t, hoarder, addr, entered)
	}

	// Another address is answered: the hoarder's oldest request goes.
	ctx, cancel := context.WithTimeout(context.Background(), answerTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatalf("another client's request was not answered within %v while one holds %d requests open: %v", answerTimeout, max, err)
	}
	resp.Body.Close()
	if got := l.evicted[evictActive].Load(); got != 1 {
		t.Fatalf("%d active connections evicted, want 1", got)
	}

	// Once that request's connection is gone, the hoarder fills the cap
	// again, and its next connection is closed unanswered.
	deadline := time.Now().Add(answerTimeout)
	for l.open() != max-1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections tracked after the other client left, want %d", l.open(), max-1)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	hold(t, hoarder, addr, entered)
	c, err := hoarder.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n") // may fail: the node closed it
	_ = c.SetReadDeadline(time.Now().Add(answerTimeout))
	_, err = http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the hoarder's connection past the cap: %v, want it closed", err)
	}
	if l.refused.Load() == 0 {
		t.Fatal("the refusal was not counted")
	}
}

// hold opens a connection with d whose request /hold stays in its
// handler, and returns once the handler runs.
func hold(t *testing.T, d *net.Dialer, addr string, entered <-chan struct{}) {
	t.Helper()
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("cannot connect from %v: %v", d.LocalAddr, err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(answerTimeout):
		t.Fatal("a /hold request did not reach its handler")
	}
}
