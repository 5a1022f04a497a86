package main

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
)

// TestClusterCLI: "host cluster" lists the running node as live, by the
// name it reports, and refuses arguments.
func TestClusterCLI(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{Functions: node.FunctionsConfig{NoBuiltins: true}})
	url, creds := h.ClientURL(), h.NATSCredsFile()
	out, err := runCLI(t, "cluster", "-nats-url", url, "-nats-creds", creds)
	if err != nil {
		t.Fatalf("cluster: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "HOST") || strings.Fields(lines[1])[1] != "yes" || !strings.Contains(lines[1], ":") {
		t.Fatalf("cluster:\n%s", out)
	}
	if out, err := runCLI(t, "cluster", "-nats-url", url, "-nats-creds", creds, "extra"); err == nil {
		t.Fatalf("cluster with an argument: %s", out)
	}
}
