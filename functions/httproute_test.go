package functions

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// TestRoutes: routes are checked when declared, and match method and
// path with their parameters unescaped.
func TestRoutes(t *testing.T) {
	h := HTTPTrigger{Routes: []Route{
		{Method: "post", Path: "/orders/{id}"},
		{Method: "GET", Path: "/files/{*rest}", Auth: "anonymous"},
		{Method: "*", Path: "/"},
	}}
	if err := h.validate(); err != nil {
		t.Fatal(err)
	}
	if h.MaxBodyBytes != DefaultHTTPBody || h.RatePerKey != DefaultHTTPRate || h.Routes[0].Method != "POST" || h.Routes[0].Auth != AuthKey {
		t.Fatalf("defaults: %+v", h)
	}
	for _, c := range []struct {
		method, path string
		route        int
		params       map[string]string
	}{
		{"POST", "/orders/42", 0, map[string]string{"id": "42"}},
		{"POST", "/orders/a%2Fb", 0, map[string]string{"id": "a/b"}},
		{"GET", "/orders/42", -1, nil},
		{"POST", "/orders/", -1, nil},
		{"GET", "/files/a/b/c.txt", 1, map[string]string{"rest": "a/b/c.txt"}},
		{"HEAD", "/files/", 1, map[string]string{"rest": ""}},
		{"DELETE", "", 2, nil},
		{"PUT", "/nothing", -1, nil},
	} {
		got := -1
		var params map[string]string
		for i := range h.Routes {
			if p, ok := h.Routes[i].match(c.method, c.path); ok {
				got, params = i, p
				break
			}
		}
		if got != c.route || !maps.Equal(params, c.params) {
			t.Errorf("%s %s: route %d %v, want %d %v", c.method, c.path, got, params, c.route, c.params)
		}
	}
	for _, bad := range []struct {
		h    HTTPTrigger
		says string
	}{
		{HTTPTrigger{}, "1 to 64 routes"},
		{HTTPTrigger{Routes: []Route{{Method: "TRACE", Path: "/"}}}, "method"},
		{HTTPTrigger{Routes: []Route{{Method: "GET", Path: "orders"}}}, "starts with /"},
		{HTTPTrigger{Routes: []Route{{Method: "GET", Path: "/a/{*rest}/b"}}}, "comes last"},
		{HTTPTrigger{Routes: []Route{{Method: "GET", Path: "/{id}/{id}"}}}, "named twice"},
		{HTTPTrigger{Routes: []Route{{Method: "GET", Path: "/a{id}"}}}, "whole segment"},
		{HTTPTrigger{Routes: []Route{{Method: "GET", Path: "/a/../b"}}}, ".."},
		{HTTPTrigger{Routes: []Route{{Method: "GET", Path: "/a b"}}}, "literal"},
		{HTTPTrigger{Routes: []Route{{Method: "GET", Path: "/", Auth: "none"}}}, "auth"},
		{HTTPTrigger{Routes: []Route{{Method: "GET", Path: "/", CORS: &RouteCORS{}}}}, "origins"},
		{HTTPTrigger{Routes: []Route{{Method: "GET", Path: "/", CORS: &RouteCORS{Origins: []string{"https://a.example/path"}}}}}, "origin"},
		{HTTPTrigger{Routes: []Route{{Method: "GET", Path: "/"}}, MaxBodyBytes: MaxHTTPBody + 1}, "maxBodyBytes"},
		{HTTPTrigger{Routes: []Route{{Method: "GET", Path: "/"}}, RatePerKey: -1}, "ratePerKey"},
		{HTTPTrigger{Routes: []Route{{Method: "GET", Path: "/", Auth: AuthAccount}}}, "needs the trigger's account"},
		{HTTPTrigger{Routes: []Route{{Method: "GET", Path: "/", Auth: AuthAccount}}, Account: "Contoso"}, "lowercase"},
		{HTTPTrigger{Routes: []Route{{Method: "GET", Path: "/"}}, Account: "ab"}, "3 to 24"},
	} {
		if err := bad.h.validate(); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%+v: %v, want an error saying %q", bad.h, err, bad.says)
		}
	}
}

// TestFunctionKeys: a key matches its own secret only, and what a caller
// sends is split into id and secret or refused.
func TestFunctionKeys(t *testing.T) {
	k, text, err := NewFunctionKey("deploy-2026", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	id, secret, ok := SplitFunctionKey(text)
	if !ok || id != k.ID || !k.Matches(secret) {
		t.Fatalf("%q: %q %q %v", text, id, secret, ok)
	}
	other := secret[:42] + "A"
	if other == secret {
		other = secret[:42] + "B"
	}
	if strings.Contains(k.SHA256, secret) || k.Matches(other) {
		t.Fatal("the stored key gives the secret away, or matches another")
	}
	k2, text2, _ := NewFunctionKey("other", time.Now())
	_, secret2, _ := SplitFunctionKey(text2)
	if k.Matches(secret2) || k2.Matches(secret) || k.ID == k2.ID {
		t.Fatal("keys match each other's secrets")
	}
	for _, bad := range []string{"", "abc", k.ID, k.ID + ".", "ABCDEFGH." + secret, k.ID + "." + secret + "x"} {
		if _, _, ok := SplitFunctionKey(bad); ok {
			t.Errorf("%q taken for a key", bad)
		}
	}
	if _, _, err := NewFunctionKey("a b", time.Now()); err == nil {
		t.Error("a key name with a space")
	}
}

// TestGuestQuery: a function sees the query as sent but for the
// parameters that carried the route's authorisation.
func TestGuestQuery(t *testing.T) {
	for _, c := range []struct{ raw, auth, want string }{
		{"gift=yes&code=abc.def", AuthKey, "gift=yes"},
		{"code=abc&c%6Fde=x&a=%zz", AuthKey, "a=%zz"},
		{"code=abc&gift=yes", AuthAnonymous, "code=abc&gift=yes"},
		{"sv=2019-02-02&ss=t&srt=o&sp=r&se=2030-01-01T00%3A00%3A00Z&sig=c2ln&x=1&x=2", AuthAccount, "x=1&x=2"},
		{"code=abc&sp=r", AuthAccount, "code=abc"},
		{"", AuthKey, ""},
		{"a=1;b=2", AuthKey, "a=1;b=2"},
	} {
		if got := guestQuery(c.raw, c.auth); got != c.want {
			t.Errorf("guestQuery(%q, %s) = %q, want %q", c.raw, c.auth, got, c.want)
		}
	}
}

// TestSetResponseRefusals: a function's reply may set a final status and
// its own headers; an informational status (one 101 would claim an
// upgraded connection), one out of range, a header the host sets or a
// malformed one is refused, and nothing is kept.
func TestSetResponseRefusals(t *testing.T) {
	inv := &Invocation{}
	for _, c := range []struct {
		status int
		header map[string][]string
	}{
		{100, nil}, {101, nil}, {103, nil}, {199, nil}, {600, nil}, {-1, nil},
		{200, map[string][]string{"Content-Length": {"1"}}},
		{200, map[string][]string{"access-control-allow-origin": {"*"}}},
		{200, map[string][]string{"Bad Name": {"x"}}},
		{200, map[string][]string{"X-A": {"a\r\nb"}}},
	} {
		if err := inv.SetResponse(c.status, c.header); engine.ErrorCode(err) != engine.CodeInvalidInput {
			t.Errorf("SetResponse(%d, %v): %v, want InvalidInput", c.status, c.header, err)
		}
		if st, h := inv.Response(); st != 0 || h != nil {
			t.Errorf("after a refusal the reply is %d %v", st, h)
		}
	}
	for _, st := range []int{0, 200, 204, 302, 599} {
		if err := inv.SetResponse(st, map[string][]string{"Vary": {"Accept-Encoding"}}); err != nil {
			t.Errorf("SetResponse(%d): %v", st, err)
		}
	}
}

// TestCallerRates: a caller past its rate is refused; past maxCallers the
// caller used longest ago is forgotten (its budget starts anew) and the
// others are kept; an IPv6 client is one caller per /64.
func TestCallerRates(t *testing.T) {
	tr := NewHTTPTriggers(nil)
	if !tr.allow("a", 1) || tr.allow("a", 1) {
		t.Fatal("a rate of 1 a second took 0 or 2 requests")
	}
	for i := range maxCallers {
		tr.allow(fmt.Sprint("c", i), 1)
	}
	if len(tr.callers) != maxCallers || tr.lru.Len() != maxCallers {
		t.Fatalf("%d callers kept (%d in order), want %d", len(tr.callers), tr.lru.Len(), maxCallers)
	}
	if !tr.allow("a", 1) {
		t.Fatal("the caller used longest ago was not forgotten")
	}
	if tr.allow(fmt.Sprint("c", maxCallers-1), 1) {
		t.Fatal("a caller used lately was forgotten")
	}
	for remote, want := range map[string]string{
		"192.0.2.7:5000":              "192.0.2.7",
		"[2001:db8:1:2:aaaa::1]:443":  "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff:1:2:3]:1": "2001:db8:1:2::/64",
		"[::ffff:192.0.2.7]:80":       "::ffff:192.0.2.7",
		"not an address":              "not an address",
	} {
		if got := clientPrefix(remote); got != want {
			t.Errorf("clientPrefix(%q) = %q, want %q", remote, got, want)
		}
	}
}
