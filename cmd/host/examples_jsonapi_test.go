package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
)

// TestExamplesJSONAPI follows examples/jsonapi/README.md: the directory
// seeded and its index on Email declared, the API deployed and a function
// key made with the CLI, then over HTTP: a point read with its ETag, a
// lookup through the index, a hire, a replace with the ETag read and
// one with a stale ETag (412), and the refusals: no key or a wrong one
// (401), an employee that does not exist (404), a hire over an existing
// one (409), a body that is not an employee (400).
func TestExamplesJSONAPI(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{})
	url, creds := h.ClientURL(), h.NATSCredsFile()
	directory := buildExample(t, "directory", nodeFlags(h)...)
	same(t, "directory seed", directory.must("seed"), "table Employees: 20 employees hired (journal position 20)\n")
	out, err := runCLI(t, "projections", "-nats-url", url, "-nats-creds", creds, "deploy", "../../examples/directory/projections/by-email.json")
	if err != nil || !strings.Contains(out, "version 1: served by 1 host(s)") {
		t.Fatalf("projections deploy: %v\n%s", err, out)
	}
	out, err = runCLI(t, "deploy", "-nats-url", url, "-nats-creds", creds, "../../examples/jsonapi")
	if err != nil || !strings.Contains(out, "deployed jsonapi version 1") {
		t.Fatalf("deploy: %v\n%s", err, out)
	}
	out, err = runCLI(t, "functions", "-nats-url", url, "-nats-creds", creds, "keys", "jsonapi", "create", "readme")
	key := strings.TrimSpace(out)
	if err != nil || strings.Count(key, ".") != 1 || strings.Contains(key, "\n") {
		t.Fatalf("keys create: %v\n%s", err, out)
	}

	base := h.HTTPURL() + "/fn/jsonapi"
	call := func(method, path string, header map[string]string, body string) (int, http.Header, string) {
		t.Helper()
		if header == nil {
			header = map[string]string{}
		}
		if _, ok := header["x-functions-key"]; !ok {
			header["x-functions-key"] = key
		}
		return nodetest.HTTP(t, method, base+path, header, body)
	}
	var st int
	var hdr http.Header
	var body string
	eventually(t, 10*time.Second, "the key reaches the host's copy", func() bool {
		st, hdr, body = call("GET", "/employees/Sales/000003", nil, "")
		return st == http.StatusOK
	})
	var david struct {
		Department, ID, FirstName, LastName, Email, ETag string
		Salary                                           int64
	}
	if err := json.Unmarshal([]byte(body), &david); err != nil || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("GET Sales/000003: %v %s", err, body)
	}
	etag := hdr.Get("ETag")
	if want := `{"department":"Sales","id":"000003","firstName":"David","lastName":"Brown","email":"david.brown@contoso.com","salary":51100,"etag":` + jsonString(etag) + `}`; body != want || !strings.HasPrefix(etag, `W/"`) {
		t.Fatalf("GET Sales/000003:\n%s\nETag %s, want\n%s", body, etag, want)
	}

	// The refusals of the host, before the function runs.
	for _, c := range []struct {
		what, key string
	}{{"no key", ""}, {"a wrong key", key + "x"}} {
		st, _, body := nodetest.HTTP(t, "GET", base+"/employees/Sales/000003", map[string]string{"x-functions-key": c.key}, "")
		if st != http.StatusUnauthorized || nodetest.ErrorCode(body) != "Unauthorized" {
			t.Fatalf("%s: %d %s", c.what, st, body)
		}
	}
	if st, _, body := call("DELETE", "/employees/Sales/000003", nil, ""); st != http.StatusMethodNotAllowed || nodetest.ErrorCode(body) != "MethodNotAllowed" {
		t.Fatalf("DELETE: %d %s", st, body)
	}

	// Reads: absent, bad keys, the index.
	for _, c := range []struct {
		path   string
		status int
		want   string
	}{
		{"/employees/Sales/999999", 404, `{"error":{"code":"ResourceNotFound","message":"no employee Sales/999999"}}`},
		{"/employees/Sa%20les/000003", 400, `{"error":{"code":"InvalidInput","message":"a department and an id are 1 to 64 letters, digits, '-' or '_'"}}`},
		{"/employees?email=nobody@contoso.com", 200, `{"email":"nobody@contoso.com","employees":[]}`},
		{"/employees", 400, `{"error":{"code":"InvalidInput","message":"give ?email=<address>"}}`},
		{"/employees?email=david.brown%40contoso.com", 200, `{"email":"david.brown@contoso.com","employees":[` + body + `]}`},
	} {
		if st, _, got := call("GET", c.path, nil, ""); st != c.status || got != c.want {
			t.Fatalf("GET %s: %d\n%s\nwant %d\n%s", c.path, st, got, c.status, c.want)
		}
	}

	// A hire: 201, then read back and found through the index.
	zoe := `{"firstName":"Zoe","lastName":"Adams","email":"zoe.adams@contoso.com","salary":48000}`
	st, hdr, body = call("PUT", "/employees/Sales/000099", nil, zoe)
	if st != http.StatusCreated || hdr.Get("Location") != "/fn/jsonapi/employees/Sales/000099" || body != `{"department":"Sales","id":"000099"}` {
		t.Fatalf("PUT a hire: %d %v %s", st, hdr, body)
	}
	eventually(t, 10*time.Second, "the hire found through the index", func() bool {
		_, _, body = call("GET", "/employees?email=zoe.adams@contoso.com", nil, "")
		return strings.Contains(body, `"id":"000099","firstName":"Zoe"`)
	})
	if st, _, body := call("PUT", "/employees/Sales/000099", nil, zoe); st != http.StatusConflict || nodetest.ErrorCode(body) != "EntityAlreadyExists" {
		t.Fatalf("PUT a hire again: %d %s", st, body)
	}

	// A raise with the ETag read, then the same ETag again: stale.
	raise := `{"firstName":"David","lastName":"Brown","email":"david.brown@contoso.com","salary":56000}`
	if st, _, body := call("PUT", "/employees/Sales/000003", map[string]string{"If-Match": etag}, raise); st != http.StatusNoContent || body != "" {
		t.Fatalf("PUT with the ETag read: %d %s", st, body)
	}
	eventually(t, 10*time.Second, "the raise read back with a new ETag", func() bool {
		_, hdr, body = call("GET", "/employees/Sales/000003", nil, "")
		return strings.Contains(body, `"salary":56000`) && hdr.Get("ETag") != etag
	})
	if st, _, body := call("PUT", "/employees/Sales/000003", map[string]string{"If-Match": etag}, strings.Replace(raise, "56000", "99000", 1)); st != http.StatusPreconditionFailed || nodetest.ErrorCode(body) != "UpdateConditionNotSatisfied" {
		t.Fatalf("PUT with a stale ETag: %d %s", st, body)
	}
	if st, _, body := call("PUT", "/employees/Sales/000404", map[string]string{"If-Match": "*"}, raise); st != http.StatusNotFound || nodetest.ErrorCode(body) != "ResourceNotFound" {
		t.Fatalf("PUT If-Match * of no employee: %d %s", st, body)
	}
	for _, bad := range []string{`{"firstName":"David"`, `{"firstName":"David","lastName":"Brown","email":"d@c","salary":1,"manager":"x"}`,
		`{"firstName":"David","lastName":"Brown","email":"d@c"}`, `{"firstName":"David","lastName":"Brown","email":"no-at","salary":1}`,
		`{"firstName":"","lastName":"Brown","email":"d@c","salary":1}`, `{"id":"000004","firstName":"David","lastName":"Brown","email":"d@c","salary":1}`,
		`{"firstName":"David","lastName":"Brown","email":"d@c","salary":1} {}`} {
		if st, _, body := call("PUT", "/employees/Sales/000003", map[string]string{"If-Match": "*"}, bad); st != http.StatusBadRequest || nodetest.ErrorCode(body) != "InvalidInput" {
			t.Fatalf("PUT %s: %d %s", bad, st, body)
		}
	}
	// Nothing the refusals sent was written: the raise is what is there.
	if _, hdr2, body := call("GET", "/employees/Sales/000003", nil, ""); !strings.Contains(body, `"salary":56000`) || hdr2.Get("ETag") != hdr.Get("ETag") {
		t.Fatalf("after the refusals: %s, ETag %s, want %s", body, hdr2.Get("ETag"), hdr.Get("ETag"))
	}
	if st, _, body := call("GET", "/employees/Sales/000404", nil, ""); st != http.StatusNotFound {
		t.Fatalf("GET Sales/000404 after the refused PUT: %d %s", st, body)
	}
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
