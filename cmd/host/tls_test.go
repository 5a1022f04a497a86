package main

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
)

// TestCLIOverTLS: with -tls-cert the embedded NATS server requires TLS;
// the operators' commands reach it with a tls:// URL and -nats-ca, and
// not without trusting the certificate.
func TestCLIOverTLS(t *testing.T) {
	certFile, keyFile, _ := nodetest.SelfSigned(t, t.TempDir())
	h, _ := nodetest.Start(t, node.Config{TLSCert: certFile, TLSKey: keyFile})
	url := h.ClientURL()
	if !strings.HasPrefix(url, "tls://") {
		t.Fatalf("client URL %s with TLS", url)
	}
	if out, err := runCLI(t, "enqueue", "-nats-url", url, "-nats-ca", certFile, "tls-probe", "hello"); err != nil || !strings.Contains(out, "enqueued 1") {
		t.Fatalf("enqueue over TLS: %v %s", err, out)
	}
	if _, err := runCLI(t, "enqueue", "-nats-url", url, "tls-probe", "hello"); err == nil {
		t.Fatal("the CLI connected without trusting the certificate")
	}
}
