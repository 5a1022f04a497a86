package main

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/functions"
)

// npmIn runs npm in dir with npm's cache in the user's cache directory
// (cairn/npm), so that only a first run needs the registry. Without npm,
// or when npm cannot fetch a package, the test is skipped, saying so.
func npmIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is needed to build an AssemblyScript function; skipped")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is needed to build an AssemblyScript function; skipped")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	cmd := exec.Command(npm, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(cache, "cairn", "npm"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		if args[0] == "install" {
			t.Skipf("npm install failed (no registry?); skipped:\n%s", out)
		}
		t.Fatalf("npm %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// TestInitAssemblyScriptFunctionDeploysAndRuns: a function written by
// `host init function -lang assemblyscript` outside the repository builds
// with `npm install && npm run build`, its module deploys as it is with
// its cairn.json, and runs on a real node as the Go template does
// (TestInitFunctionDeploysAndRuns): a queue message and a direct request
// each add to the entity it keeps; a request it cannot parse fails with
// Cairn-Error and changes nothing. Skipped without node and npm.
func TestInitAssemblyScriptFunctionDeploysAndRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "orders")
	out, err := runCLI(t, "init", "function", "-lang", "assemblyscript", dir)
	if err != nil || !strings.Contains(out, "wrote function orders (AssemblyScript)") {
		t.Fatalf("init: %v\n%s", err, out)
	}
	npmIn(t, dir, "install", "--no-audit", "--no-fund", "--prefer-offline")
	npmIn(t, dir, "run", "build")
	module := filepath.Join(dir, "build", "orders.wasm")
	info, err := os.Stat(module)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("orders.wasm: %d bytes", info.Size())

	ctx := context.Background()
	h, _ := nodetest.Start(t, node.Config{})
	url, creds := h.ClientURL(), h.NATSCredsFile()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := client.New(nc)
	if _, err := c.CreateTable(ctx, "Totals"); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "deploy", "-nats-url", url, "-nats-creds", creds, "-manifest", filepath.Join(dir, "cairn.json"), module)
	if err != nil || !strings.Contains(out, "deployed orders version 1: loaded on 1 host(s)") || !strings.Contains(out, "trigger queue orders") {
		t.Fatalf("deploy: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "enqueue", "-nats-url", url, "-nats-creds", creds, "orders", `{"customer": "alice", "amount": 12.5}`); err != nil || !strings.Contains(out, "enqueued 1") {
		t.Fatalf("enqueue: %v %s", err, out)
	}
	totals := func() (int64, float64, bool) {
		e, _, err := c.Retrieve(ctx, "Totals", "alice", "total")
		if err != nil {
			return 0, 0, false
		}
		n, _ := e.Get("Orders")
		s, _ := e.Get("Sum")
		if n.Type() != engine.TypeInt64 || s.Type() != engine.TypeDouble {
			t.Fatalf("the entity's properties: %#v", e.Properties)
		}
		return n.Int(), s.Float(), true
	}
	eventually(t, 30*time.Second, "the queue message's total", func() bool { _, _, ok := totals(); return ok })
	if n, s, _ := totals(); n != 1 || s != 12.5 {
		t.Fatalf("after the queue message: %d orders, %v in all", n, s)
	}

	msg, err := nc.Request("cairn.fn.orders", []byte(`{"customer": "alice", "amount": 5}`), 30*time.Second)
	if err != nil || msg.Header.Get(functions.HeaderReplyError) != "" || string(msg.Data) != "alice: 2 orders, 17.50 in all" {
		t.Fatalf("direct request: %v %q %v", err, msg.Data, msg.Header)
	}
	if n, s, _ := totals(); n != 2 || s != 17.5 {
		t.Fatalf("after the direct request: %d orders, %v in all", n, s)
	}

	for body, want := range map[string]string{
		`{"amount": 5}`:                    "the order names no customer",
		`not json`:                         "the body is not a JSON object",
		`{"customer": 7, "amount": 1}`:     "customer is not a string",
		`{"customer": "alice", "amount":}`: "want a number",
	} {
		msg, err = nc.Request("cairn.fn.orders", []byte(body), 30*time.Second)
		if err != nil || !strings.Contains(msg.Header.Get(functions.HeaderReplyError), want) {
			t.Fatalf("request %s: %v %q %v, want an error saying %q", body, err, msg.Data, msg.Header, want)
		}
	}
	msg, err = nc.Request("cairn.fn.orders", []byte(`{"note": {"a": [1, true, null, "x"]}, "customer": "bob", "amount": 1e1}`), 30*time.Second)
	if err != nil || string(msg.Data) != "bob: 1 orders, 10.00 in all" {
		t.Fatalf("a request with another field: %v %q %v", err, msg.Data, msg.Header)
	}
	if n, s, _ := totals(); n != 2 || s != 17.5 {
		t.Fatalf("a failed request changed the total: %d orders, %v in all", n, s)
	}
}

// TestInitAssemblyScriptFunctionFiles: the project holds the repository's
// SDK byte for byte and its compiler options; -module is refused; -force
// replaces assembly/cairn/ whole and keeps the files init does not write.
func TestInitAssemblyScriptFunctionFiles(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "assembly", "cairn", "old.ts")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("// old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "init", "function", "-lang", "assemblyscript", "-name", "myfn", dir); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Fatalf("init into a non-empty directory: %v", err)
	}
	if _, err := runCLI(t, "init", "function", "-lang", "assemblyscript", "-module", "example.com/x", filepath.Join(t.TempDir(), "x")); err == nil || !strings.Contains(err.Error(), "-module") {
		t.Fatalf("init -module: %v", err)
	}
	if _, err := runCLI(t, "init", "function", "-lang", "rust", filepath.Join(t.TempDir(), "x")); err == nil || !strings.Contains(err.Error(), "-lang") {
		t.Fatalf("init -lang rust: %v", err)
	}
	if _, err := runCLI(t, "init", "function", "-lang", "assemblyscript", "-name", "Bad_Name", filepath.Join(t.TempDir(), "x")); err == nil || !strings.Contains(err.Error(), "function name") {
		t.Fatalf("init -name Bad_Name: %v", err)
	}
	if out, err := runCLI(t, "init", "function", "-lang", "assemblyscript", "-force", "-name", "myfn", dir); err != nil {
		t.Fatalf("init -force: %v\n%s", err, out)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Fatal("init -force kept assembly/cairn/old.ts")
	}
	want := []string{".gitignore", "README.md", "asconfig.json", "assembly", "cairn.json", "package.json"}
	if names := dirNames(t, dir); !slices.Equal(names, want) {
		t.Fatalf("init wrote %v, want %v", names, want)
	}
	sdk := filepath.Join("..", "..", filepath.FromSlash(cairn.AssemblyScriptSDKDir))
	same := func(repo, written string) {
		t.Helper()
		a, err := os.ReadFile(repo)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(written)
		if err != nil || string(a) != string(b) {
			t.Errorf("%s differs from %s (%v)", written, repo, err)
		}
	}
	same(filepath.Join(sdk, "asconfig.json"), filepath.Join(dir, "asconfig.json"))
	sources, err := fs.Glob(os.DirFS(filepath.Join(sdk, "assembly")), "*.ts")
	if err != nil || len(sources) == 0 {
		t.Fatalf("the SDK's sources: %v %v", sources, err)
	}
	for _, n := range sources {
		same(filepath.Join(sdk, "assembly", n), filepath.Join(dir, "assembly", "cairn", n))
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil || !strings.Contains(string(b), `"name": "myfn"`) || !strings.Contains(string(b), "build/myfn.wasm") {
		t.Fatalf("package.json: %s %v", b, err)
	}
}
