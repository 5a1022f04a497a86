package node

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// named answers with its name, so that a test sees which handler a
// request reached.
type named string

func (n named) ServeHTTP(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, string(n)) }

// routeSets are patterns as the node registers them: the front door's
// (exact paths), the APIs' (subtrees, exact paths with and without a
// trailing slash, a method and an end anchor), and patterns that name
// every path (a host, a wildcard first).
var routeSets = map[string][]string{
	"front door": {"/healthz", "/readyz", "/favicon.ico"},
	"apis":       {"/$cairn/functions/", "/$cairn/outbox", "/$cairn/outbox/", "/metrics", "/fn/", "GET /{$}"},
	"host":       {"/metrics", "h/fn/"},
	"wildcard":   {"/metrics", "GET /{acct}/x"},
}

func testRoutes(patterns []string) (*routes, *http.ServeMux) {
	rs, mux := newRoutes(), http.NewServeMux()
	for _, p := range patterns {
		rs.handle(p, named(p))
		mux.Handle(p, named(p))
	}
	rs.handle("/", named("/"))
	mux.Handle("/", named("/"))
	return rs, mux
}

// parsed is the request a server reads from the request line, or nil
// when it refuses the line.
func parsed(method, target string) *http.Request {
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(method + " " + target + " HTTP/1.1\r\nHost: h\r\n\r\n")))
	if err != nil {
		return nil
	}
	return r
}

// answer is what h answers r: status, Location and body.
func answer(h http.Handler, r *http.Request) string {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return fmt.Sprintf("%d %q %q", w.Code, w.Header().Get("Location"), w.Body.String())
}

// TestRoutesAnswerAsTheMux: for every request target of up to four
// pieces of an alphabet that makes unclean paths, escapes and the
// patterns' prefixes, and for hostile and ordinary ones, routes answer
// as an http.ServeMux with the same patterns does: the same handler, or
// the same redirect or refusal.
func TestRoutesAnswerAsTheMux(t *testing.T) {
	targets := []string{
		"/healthz", "/readyz", "/favicon.ico", "/", "*", "/healthz/", "/healthz/x", "//healthz",
		"/x/../healthz", "/./healthz", "/heal%74hz", "/%2Fhealthz", "/healthz%2F", "/healthz?x=1",
		"/Tables", "/Tables('T')", "/T(PartitionKey='a',RowKey='b')?$select=c", "/acct/T()?$filter=x%20eq%201",
		"/T/..", "/T/.", "/T//", "/T/./x", "http://h/healthz", "http://h", "http://h/a/../healthz",
		"/fn", "/fn/", "/fn/x", "/$cairn/outbox", "/$cairn/outbox/", "/$cairn/functions", "/metrics/", "/acct/x",
	}
	alphabet := []string{"/", ".", "a", "%2F", "%61", "%2E", "%20", "%25", "healthz", "fn", "metrics", "$cairn", "outbox", "x"}
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		targets = append(targets, prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			gen(prefix+c, n-1)
		}
	}
	gen("/", 3)
	for name, patterns := range routeSets {
		rs, mux := testRoutes(patterns)
		checked := 0
		for _, method := range []string{"GET", "POST", "OPTIONS", "CONNECT"} {
			for _, target := range targets {
				r := parsed(method, target)
				if r == nil {
					continue
				}
				checked++
				if got, want := answer(rs, r), answer(mux, parsed(method, target)); got != want {
					t.Fatalf("%s: %s %s: routes answer %s, the mux %s", name, method, target, got, want)
				}
			}
		}
		if checked < 5000 {
			t.Fatalf("%s: only %d requests checked", name, checked)
		}
	}
}

// TestCleanPath: the paths the mux would redirect are not clean.
func TestCleanPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/a": true, "/a/": true, "/a/b": true, "/a.b/..c": true,
		"": false, "a": false, "//": false, "/a//": false, "//a": false, "/.": false, "/..": false,
		"/a/.": false, "/a/..": false, "/a/./b": false, "/a/../b": false, "/./": false,
	} {
		if got := cleanPath(p); got != want {
			t.Errorf("cleanPath(%q) = %v, want %v", p, got, want)
		}
	}
}

// BenchmarkRoutes: a point read's routing through routes and through
// the mux they shortcut, with the node's APIs' patterns.
func BenchmarkRoutes(b *testing.B) {
	nop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	rs, mux := newRoutes(), http.NewServeMux()
	for _, p := range append(routeSets["apis"], "/") {
		rs.handle(p, nop)
		mux.Handle(p, nop)
	}
	r := parsed("GET", "/Employees(PartitionKey='Sales',RowKey='000123')?$select=Name")
	var w httptest.ResponseRecorder
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{{"routes", rs}, {"mux", mux}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.h.ServeHTTP(&w, r)
			}
		})
	}
}
