package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
)

// TestCLIOverTLS: with -tls-cert the embedded NATS server requires TLS;
// the operators' commands reach it with a tls:// URL and -nats-ca (the
// URL the host recorded in its data directory too), and not without
// trusting the certificate.
func TestCLIOverTLS(t *testing.T) {
	certFile, keyFile, _ := nodetest.SelfSigned(t, t.TempDir())
	data := t.TempDir()
	h, _ := nodetest.Start(t, node.Config{DataDir: data, TLSCert: certFile, TLSKey: keyFile})
	url, creds := h.ClientURL(), h.NATSCredsFile()
	if !strings.HasPrefix(url, "tls://") {
		t.Fatalf("client URL %s with TLS", url)
	}
	if out, err := runCLI(t, "enqueue", "-nats-url", url, "-nats-creds", creds, "-nats-ca", certFile, "tls-probe", "hello"); err != nil || !strings.Contains(out, "enqueued 1") {
		t.Fatalf("enqueue over TLS: %v %s", err, out)
	}
	if _, err := runCLI(t, "enqueue", "-nats-url", url, "-nats-creds", creds, "tls-probe", "hello"); err == nil {
		t.Fatal("the CLI connected without trusting the certificate")
	}
	if out, err := runCLI(t, "enqueue", "tls-probe", "hello", "-data", data, "-nats-ca", certFile); err != nil || !strings.Contains(out, "enqueued 1") {
		t.Fatalf("enqueue over TLS with the data directory's URL: %v %s", err, out)
	}
}

// TestCLICredentials: the operators' commands need the node credentials;
// without them, or with wrong ones, they fail saying so.
func TestCLICredentials(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{})
	url := h.ClientURL()
	if _, err := runCLI(t, "enqueue", "-nats-url", url, "-data", t.TempDir(), "probe", "hello"); err == nil || !strings.Contains(err.Error(), "no NATS credentials") {
		t.Fatalf("without credentials: %v", err)
	}
	wrong := filepath.Join(t.TempDir(), "node.user")
	if err := os.WriteFile(wrong, []byte("cairn-node:not-the-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "enqueue", "-nats-url", url, "-nats-creds", wrong, "probe", "hello"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("with wrong credentials: %v", err)
	}
	// -data finds the credentials file of the host's data directory.
	data := filepath.Dir(filepath.Dir(h.NATSCredsFile()))
	if out, err := runCLI(t, "enqueue", "-nats-url", url, "-data", data, "probe", "hello"); err != nil || !strings.Contains(out, "enqueued 1") {
		t.Fatalf("with -data: %v %s", err, out)
	}
}
