package node_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/console"
	"github.com/cairn-dev/cairn/cmd/internal/hostcheck"
	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/admin"
)

// signedLite signs a request with SharedKeyLite as account with its
// base64 key, as the SDKs do.
func signedLite(account, key string) func(*http.Request) {
	return func(req *http.Request) {
		date := time.Now().UTC().Format(http.TimeFormat)
		req.Header.Set("x-ms-date", date)
		k, _ := base64.StdEncoding.DecodeString(key)
		m := hmac.New(sha256.New, k)
		m.Write([]byte(date + "\n/" + account + req.URL.EscapedPath()))
		req.Header.Set("Authorization", "SharedKeyLite "+account+":"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
}

// bearer authorises a request with the operator token.
func bearer(token string) func(*http.Request) {
	return func(req *http.Request) { req.Header.Set("Authorization", "Bearer "+token) }
}

// hostCall is one request of the rebinding tests: GET path on the node,
// with Host host, authorised by auth (nil: not at all).
type hostCall struct {
	name, path, host string
	auth             func(*http.Request)
	status           int
	code             string // the error code of a refusal
}

// do sends the call to base (the node's URL) and checks its answer; it
// returns the body.
func (hc hostCall) do(t *testing.T, base string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+hc.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = hc.host
	req.Header.Set("Accept", "application/json;odata=nometadata")
	if hc.auth != nil {
		hc.auth(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != hc.status || resp.Header.Get("x-ms-error-code") != hc.code {
		t.Errorf("%s: GET %s with Host %s: %d %q, want %d %q\n%.200s", hc.name, hc.path, hc.host, resp.StatusCode, resp.Header.Get("x-ms-error-code"), hc.status, hc.code, b)
	}
	if hc.code != "" {
		var e struct {
			Error struct{ Code string } `json:"odata.error"`
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Error.Code != hc.code {
			t.Errorf("%s: the refusal is not Azure's coded error: %.200s", hc.name, b)
		}
	}
	return string(b)
}

// TestDNSRebinding: a page that rebinds its DNS name to the node makes the
// browser send requests signed with the development account's public key
// and the page's name in Host, without an Origin header. They are refused
// with HostNotAllowed, having read nothing, and so are the operators'
// API, /metrics and the console under such a name, even with the token;
// the health probes answer any Host, and IP literals and loopback names
// are served. Another account's requests, signed with its secret key,
// are not checked while no names are listed. The refusals are counted in
// /metrics and logged at most every 10 s.
func TestDNSRebinding(t *testing.T) {
	contoso, err := httpapi.ParseAccount("contoso:" + contosoKey)
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	th := startNode(t, node.Config{
		API: httpapi.Config{Accounts: []httpapi.Account{contoso}},
		Log: slog.New(slog.NewTextHandler(logs, nil)),
	})
	mustTable(t, th.c, "Secrets")
	if _, err := th.c.Insert(ctxT(t), "Secrets", engine.NewEntity("p", "1", engine.Property{Name: "Pin", Value: engine.String("4711-secret")})); err != nil {
		t.Fatal(err)
	}
	if _, err := accountService(t, th.h, "contoso", contosoKey).CreateTable(ctxT(t), "Orders", nil); err != nil {
		t.Fatal(err)
	}
	base := th.h.HTTPURL()
	_, port, _ := net.SplitHostPort(hostOf(th.h))
	rebound := "rebind.attacker.example:" + port
	dev, tok := signedLite(httpapi.DevAccountName, httpapi.DevAccountKey), bearer(th.h.OperatorToken())
	const refused = "HostNotAllowed"

	start := time.Now()
	refusals := 0
	for _, hc := range []hostCall{
		// The attack, and the node's other doors under the rebound name.
		{"the development account's entities", "/devstoreaccount1/Secrets()", rebound, dev, 403, refused},
		{"the development account's tables", "/devstoreaccount1/Tables", rebound, dev, 403, refused},
		{"a rebound name without a port", "/devstoreaccount1/Secrets()", "rebind.attacker.example", dev, 403, refused},
		{"the operators' API", admin.Prefix + "functions", rebound, tok, 403, refused},
		{"metrics", "/metrics", rebound, tok, 403, refused},
		{"the operators' door to the tables", httpapi.OperatorPrefix + "devstoreaccount1/Secrets()", rebound, tok, 403, refused},
		{"the console", console.Path, rebound, nil, 403, refused},
		// The health probes answer any Host.
		{"healthz", node.HealthPath, rebound, nil, 200, ""},
		{"readyz", node.ReadyPath, rebound, nil, 200, ""},
		// IP literals and loopback names.
		{"the listener's address", "/devstoreaccount1/Secrets()", "127.0.0.1:" + port, dev, 200, ""},
		{"another IP literal", "/devstoreaccount1/Secrets()", "10.9.8.7:" + port, dev, 200, ""},
		{"IPv6 loopback", "/devstoreaccount1/Secrets()", "[::1]:" + port, dev, 200, ""},
		{"localhost", "/devstoreaccount1/Secrets()", "localhost:" + port, dev, 200, ""},
		{"a name under localhost", "/devstoreaccount1/Secrets()", "app.localhost:" + port, dev, 200, ""},
		{"metrics by localhost", "/metrics", "localhost:" + port, tok, 200, ""},
		// A secret key: not checked while no names are listed.
		{"another account", "/contoso/Orders()", rebound, signedLite("contoso", contosoKey), 200, ""},
	} {
		body := hc.do(t, base)
		if hc.code != "" {
			refusals++
			if strings.Contains(body, "4711-secret") {
				t.Errorf("%s: the refusal carries the entity: %s", hc.name, body)
			}
		}
	}
	m := scrapeMetrics(t, th)
	if got := m[`cairn_http_errors_total{code="HostNotAllowed"}`]; got != float64(refusals) {
		t.Errorf("cairn_http_errors_total{code=\"HostNotAllowed\"} %v, want %d", got, refusals)
	}
	lines := strings.Count(logs.String(), "its Host is not a name this node answers")
	if most := 1 + int(time.Since(start)/(10*time.Second)); lines < 1 || lines > most {
		t.Errorf("%d log lines about %d refused Hosts, want 1 to %d (one every 10 s)", lines, refusals, most)
	}
}

// TestHTTPHostsFlag: names the operator lists (-http-hosts) are served;
// once names are listed every request is checked, another account's
// too, while IP literals and loopback names are still served.
func TestHTTPHostsFlag(t *testing.T) {
	contoso, err := httpapi.ParseAccount("contoso:" + contosoKey)
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := hostcheck.Parse([]string{"tables.example.com", "Console.Example.com"})
	if err != nil {
		t.Fatal(err)
	}
	th := startNode(t, node.Config{API: httpapi.Config{Accounts: []httpapi.Account{contoso}, Hosts: hosts}})
	mustTable(t, th.c, "Listed")
	if _, err := accountService(t, th.h, "contoso", contosoKey).CreateTable(ctxT(t), "Orders", nil); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(hostOf(th.h))
	dev, con := signedLite(httpapi.DevAccountName, httpapi.DevAccountKey), signedLite("contoso", contosoKey)
	for _, hc := range []hostCall{
		{"a listed name", "/devstoreaccount1/Listed()", "tables.example.com:" + port, dev, 200, ""},
		{"a listed name, in another case", "/metrics", "console.EXAMPLE.com:" + port, bearer(th.h.OperatorToken()), 200, ""},
		{"a listed name, another account", "/contoso/Orders()", "tables.example.com:" + port, con, 200, ""},
		{"another name", "/devstoreaccount1/Listed()", "other.example.com:" + port, dev, 403, "HostNotAllowed"},
		{"another name, another account", "/contoso/Orders()", "other.example.com:" + port, con, 403, "HostNotAllowed"},
		{"a listed name's subdomain", "/contoso/Orders()", "a.tables.example.com:" + port, con, 403, "HostNotAllowed"},
		{"an IP literal", "/contoso/Orders()", "127.0.0.1:" + port, con, 200, ""},
		{"localhost", "/devstoreaccount1/Listed()", "localhost:" + port, dev, 200, ""},
	} {
		hc.do(t, th.h.HTTPURL())
	}
}
