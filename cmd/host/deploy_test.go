package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/functions/guesttest"
)

// writeRoomy writes the archive example as roomy.wasm with a manifest of
// 32 MiB × 4 into a new directory and returns the module's path.
func writeRoomy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	module := filepath.Join(dir, "roomy.wasm")
	if err := os.WriteFile(module, guesttest.Module(t, guesttest.Build{Dir: "../../examples/archive"}), 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "roomy.json")
	if err := os.WriteFile(manifest, []byte(`{"name": "roomy", "trigger": {"queue": "roomy"}, "memoryMB": 32, "concurrency": 4}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return module
}

// TestDeployReportsWhatTheNodeDid: on a node with a 64 MiB function
// budget, deploying a function whose worst case is 128 MiB (32 MiB × 4)
// fails with the node's reason and the node runs nothing; the same
// module at 32 MiB × 2 prints the node that loaded it, and the node runs
// that version by the time deploy returns.
func TestDeployReportsWhatTheNodeDid(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{Functions: node.FunctionsConfig{MemoryMB: 64}})
	url, creds := h.ClientURL(), h.NATSCredsFile()
	module := writeRoomy(t)

	out, err := runCLI(t, "deploy", "-nats-url", url, "-nats-creds", creds, module)
	if err == nil || !strings.Contains(err.Error(), "roomy version 1 is deployed, but host ") ||
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
	if err != nil || !strings.Contains(out, "deployed roomy version 2: loaded on 1 host(s): ") {
		t.Fatalf("deploy within the budget: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(out))
	if v, ok := h.Functions().Version("roomy"); !ok || v != 2 {
		t.Fatalf("deploy returned while the node runs version %d (%v), want 2", v, ok)
	}
}

// TestDeployWaitsForEveryHost: two hosts on one NATS server, the first
// with a 96 MiB function budget, the second with 256 MiB. A wait shorter
// than deploy's settling time fails saying which hosts had not loaded the
// version (or that none answered yet). deploy, given only the first
// host's data directory (flags after the module), returns once both run
// the new version and names both; a version only the second can load
// fails naming the first, which keeps the version before.
func TestDeployWaitsForEveryHost(t *testing.T) {
	data1 := t.TempDir()
	h1, _ := nodetest.Start(t, node.Config{DataDir: data1, Functions: node.FunctionsConfig{MemoryMB: 96}})
	h2, _ := nodetest.Start(t, node.Config{NATSURL: h1.ClientURL(), NATSCreds: h1.NATSCredsFile(), Functions: node.FunctionsConfig{MemoryMB: 256}})
	module := writeRoomy(t)
	name1, err := filepath.Abs(data1)
	if err != nil {
		t.Fatal(err)
	}

	out, err := runCLI(t, "deploy", module, "-name", "quick", "-queue", "quick", "-concurrency", "1", "-data", data1, "-wait", "300ms")
	if err == nil || !strings.Contains(err.Error(), "quick version 1 is deployed, but ") ||
		!(strings.Contains(err.Error(), "had not loaded it when the wait ended") || strings.Contains(err.Error(), "no host answered")) {
		t.Fatalf("deploy with a wait shorter than the settling: %v\n%s", err, out)
	}
	t.Log(err)

	out, err = runCLI(t, "deploy", module, "-concurrency", "2", "-data", data1)
	if err != nil || !strings.Contains(out, "deployed roomy version 1: loaded on 2 host(s): ") {
		t.Fatalf("deploy to two hosts: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(out))
	for i, h := range []*node.Node{h1, h2} {
		if v, ok := h.Functions().Version("roomy"); !ok || v != 1 {
			t.Fatalf("deploy returned while host %d runs version %d (%v), want 1", i+1, v, ok)
		}
	}

	out, err = runCLI(t, "deploy", module, "-data", data1)
	if err == nil || !strings.Contains(err.Error(), "roomy version 2 is deployed, but host ") || !strings.Contains(err.Error(), name1+" refused to load it") {
		t.Fatalf("deploy that the first host refuses: %v\n%s", err, out)
	}
	t.Log(err)
	if v, _ := h1.Functions().Version("roomy"); v != 1 {
		t.Fatalf("the host that refused version 2 runs version %d, want 1", v)
	}
}

// TestDeployFindsNoHostBeforeBuilding: with a data directory whose host
// has stopped (its NATS URL and credentials left behind), deploy fails
// saying that no host answers and how to start one, without building
// the package (which does not compile: a build would fail otherwise).
// A directory no host ever ran on says so too.
func TestDeployFindsNoHostBeforeBuilding(t *testing.T) {
	data := t.TempDir()
	if _, _, _, _, err := natsauth.LoadOrCreate(data); err != nil {
		t.Fatal(err)
	}
	url := "nats://" + nodetest.FreeAddr(t)
	if err := natsauth.WriteURL(data, url); err != nil {
		t.Fatal(err)
	}
	pkg := t.TempDir()
	if err := os.WriteFile(filepath.Join(pkg, "main.go"), []byte("package main\n\nthis is not Go\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := runCLI(t, "deploy", "-data", data, "-name", "orders", pkg)
	if err == nil || !strings.HasPrefix(err.Error(), "no host answers at "+url) || !strings.Contains(err.Error(), "start one in another terminal with `host -data "+data+"`") {
		t.Fatalf("deploy without a host: %v", err)
	}
	t.Log(err)
	_, err = runCLI(t, "deploy", "-nats-url", url, "-nats-creds", natsauth.Path(data), "-name", "orders", pkg)
	if err == nil || !strings.HasPrefix(err.Error(), "no host answers at "+url) || !strings.Contains(err.Error(), "of -nats-url "+url) {
		t.Fatalf("deploy to -nats-url without a host: %v", err)
	}
	empty := t.TempDir()
	_, err = runCLI(t, "deploy", "-data", empty, "-name", "orders", pkg)
	if err == nil || !strings.Contains(err.Error(), "no host has run with -data "+empty+"; start one in another terminal") {
		t.Fatalf("deploy with a data directory no host ran on: %v", err)
	}
}
