package node

import (
	"container/list"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// DefaultHTTPMaxConns is the default cap on the HTTP connections a node
// holds at once (Config.HTTPMaxConns). A connection kept alive after a
// request costs its goroutine's stack and 4 KiB read and write buffers,
// about 20 KiB (5 KiB before its first request): 1,024 of them cost
// about 20 MiB.
const DefaultHTTPMaxConns = 1024

// The front door's timeouts. Neither is what keeps one client from
// locking others out (connLimit's evictions are: at the cap a connection
// idle or still sending its header goes first); they bound how long a
// connection holds its memory below the cap.
const (
	// readHeaderTimeout is the longest a request header may take to
	// arrive, or a TLS handshake: ample on a slow link.
	readHeaderTimeout = 10 * time.Second
	// idleTimeout is how long a connection is kept alive between two
	// requests: long enough for an SDK's client to reuse it between
	// bursts.
	idleTimeout = 2 * time.Minute
)

// ipv6ClientBits is the prefix of an IPv6 address that counts as one
// client when connections are shared out by address: a single host
// usually holds a whole /64, and could otherwise take each of its
// connections from an address of its own.
const ipv6ClientBits = 64

// connLogEvery is the least time between two log lines about evictions,
// or about refusals: a client that makes the node evict or refuse at
// every connection cannot flood the log. /metrics counts them all.
const connLogEvery = 10 * time.Second

// connLimit is the HTTP front door's listener: it holds at most max
// connections at once, and follows each one's state through
// http.Server.ConnState (connLimit.ConnState must be the server's).
// Accept never waits for room: at the cap, a new connection takes the
// place of the connection whose loss costs least, in this order:
//
//  1. the connection idle longest between two requests (keep-alive): its
//     client connects again for its next request, as it does after the
//     server's idle timeout;
//  2. the oldest connection that has not sent a complete request header
//     yet (a bare connect, a slow header, a TLS handshake);
//  3. when every connection is in a request, the oldest request of the
//     client address holding the most connections, if it holds at least
//     two more than the new connection's address: one client cannot keep
//     others out by keeping requests open (an unread body, an unread
//     answer);
//  4. otherwise the new connection is closed at once, unanswered
//     (refused): its client sees the connection closed, and the SDKs
//     retry.
//
// So one client holding every connection, idle or half-open, delays
// another's request by the closing of one connection. An IPv4 address is
// one client, and so is an IPv6 /64. The cost per accept is a map insert
// and, at the cap, a list removal; only rule 3 walks every connection.
type connLimit struct {
	net.Listener
	max int
	log *slog.Logger

	mu     sync.Mutex
	conns  map[net.Conn]*tracked
	idle   list.List // of *tracked in http.StateIdle, longest idle first
	fresh  list.List // of *tracked in http.StateNew, oldest first
	byAddr map[netip.Prefix]int
	tick   uint64 // orders the requests' starts

	evicted    [evictStates]atomic.Uint64
	refused    atomic.Uint64
	logEvicted rate.Sometimes
	logRefused rate.Sometimes
}

// tracked is one connection the listener holds.
type tracked struct {
	conn   net.Conn
	client netip.Prefix
	state  http.ConnState
	since  uint64        // the tick its current request started at (active)
	at     *list.Element // its element of idle or fresh, nil when active
}

// evictState is the state a connection is evicted in.
type evictState int

// The states a connection is evicted in, labelled in /metrics by
// evictLabels.
const (
	evictIdle   evictState = iota // between two requests
	evictNew                      // no complete request header yet
	evictActive                   // in a request (rule 3)
	evictStates
)

var evictLabels = [evictStates]string{"idle", "new", "active"}

func newConnLimit(ln net.Listener, max int, log *slog.Logger) *connLimit {
	return &connLimit{
		Listener:   ln,
		max:        max,
		log:        log,
		conns:      map[net.Conn]*tracked{},
		byAddr:     map[netip.Prefix]int{},
		logEvicted: rate.Sometimes{First: 1, Interval: connLogEvery},
		logRefused: rate.Sometimes{First: 1, Interval: connLogEvery},
	}
}

// Accept returns the next connection, having made room for it; a
// connection it refuses is closed and the next one taken.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.admit(c) {
			return c, nil
		}
	}
}

// admit tracks c, evicting a connection if the listener is at its cap,
// or closes c and reports false when none may be evicted.
func (l *connLimit) admit(c net.Conn) bool {
	t := &tracked{conn: c, client: clientOf(c.RemoteAddr()), state: http.StateNew}
	l.mu.Lock()
	var victim *tracked
	var kind evictState
	if len(l.conns) >= l.max {
		victim, kind = l.victim(t.client)
		if victim == nil {
			l.mu.Unlock()
			l.refuse(c)
			return false
		}
		l.drop(victim)
	}
	l.conns[c] = t
	t.at = l.fresh.PushBack(t)
	l.byAddr[t.client]++
	l.mu.Unlock()
	if victim != nil {
		l.evict(victim, kind) // counted first: whoever sees it closed sees it counted
		victim.conn.Close()
	}
	return true
}

// victim chooses the connection a new one from client takes the place of
// (nil: none) and the state it is evicted in. l.mu is held.
func (l *connLimit) victim(client netip.Prefix) (*tracked, evictState) {
	if e := l.idle.Front(); e != nil {
		return e.Value.(*tracked), evictIdle
	}
	if e := l.fresh.Front(); e != nil {
		return e.Value.(*tracked), evictNew
	}
	busiest, most := netip.Prefix{}, 0
	for addr, n := range l.byAddr {
		if n > most {
			busiest, most = addr, n
		}
	}
	if busiest == client || most < l.byAddr[client]+2 {
		return nil, 0
	}
	var oldest *tracked
	for _, t := range l.conns {
		if t.client == busiest && (oldest == nil || t.since < oldest.since) {
			oldest = t
		}
	}
	return oldest, evictActive
}

// drop stops tracking t. l.mu is held.
func (l *connLimit) drop(t *tracked) {
	delete(l.conns, t.conn)
	l.unlist(t)
	if l.byAddr[t.client]--; l.byAddr[t.client] <= 0 {
		delete(l.byAddr, t.client)
	}
}

// unlist takes t out of the idle or fresh list. l.mu is held.
func (l *connLimit) unlist(t *tracked) {
	switch {
	case t.at == nil:
	case t.state == http.StateIdle:
		l.idle.Remove(t.at)
	default:
		l.fresh.Remove(t.at)
	}
	t.at = nil
}

// ConnState follows a connection's state; it is the http.Server's
// ConnState hook. A connection the listener no longer tracks (evicted)
// is ignored.
func (l *connLimit) ConnState(c net.Conn, s http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.conns[c]
	if t == nil {
		return
	}
	switch s {
	case http.StateActive:
		l.unlist(t)
		l.tick++
		t.state, t.since = s, l.tick
	case http.StateIdle:
		l.unlist(t)
		t.state = s
		t.at = l.idle.PushBack(t)
	case http.StateClosed, http.StateHijacked:
		l.drop(t)
	}
}

// evict counts and logs (at most every connLogEvery) an eviction.
func (l *connLimit) evict(t *tracked, kind evictState) {
	n := l.evicted[kind].Add(1)
	l.logEvicted.Do(func() {
		l.log.Warn("http connections at the cap (-http-max-conns): closed one to take a new one",
			"max", l.max, "state", evictLabels[kind], "remote", t.conn.RemoteAddr().String(), "evicted_in_state", n)
	})
}

// refuse closes a new connection the listener has no room for, and counts
// and logs (at most every connLogEvery) the refusal.
func (l *connLimit) refuse(c net.Conn) {
	remote := c.RemoteAddr().String()
	// Counted before the close, so that whoever sees the connection
	// closed sees it counted.
	n := l.refused.Add(1)
	c.Close()
	l.logRefused.Do(func() {
		l.log.Warn("http connection refused: every connection is in a request (-http-max-conns)",
			"max", l.max, "remote", remote, "refused", n)
	})
}

// clientOf is the client a remote address counts as: its IPv4 address or
// its IPv6 /64 (the zero prefix for an address that is not an IP).
func clientOf(a net.Addr) netip.Prefix {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}
	}
	ip := tcp.AddrPort().Addr().Unmap().WithZone("")
	bits := ip.BitLen()
	if ip.Is6() {
		bits = ipv6ClientBits
	}
	p, _ := ip.Prefix(bits)
	return p
}

// WriteMetrics writes the connections' series in the Prometheus text
// format.
func (l *connLimit) WriteMetrics(w io.Writer) {
	l.mu.Lock()
	idle, fresh, all := l.idle.Len(), l.fresh.Len(), len(l.conns)
	l.mu.Unlock()
	fmt.Fprintln(w, "# HELP cairn_http_connections HTTP connections open, by state: new (no complete request header yet), active (in a request), idle (kept alive between requests).")
	fmt.Fprintln(w, "# TYPE cairn_http_connections gauge")
	fmt.Fprintf(w, "cairn_http_connections{state=\"new\"} %d\ncairn_http_connections{state=\"active\"} %d\ncairn_http_connections{state=\"idle\"} %d\n", fresh, all-idle-fresh, idle)
	fmt.Fprintf(w, "# HELP cairn_http_connections_max The cap on open HTTP connections (-http-max-conns).\n# TYPE cairn_http_connections_max gauge\ncairn_http_connections_max %d\n", l.max)
	fmt.Fprintln(w, "# HELP cairn_http_connections_evicted_total HTTP connections closed at the cap to take a new one, by the state they were in.")
	fmt.Fprintln(w, "# TYPE cairn_http_connections_evicted_total counter")
	for kind, label := range evictLabels {
		fmt.Fprintf(w, "cairn_http_connections_evicted_total{state=%q} %d\n", label, l.evicted[kind].Load())
	}
	fmt.Fprintf(w, "# HELP cairn_http_connections_refused_total New HTTP connections closed at once at the cap, none being evictable.\n# TYPE cairn_http_connections_refused_total counter\ncairn_http_connections_refused_total %d\n", l.refused.Load())
}

// open returns how many connections the listener holds (tests wait on
// it).
func (l *connLimit) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}
