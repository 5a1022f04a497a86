package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/functions/guesttest"
)

// TestDeployReportsWhatTheNodeDid: on a node with a 64 MiB function
// budget, deploying a function whose worst case is 128 MiB (32 MiB × 4)
// fails with the node's reason and the node runs nothing; the same
// module at 32 MiB × 2 prints the node that loaded it, and the node runs
// that version by the time deploy returns.
func TestDeployReportsWhatTheNodeDid(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{Functions: node.FunctionsConfig{MemoryMB: 64}})
	url, creds := h.ClientURL(), h.NATSCredsFile()
	dir := t.TempDir()
	module := filepath.Join(dir, "roomy.wasm")
	if err := os.WriteFile(module, guesttest.Module(t, guesttest.Build{Dir: "../../examples/archive"}), 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "roomy.json")
	if err := os.WriteFile(manifest, []byte(`{"name": "roomy", "trigger": {"queue": "roomy"}, "memoryMB": 32, "concurrency": 4}`), 0o644); err != nil {
		t.Fatal(err)
	}

	out, err := runCLI(t, "deploy", "-nats-url", url, "-nats-creds", creds, module)
	if err == nil || !strings.Contains(err.Error(), "roomy version 1 is deployed, but node ") ||
		!strings.Contains(err.Error(), "refused to load it") || !strings.Contains(err.Error(), "does not fit in the node's function memory budget (64 MiB") {
		t.Fatalf("deploy over the budget: %v\n%s", err, out)
	}
	t.Log(err)
	if strings.Contains(out, "deployed") {
		t.Errorf("deploy printed %q for a version no node loaded", out)
	}
	if v, ok := h.Functions().Version("roomy"); ok {
		t.Fatalf("the node runs roomy version %d", v)
	}

	out, err = runCLI(t, "deploy", "-nats-url", url, "-nats-creds", creds, "-concurrency", "2", module)
	if err != nil || !strings.Contains(out, "deployed roomy version 2: loaded on node ") {
		t.Fatalf("deploy within the budget: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(out))
	if v, ok := h.Functions().Version("roomy"); !ok || v != 2 {
		t.Fatalf("deploy returned while the node runs version %d (%v), want 2", v, ok)
	}
}
