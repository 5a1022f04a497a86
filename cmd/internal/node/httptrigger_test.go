package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/admin"
)

// fnCall sends a request to a function's route (nodetest.HTTP).
func fnCall(t *testing.T, base, method, path string, header map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	return nodetest.HTTP(t, method, base+path, header, body)
}

// newFunctionKey creates a key of function fn through the operators' API
// and returns its id and its text.
func newFunctionKey(t *testing.T, th *testHost, fn, name string) (id, text string) {
	t.Helper()
	resp := operatorDo(t, th.h.OperatorToken(), "POST", th.h.HTTPURL()+admin.Prefix+"functions/"+fn+"/keys?name="+name, nil)
	defer resp.Body.Close()
	var k struct{ ID, Key string }
	if err := json.NewDecoder(resp.Body).Decode(&k); err != nil || resp.StatusCode != http.StatusCreated || k.Key == "" {
		t.Fatalf("a new key: %d %+v %v", resp.StatusCode, k, err)
	}
	return k.ID, k.Key
}

// TestHTTPTrigger: a function's route answers a caller with a function
// key (its status, headers and body as the function set them, its path
// parameters, query and body seen by the function); without a key, with
// a key revoked, or another function's, 401; an anonymous route needs
// none; a retry with the same Idempotency-Key writes once; a body past
// the route's bound is 413, a caller past its rate 429, an unknown route
// 404 and another method 405, each coded; a browser of an allowed origin
// gets its preflight and CORS headers, another origin 403.
func TestHTTPTrigger(t *testing.T) {
	th := startNode(t, node.Config{})
	ctx := ctxT(t)
	mustTable(t, th.c, "Orders")
	fr := th.h.Functions()
	var invocations atomic.Int32
	m := functions.Manifest{Name: "shop", Trigger: functions.Trigger{HTTP: &functions.HTTPTrigger{
		MaxBodyBytes: 1024, RatePerKey: 50,
		Routes: []functions.Route{
			{Method: "POST", Path: "/orders/{id}", CORS: &functions.RouteCORS{Origins: []string{"https://shop.example"}}},
			{Method: "GET", Path: "/health", Auth: functions.AuthAnonymous},
			{Method: "POST", Path: "/count/{id}"},
			{Method: "GET", Path: "/fail", Auth: functions.AuthAnonymous},
		}}}}
	handler := functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		invocations.Add(1)
		req := inv.Trigger().HTTP
		switch req.Route {
		case "/health":
			return inv.SetOutput([]byte("ok"))
		case "/fail":
			return errors.New("the table Payroll said no")
		case "/count/{id}":
			// Not idempotent on its own: a read, then one more.
			e, _, err := inv.Get(ctx, "Orders", "count", req.Params["id"])
			if err != nil {
				return err
			}
			n := int64(0)
			if e != nil {
				v, _ := e.Get("N")
				n = v.Int()
			}
			return inv.Write(ctx, "Orders", engine.Operation{Op: engine.OpInsertOrReplace,
				Entity: engine.NewEntity("count", req.Params["id"], engine.Property{Name: "N", Value: engine.Int64(n + 1)})})
		}
		id := req.Params["id"]
		e := engine.NewEntity("web", id, engine.Property{Name: "Body", Value: engine.String(string(inv.Trigger().Body))},
			engine.Property{Name: "Caller", Value: engine.String(req.Caller)}, engine.Property{Name: "Query", Value: engine.String(req.Query)})
		if err := inv.Write(ctx, "Orders", engine.Operation{Op: engine.OpInsert, Entity: e}); err != nil {
			return err
		}
		if err := inv.SetResponse(http.StatusCreated, map[string][]string{"Location": {"/orders/" + id}, "Content-Type": {"application/json"}, "Vary": {"Accept-Encoding"}}); err != nil {
			return err
		}
		return inv.SetOutput([]byte(`{"id":"` + id + `"}`))
	})
	if err := fr.Register(m, handler); err != nil {
		t.Fatal(err)
	}
	other := functions.Manifest{Name: "other", Trigger: functions.Trigger{HTTP: &functions.HTTPTrigger{Routes: []functions.Route{{Method: "*", Path: "/"}}}}}
	if err := fr.Register(other, functions.NativeFunc(func(context.Context, *functions.Invocation) error { return nil })); err != nil {
		t.Fatal(err)
	}
	base := th.h.HTTPURL()
	token := th.h.OperatorToken()
	oldID, oldKey := newFunctionKey(t, th, "shop", "old")
	_, newKeyText := newFunctionKey(t, th, "shop", "new")
	_, otherKey := newFunctionKey(t, th, "other", "x")
	eventually(t, 10*time.Second, "the keys reach the runner's copy", func() bool {
		st, _, _ := fnCall(t, base, "POST", "/fn/shop/orders/0", map[string]string{functions.KeyHeader: newKeyText}, "x")
		return st == http.StatusCreated
	})

	st, h, body := fnCall(t, base, "POST", "/fn/shop/orders/42?gift=yes", map[string]string{functions.KeyHeader: oldKey}, "two books")
	if st != http.StatusCreated || h.Get("Location") != "/orders/42" || h.Get("Content-Type") != "application/json" || body != `{"id":"42"}` {
		t.Fatalf("a call with a key: %d %v %q", st, h, body)
	}
	e, _, err := th.c.Retrieve(ctx, "Orders", "web", "42")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := e.Get("Body"); b.Str() != "two books" {
		t.Fatalf("the function saw %v", e)
	}
	if c, _ := e.Get("Caller"); c.Str() != "key:old" {
		t.Fatalf("the caller: %v", c)
	}
	if q, _ := e.Get("Query"); q.Str() != "gift=yes" {
		t.Fatalf("the query: %v", q)
	}
	// A key in the query works, and the function does not see it.
	if st, _, body := fnCall(t, base, "POST", "/fn/shop/orders/43?code="+url.QueryEscape(newKeyText)+"&gift=no", nil, "a pen"); st != http.StatusCreated {
		t.Fatalf("a call with the key in the query: %d %s", st, body)
	}
	if e, _, err = th.c.Retrieve(ctx, "Orders", "web", "43"); err != nil {
		t.Fatal(err)
	}
	if q, _ := e.Get("Query"); q.Str() != "gift=no" {
		t.Fatalf("the function saw the query %v", q)
	}

	// Refused, each coded, the function not run.
	before := invocations.Load()
	for _, c := range []struct {
		name, method, path string
		header             map[string]string
		body               string
		status             int
		code               string
	}{
		{"no key", "POST", "/fn/shop/orders/1", nil, "", http.StatusUnauthorized, functions.CodeUnauthorized},
		{"a wrong key", "POST", "/fn/shop/orders/1", map[string]string{functions.KeyHeader: "abcdefgh.nope"}, "", http.StatusUnauthorized, functions.CodeUnauthorized},
		{"another function's key", "POST", "/fn/shop/orders/1", map[string]string{functions.KeyHeader: otherKey}, "", http.StatusUnauthorized, functions.CodeUnauthorized},
		{"no such route", "POST", "/fn/shop/nothing", map[string]string{functions.KeyHeader: oldKey}, "", http.StatusNotFound, functions.CodeRouteNotFound},
		{"another method", "GET", "/fn/shop/orders/1", map[string]string{functions.KeyHeader: oldKey}, "", http.StatusMethodNotAllowed, functions.CodeMethodNotAllowed},
		{"no such function", "GET", "/fn/nothing/", nil, "", http.StatusNotFound, functions.CodeFunctionNotFound},
		{"a body too large", "POST", "/fn/shop/orders/1", map[string]string{functions.KeyHeader: oldKey}, strings.Repeat("x", 1025), http.StatusRequestEntityTooLarge, string(engine.CodeRequestBodyTooLarge)},
		{"another origin", "POST", "/fn/shop/orders/1", map[string]string{functions.KeyHeader: oldKey, "Origin": "https://evil.example"}, "", http.StatusForbidden, functions.CodeOriginNotAllowed},
		{"a bad Idempotency-Key", "POST", "/fn/shop/orders/1", map[string]string{functions.KeyHeader: oldKey, "Idempotency-Key": "a b"}, "", http.StatusBadRequest, string(engine.CodeInvalidInput)},
	} {
		st, _, body := fnCall(t, base, c.method, c.path, c.header, c.body)
		if st != c.status || nodetest.ErrorCode(body) != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, st, body, c.status, c.code)
		}
	}
	if invocations.Load() != before {
		t.Fatalf("refused calls ran the function %d times", invocations.Load()-before)
	}
	if exists(t, th.c, "Orders", "web", "1") {
		t.Fatal("a refused call wrote")
	}

	// Anonymous: no key; a failure's reason goes to the function's log,
	// not to anyone who calls.
	if st, _, body := fnCall(t, base, "GET", "/fn/shop/health", nil, ""); st != http.StatusOK || body != "ok" {
		t.Fatalf("an anonymous route: %d %q", st, body)
	}
	if st, _, body := fnCall(t, base, "GET", "/fn/shop/fail", nil, ""); st != http.StatusInternalServerError || nodetest.ErrorCode(body) != functions.CodeFunctionFailed || strings.Contains(body, "Payroll") {
		t.Fatalf("an anonymous route failing: %d %s", st, body)
	}

	// A retry with the same Idempotency-Key writes once: the second run
	// reads the first's count and writes one more, and its command is
	// answered from the first commit. Without the key, it counts again.
	count := func() int64 {
		t.Helper()
		e, _, err := th.c.Retrieve(ctx, "Orders", "count", "7")
		if err != nil {
			t.Fatal(err)
		}
		v, _ := e.Get("N")
		return v.Int()
	}
	idem := map[string]string{functions.KeyHeader: newKeyText, "Idempotency-Key": "order-7-attempt"}
	for i := range 2 {
		if st, _, body := fnCall(t, base, "POST", "/fn/shop/count/7", idem, ""); st != http.StatusNoContent {
			t.Fatalf("try %d with an Idempotency-Key: %d %s", i+1, st, body)
		}
	}
	if n := count(); n != 1 {
		t.Fatalf("a retried request with the same Idempotency-Key counted %d", n)
	}
	if st, _, body := fnCall(t, base, "POST", "/fn/shop/count/7", map[string]string{functions.KeyHeader: newKeyText}, ""); st != http.StatusNoContent || count() != 2 {
		t.Fatalf("without the key: %d %s, count %d", st, body, count())
	}

	// CORS: the preflight of an allowed origin, and the call's headers.
	st, h, _ = fnCall(t, base, "OPTIONS", "/fn/shop/orders/8", map[string]string{"Origin": "https://shop.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-functions-key"}, "")
	if st != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "https://shop.example" || !strings.Contains(h.Get("Access-Control-Allow-Headers"), functions.KeyHeader) {
		t.Fatalf("a preflight: %d %v", st, h)
	}
	st, h, _ = fnCall(t, base, "POST", "/fn/shop/orders/8", map[string]string{functions.KeyHeader: newKeyText, "Origin": "https://shop.example"}, "from a browser")
	if st != http.StatusCreated || h.Get("Access-Control-Allow-Origin") != "https://shop.example" || !slices.Contains(h.Values("Vary"), "Origin") || !slices.Contains(h.Values("Vary"), "Accept-Encoding") {
		t.Fatalf("a call from an allowed origin: %d %v", st, h)
	}
	if st, _, body := fnCall(t, base, "OPTIONS", "/fn/shop/orders/8", map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}, ""); st != http.StatusForbidden {
		t.Fatalf("a preflight of another origin: %d %s", st, body)
	}

	// Rotation: the old key revoked, the new one goes on.
	resp := operatorDo(t, token, "DELETE", base+admin.Prefix+"functions/shop/keys/"+oldID, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	eventually(t, 10*time.Second, "the revoked key refused", func() bool {
		st, _, _ := fnCall(t, base, "POST", "/fn/shop/orders/9", map[string]string{functions.KeyHeader: oldKey}, "")
		return st == http.StatusUnauthorized
	})
	if st, _, body := fnCall(t, base, "POST", "/fn/shop/orders/10", map[string]string{functions.KeyHeader: newKeyText}, ""); st != http.StatusCreated {
		t.Fatalf("the key kept after the rotation: %d %s", st, body)
	}
	resp = operatorDo(t, token, "GET", base+admin.Prefix+"functions/shop/keys", nil)
	var listed []map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&listed); err != nil || len(listed) != 1 {
		t.Fatalf("keys listed: %v %v", listed, err)
	}
	resp.Body.Close()
	if raw, _ := json.Marshal(listed); bytes.Contains(raw, []byte(newKeyText[9:])) || bytes.Contains(raw, []byte("sha256")) {
		t.Fatalf("the list shows a secret or its hash: %s", raw)
	}

	// The rate: a function taking 1 request a second from a caller
	// refuses the second of three sent at once with 429 and Retry-After
	// (unless a call took a second).
	slow := functions.Manifest{Name: "slow-api", Trigger: functions.Trigger{HTTP: &functions.HTTPTrigger{RatePerKey: 1,
		Routes: []functions.Route{{Method: "GET", Path: "/", Auth: functions.AuthAnonymous}}}}}
	if err := fr.Register(slow, functions.NativeFunc(func(context.Context, *functions.Invocation) error { return nil })); err != nil {
		t.Fatal(err)
	}
	limited := false
	for range 3 {
		st, h, body := fnCall(t, base, "GET", "/fn/slow-api/", nil, "")
		if st == http.StatusTooManyRequests {
			if nodetest.ErrorCode(body) != functions.CodeTooManyRequests || h.Get("Retry-After") == "" {
				t.Fatalf("429: %v %s", h, body)
			}
			limited = true
			break
		}
	}
	if !limited {
		t.Fatal("3 calls at once from one caller were not limited to 1 a second")
	}
}
