package node_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
)

// answerWithin is how long another client's request may take while one
// client hoards connections: generous, since this is no timing claim
// (BenchmarkRequestWhileHoarded measures the delay), yet shorter than
// the 10 s a bare or slow-header connection was held before the front
// door evicted them, so that the test failed then.
const answerWithin = 5 * time.Second

// A hoard opens one connection of a kind to the node's HTTP address with
// d and leaves it open.
type hoard func(t testing.TB, d *net.Dialer, addr string) net.Conn

// idleConn sends one GET /healthz, reads the answer and leaves the
// connection idle (keep-alive).
func idleConn(t testing.TB, d *net.Dialer, addr string) net.Conn {
	t.Helper()
	c := dialHTTP(t, d, addr)
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(answerWithin))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("hoarding idle connections: GET /healthz: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("hoarding idle connections: GET /healthz answered %s (close %v)", resp.Status, resp.Close)
	}
	_ = c.SetReadDeadline(time.Time{})
	return c
}

// bareConn connects and sends nothing.
func bareConn(t testing.TB, d *net.Dialer, addr string) net.Conn { return dialHTTP(t, d, addr) }

// slowHeaderConn sends the start of a request header, never its end.
func slowHeaderConn(t testing.TB, d *net.Dialer, addr string) net.Conn {
	t.Helper()
	c := dialHTTP(t, d, addr)
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\nX-Slow: "); err != nil {
		t.Fatal(err)
	}
	return c
}

// unreadBodyConn sends a request header announcing a body, never the
// body: the request stays in progress (net/http reads an unread body of
// up to 256 KiB before it answers).
func unreadBodyConn(t testing.TB, d *net.Dialer, addr string) net.Conn {
	t.Helper()
	c := dialHTTP(t, d, addr)
	if _, err := io.WriteString(c, "POST /healthz HTTP/1.1\r\nHost: "+addr+"\r\nContent-Length: 100\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

func dialHTTP(t testing.TB, d *net.Dialer, addr string) net.Conn {
	t.Helper()
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sameAddress dials from the address the other client uses: the hoarder
// shares it, as clients behind one proxy or NAT do.
var sameAddress = &net.Dialer{Timeout: answerWithin}

// otherAddress dials from another loopback address (Linux routes all of
// 127.0.0.0/8 to the loopback interface).
var otherAddress = &net.Dialer{Timeout: answerWithin, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}

// hostOf returns the host:port of a node's HTTP URL.
func hostOf(h *node.Node) string {
	return strings.TrimPrefix(h.HTTPURL(), "http://")
}

// answered sends GET url on a connection of its own and fails the test
// unless it is answered 200 within answerWithin.
func answered(t *testing.T, url, while string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), answerWithin)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("another client's GET %s was not answered within %v while %s: %v", url, answerWithin, while, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("another client's GET %s while %s: %s", url, while, resp.Status)
	}
}

// TestHoardedConnectionsLockNoOneOut: one client holding as many
// connections as the node takes (-http-max-conns) — idle keep-alive
// connections after a GET /healthz each, bare TCP connects, connections
// that never finish their request header, all from the other client's
// own address; or, from another address, requests whose body never
// comes — does not keep another client's requests from being answered,
// health probes and the operators' /metrics alike; the evictions show in
// /metrics.
func TestHoardedConnectionsLockNoOneOut(t *testing.T) {
	const maxConns = 64 // the default's behaviour, at a size that keeps the test fast
	th := startNode(t, node.Config{HTTPMaxConns: maxConns})
	addr, base := hostOf(th.h), th.h.HTTPURL()
	for _, tc := range []struct {
		name   string
		open   hoard
		from   *net.Dialer
		states []string // the state labels evictions may have
	}{
		{"idle keep-alive", idleConn, sameAddress, []string{"idle"}},
		{"bare", bareConn, sameAddress, []string{"new"}},
		{"slow header", slowHeaderConn, sameAddress, []string{"new"}},
		// Each in a request once its header is read: the busiest client
		// address's oldest request goes.
		{"unread body", unreadBodyConn, otherAddress, []string{"active", "new"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if c, err := tc.from.Dial("tcp", addr); err != nil {
				t.Skipf("cannot connect from %v: %v", tc.from.LocalAddr, err)
			} else {
				c.Close()
			}
			before := scrapeMetrics(t, th)
			// The scrape's keep-alive connection must not count against
			// the cap: the hoard alone fills it.
			http.DefaultClient.CloseIdleConnections()
			held := make([]net.Conn, maxConns)
			for i := range held {
				held[i] = tc.open(t, tc.from, addr)
			}
			while := fmt.Sprintf("one client holds %d connections (%s)", maxConns, tc.name)
			answered(t, base+node.HealthPath, while)
			answered(t, base+node.ReadyPath, while)
			m := scrapeMetrics(t, th)
			var more float64
			for _, state := range tc.states {
				evicted := `cairn_http_connections_evicted_total{state="` + state + `"}`
				more += m[evicted] - before[evicted]
			}
			if more < 1 {
				t.Errorf("no eviction of a connection in the states %v counted", tc.states)
			}
			if m["cairn_http_connections_max"] != maxConns || m["cairn_http_connections_refused_total"] != 0 {
				t.Errorf("max %v, refused %v", m["cairn_http_connections_max"], m["cairn_http_connections_refused_total"])
			}
			for _, c := range held {
				c.Close()
			}
		})
	}
}

// TestHoardedConnectionsDefaultCap: with the default cap (1,024), one
// client's 1,024 idle keep-alive connections do not lock another out.
func TestHoardedConnectionsDefaultCap(t *testing.T) {
	h := startNode(t, node.Config{}).h
	addr := hostOf(h)
	for range 1024 {
		idleConn(t, sameAddress, addr)
	}
	answered(t, h.HTTPURL()+node.HealthPath, "one client holds 1,024 idle connections")
}

// BenchmarkRequestWhileHoarded measures another client's GET /healthz,
// on a connection of its own, while one client holds every connection the
// node takes by default (1,024) idle, bare or with a slow header; "none"
// is the same request with nothing hoarded. Each request evicts one
// hoarded connection, opened again outside the timer. p50-ms and p99-ms
// are the request's latency percentiles.
//
//	go test ./cmd/internal/node/ -run '^$' -bench RequestWhileHoarded -benchtime 2000x
func BenchmarkRequestWhileHoarded(b *testing.B) {
	for _, tc := range []struct {
		name string
		open hoard
	}{{"none", nil}, {"idle", idleConn}, {"bare", bareConn}, {"slow-header", slowHeaderConn}} {
		b.Run(tc.name, func(b *testing.B) {
			h, _ := nodetest.Start(b, node.Config{})
			addr, url := hostOf(h), h.HTTPURL()+node.HealthPath
			if tc.open != nil {
				for range node.DefaultHTTPMaxConns {
					tc.open(b, sameAddress, addr)
				}
			}
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			took := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				resp, err := client.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				took = append(took, time.Since(start))
				if tc.open != nil {
					b.StopTimer()
					tc.open(b, sameAddress, addr)
					b.StartTimer()
				}
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
