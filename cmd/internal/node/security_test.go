package node_test

import (
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/cors"
	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/cmd/internal/operator"
	"github.com/cairn-dev/cairn/functions/admin"
)

// lockedBuffer is a log the node writes from its goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// operatorCall sends method url with the given headers and returns the
// status and the error code of the operators' API's JSON error.
func operatorCall(t *testing.T, client *http.Client, method, url string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader("probe"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Code string }
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Code
}

// TestOperatorAPIRefusesWithoutToken: the operators' API and /metrics
// refuse a request without the operator token, with a wrong one, or from a
// web origin not configured, and do nothing: the enqueue did not enqueue.
func TestOperatorAPIRefusesWithoutToken(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{})
	ctx := ctxT(t)
	base := h.HTTPURL()
	enqueue := base + admin.Prefix + "queues/probe"
	good := "Bearer " + h.OperatorToken()
	for _, c := range []struct {
		name   string
		method string
		url    string
		header map[string]string
		status int
		code   string
	}{
		{"enqueue without a token", "POST", enqueue, nil, 401, operator.CodeAuthenticationFailed},
		{"enqueue with a wrong token", "POST", enqueue, map[string]string{"Authorization": "Bearer " + strings.Repeat("0", 64)}, 401, operator.CodeAuthenticationFailed},
		{"enqueue with a SharedKey signature", "POST", enqueue, map[string]string{"Authorization": "SharedKey " + httpapi.DevAccountName + ":c2ln"}, 401, operator.CodeAuthenticationFailed},
		{"enqueue from a web page", "POST", enqueue, map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain"}, 403, operator.CodeOriginNotAllowed},
		{"enqueue from a web page with the token", "POST", enqueue, map[string]string{"Origin": "https://evil.example", "Authorization": good}, 403, operator.CodeOriginNotAllowed},
		{"requeue without a token", "POST", enqueue + "-poison/1/requeue", nil, 401, operator.CodeAuthenticationFailed},
		{"delete without a token", "DELETE", enqueue + "-poison/1", nil, 401, operator.CodeAuthenticationFailed},
		{"functions without a token", "GET", base + admin.Prefix + "functions", nil, 401, operator.CodeAuthenticationFailed},
		{"metrics without a token", "GET", base + "/metrics", nil, 401, operator.CodeAuthenticationFailed},
		{"metrics with a wrong token", "GET", base + "/metrics", map[string]string{"Authorization": "Bearer x" + h.OperatorToken()}, 401, operator.CodeAuthenticationFailed},
		{"preflight without -cors-origins", "OPTIONS", enqueue, map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}, 403, operator.CodeOriginNotAllowed},
	} {
		status, code := operatorCall(t, http.DefaultClient, c.method, c.url, c.header)
		if status != c.status || code != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, status, code, c.status, c.code)
		}
	}
	if n, err := h.Functions().Queues().Depth(ctx, "probe"); err != nil || n != 0 {
		t.Fatalf("refused enqueues left %d messages (%v)", n, err)
	}
	if status, _ := operatorCall(t, http.DefaultClient, "POST", enqueue, map[string]string{"Authorization": good}); status != http.StatusAccepted {
		t.Fatalf("enqueue with the token: %d", status)
	}
	if n, err := h.Functions().Queues().Depth(ctx, "probe"); err != nil || n != 1 {
		t.Fatalf("the enqueue with the token left %d messages (%v)", n, err)
	}
	if status, _ := operatorCall(t, http.DefaultClient, "GET", base+"/metrics", map[string]string{"Authorization": good}); status != http.StatusOK {
		t.Fatalf("/metrics with the token: %d", status)
	}
	if status, code := operatorCall(t, http.DefaultClient, "GET", enqueue+"-poison/999", map[string]string{"Authorization": good}); status != http.StatusNotFound || code != "ResourceNotFound" {
		t.Fatalf("an unknown poison message: %d %s", status, code)
	}
}

// TestOperatorPreflight: with -cors-origins an origin configured by name
// gets a preflight answer naming it; "*" does not open the operators' API.
func TestOperatorPreflight(t *testing.T) {
	origins, err := cors.Parse([]string{"https://dash.example", "*"})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := nodetest.Start(t, node.Config{API: httpapi.Config{CORS: origins}})
	url := h.HTTPURL() + admin.Prefix + "queues/probe"
	req, _ := http.NewRequest("OPTIONS", url, nil)
	req.Header.Set("Origin", "https://dash.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "https://dash.example" ||
		!strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "authorization") {
		t.Fatalf("preflight from a configured origin: %d %v", resp.StatusCode, resp.Header)
	}
	status, code := operatorCall(t, http.DefaultClient, "OPTIONS", url, map[string]string{"Origin": "https://other.example", "Access-Control-Request-Method": "POST"})
	if status != http.StatusForbidden || code != operator.CodeOriginNotAllowed {
		t.Fatalf("preflight from an origin admitted only by *: %d %s", status, code)
	}
	status, _ = operatorCall(t, http.DefaultClient, "POST", url, map[string]string{"Origin": "https://dash.example", "Authorization": "Bearer " + h.OperatorToken()})
	if status != http.StatusAccepted {
		t.Fatalf("enqueue from the configured origin with the token: %d", status)
	}
}

// TestOperatorTokenFile: the node creates its token file with mode 0600
// on first start, says where in the log (never the token), and keeps the
// token across restarts; a configured token wins over the file.
func TestOperatorTokenFile(t *testing.T) {
	dir := t.TempDir()
	var log lockedBuffer
	h, stop := nodetest.Start(t, node.Config{DataDir: dir, Log: slog.New(slog.NewTextHandler(&log, nil))})
	token := h.OperatorToken()
	path := filepath.Join(dir, operator.TokenFile)
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", st, err)
	}
	raw, _ := os.ReadFile(path)
	if strings.TrimSpace(string(raw)) != token || len(token) < operator.MinTokenLength {
		t.Fatalf("the file holds %q, the node uses %q", raw, token)
	}
	stop()
	if !strings.Contains(log.String(), path) || strings.Contains(log.String(), token) {
		t.Fatalf("the log should name the token file and never the token:\n%s", log.String())
	}
	if strings.Contains(log.String(), "beyond loopback") {
		t.Fatalf("a warning about exposure for a node on loopback:\n%s", log.String())
	}
	h, stop = nodetest.Start(t, node.Config{DataDir: dir})
	if h.OperatorToken() != token {
		t.Fatal("a restarted node made a new token")
	}
	stop()
	const mine = "operator-supplied-token-0001"
	h, _ = nodetest.Start(t, node.Config{DataDir: dir, OperatorToken: mine})
	if h.OperatorToken() != mine {
		t.Fatal("the configured token is not used")
	}
	if status, _ := operatorCall(t, http.DefaultClient, "GET", h.HTTPURL()+"/metrics", map[string]string{"Authorization": "Bearer " + token}); status != http.StatusUnauthorized {
		t.Fatalf("the file's token still admitted when another is configured: %d", status)
	}
}

// TestTLS: with -tls-cert and -tls-key the HTTP API serves HTTPS (the Azure
// Go SDK works against it, the operators' API too) and the embedded NATS
// server's client port requires TLS.
func TestTLS(t *testing.T) {
	certFile, keyFile, pool := nodetest.SelfSigned(t, t.TempDir())
	h, _ := nodetest.Start(t, node.Config{TLSCert: certFile, TLSKey: keyFile})
	if !strings.HasPrefix(h.HTTPURL(), "https://") {
		t.Fatalf("HTTPURL %s with TLS", h.HTTPURL())
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(client.CloseIdleConnections)
	ctx := ctxT(t)
	cred, err := aztables.NewSharedKeyCredential(httpapi.DevAccountName, httpapi.DevAccountKey)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := aztables.NewServiceClientWithSharedKey(h.HTTPURL()+"/"+httpapi.DevAccountName, cred,
		&aztables.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: client}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateTable(ctx, "Secure", nil); err != nil {
		t.Fatal(err)
	}
	tc := svc.NewClient("Secure")
	if _, err := tc.AddEntity(ctx, []byte(`{"PartitionKey":"p","RowKey":"r","Name":"x"}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.GetEntity(ctx, "p", "r", nil); err != nil {
		t.Fatal(err)
	}
	if status, _ := operatorCall(t, client, "GET", h.HTTPURL()+"/metrics", map[string]string{"Authorization": "Bearer " + h.OperatorToken()}); status != http.StatusOK {
		t.Fatalf("/metrics over HTTPS: %d", status)
	}
	// net/http answers plain HTTP on a TLS port with 400.
	if status, _ := operatorCall(t, http.DefaultClient, "GET", "http://"+strings.TrimPrefix(h.HTTPURL(), "https://")+"/metrics", map[string]string{"Authorization": "Bearer " + h.OperatorToken()}); status != http.StatusBadRequest {
		t.Fatalf("plain HTTP on the TLS port: %d", status)
	}

	if !strings.HasPrefix(h.ClientURL(), "tls://") {
		t.Fatalf("NATS client URL %s with TLS", h.ClientURL())
	}
	nc, err := nats.Connect(h.ClientURL(), nats.Secure(&tls.Config{RootCAs: pool}))
	if err != nil {
		t.Fatalf("NATS over TLS: %v", err)
	}
	nc.Close()
	if nc, err := nats.Connect(h.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("NATS accepted a client that does not trust the certificate")
	}
}
