package node_test

import (
	"net/http"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/guesttest"
)

// TestHTTPTriggerAssemblyScript: an AssemblyScript function on an HTTP
// route, deployed to a node, sees the request (its parameter, a header,
// the query, the body, the caller) and answers with the status, headers
// and body it set; a second call is its 409; a status the runner refuses
// fails the invocation (500 FunctionFailed).
func TestHTTPTriggerAssemblyScript(t *testing.T) {
	module := guesttest.AssemblyScript(t, "testdata/asshop/index.ts")
	th := startNode(t, node.Config{})
	ctx := ctxT(t)
	mustTable(t, th.c, "Orders")
	deploy(t, th, functions.Manifest{Name: "asshop", Trigger: functions.Trigger{HTTP: &functions.HTTPTrigger{Routes: []functions.Route{
		{Method: "POST", Path: "/orders/{id}", Auth: functions.AuthAnonymous},
		{Method: "POST", Path: "/bad", Auth: functions.AuthAnonymous},
	}}}}, module)
	base := th.h.HTTPURL()

	st, h, body := fnCall(t, base, "POST", "/fn/asshop/orders/a%20b?gift=yes", map[string]string{"X-Note": "ring twice"}, "two books")
	if st != http.StatusCreated || h.Get("Location") != "/fn/asshop/orders/a b" || h.Get("Content-Type") != "text/plain" || body != "created a b by anonymous" {
		t.Fatalf("a call: %d %v %q", st, h, body)
	}
	e, _, err := th.c.Retrieve(ctx, "Orders", "orders", "a b")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"Body": "two books", "Note": "ring twice", "Query": "gift=yes"} {
		if v, _ := e.Get(name); v.Str() != want {
			t.Errorf("the function saw %s %q, want %q", name, v.Str(), want)
		}
	}
	if st, _, body := fnCall(t, base, "POST", "/fn/asshop/orders/a%20b", nil, "again"); st != http.StatusConflict || body != "" {
		t.Fatalf("a second call: %d %q, want 409 without a body", st, body)
	}
	if st, _, body := fnCall(t, base, "POST", "/fn/asshop/bad", nil, ""); st != http.StatusInternalServerError || nodetest.ErrorCode(body) != functions.CodeFunctionFailed {
		t.Fatalf("a refused status: %d %s, want 500 %s", st, body, functions.CodeFunctionFailed)
	}
}
