package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
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

var updateThirdParty = flag.Bool("update-thirdparty", false, "rewrite functions/sdk/_thirdparty from the module cache")

// offlineGo makes the go commands this process starts work as on a
// machine with only Go installed: no proxy, no workspace, an empty module
// cache, vendor/ only, no toolchain download.
func offlineGo(t *testing.T) {
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOFLAGS", "-mod=vendor")
	t.Setenv("GOWORK", "off")
	t.Setenv("GOTOOLCHAIN", "local")
	t.Setenv("GOMODCACHE", t.TempDir())
}

func goIn(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// TestInitFunctionDeploysAndRuns: a function written by `host init
// function` outside the repository vets, tests and builds with no
// network and an empty module cache, deploys to a real node, and runs
// there: a queue message and a direct request each add to the entity it
// keeps; a request it cannot parse fails with Cairn-Error and changes
// nothing.
func TestInitFunctionDeploysAndRuns(t *testing.T) {
	offlineGo(t)
	dir := filepath.Join(t.TempDir(), "orders")
	out, err := runCLI(t, "init", "function", "-module", "example.com/shop/orders", dir)
	if err != nil || !strings.Contains(out, "wrote function orders (module example.com/shop/orders)") {
		t.Fatalf("init: %v\n%s", err, out)
	}
	// Without -mod=vendor too: the go command picks vendor/ by itself.
	goIn(t, dir, []string{"GOFLAGS="}, "vet", "./...")
	if out := goIn(t, dir, nil, "test", "-count=1", "./..."); !strings.Contains(out, "ok") {
		t.Fatalf("go test: %s", out)
	}
	goIn(t, dir, []string{"GOOS=wasip1", "GOARCH=wasm"}, "vet", "./...")

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
	// deploy builds the directory with the go command, under this
	// process's environment (offlineGo).
	out, err = runCLI(t, "deploy", "-nats-url", url, "-nats-creds", creds, dir)
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

	msg, err = nc.Request("cairn.fn.orders", []byte(`{"amount": 5}`), 30*time.Second)
	if err != nil || !strings.Contains(msg.Header.Get(functions.HeaderReplyError), "the order names no customer") {
		t.Fatalf("a request without a customer: %v %q %v", err, msg.Data, msg.Header)
	}
	if n, s, _ := totals(); n != 2 || s != 17.5 {
		t.Fatalf("a failed request changed the total: %d orders, %v in all", n, s)
	}
}

// TestInitFunctionRefuses: a directory that is not empty is refused
// without -force and left as it was; bad module and function names are
// refused before anything is written; -force writes over a directory,
// keeping the files init does not write and replacing vendor/ whole.
func TestInitFunctionRefuses(t *testing.T) {
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notes, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "init", "function", "-module", "example.com/myfn", dir); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Fatalf("init into a non-empty directory: %v", err)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"notes.txt"}) {
		t.Fatalf("a refused init left %v", names)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-module", "bad path"}, "module path"},
		{[]string{"-module", "example.com//x"}, "module path"},
		{[]string{"-module", "-x"}, "module path"},
		{[]string{"-module", "github.com/cairn-dev/cairn/myfn"}, "Cairn's own"},
		{[]string{"-module", "example.com/myfn", "-name", "Bad_Name"}, "function name"},
		{[]string{"-module", "example.com/x"}, "function name"}, // "x" is too short
		{nil, "function name"}, // the directory's base name, My_Fn
	} {
		d := filepath.Join(t.TempDir(), "My_Fn")
		args := append(append([]string{"init", "function"}, tc.args...), d)
		if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("init %v: %v, want an error about the %s", tc.args, err, tc.want)
		}
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("init %v wrote %s: %v", tc.args, d, err)
		}
	}
	if _, err := runCLI(t, "init", "thing", dir); err == nil {
		t.Error("init thing: no error")
	}

	stale := filepath.Join(dir, "vendor", "github.com", "old", "old.go")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("package old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, "init", "function", "-force", "-module", "example.com/myfn", dir); err != nil {
		t.Fatalf("init -force: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != "mine" {
		t.Fatalf("init -force changed notes.txt: %q %v", b, err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("init -force kept vendor/'s old file: %v", err)
	}
	want := []string{"README.md", "cairn.json", "go.mod", "main.go", "main_test.go", "notes.txt", "vendor"}
	if names := dirNames(t, dir); !slices.Equal(names, want) {
		t.Fatalf("init -force wrote %v, want %v", names, want)
	}
	var m functions.Manifest
	if b, err := os.ReadFile(filepath.Join(dir, "cairn.json")); err != nil || json.Unmarshal(b, &m) != nil || m.Name != "myfn" || m.Trigger.Queue != "myfn" || m.Validate() != nil {
		t.Fatalf("cairn.json: %+v %v", m, err)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// goPackage is what the tests read of `go list -json`.
type goPackage struct {
	ImportPath string
	Standard   bool
	Dir        string
	Module     *struct {
		Path, Version, Dir, GoVersion string
	}
}

// sdkDeps lists the packages functions/sdk imports, itself included,
// that are not in the standard library, for the guest (wasip1) and for
// this platform (where the SDK compiles for vet and tests).
func sdkDeps(t *testing.T) []goPackage {
	t.Helper()
	var all []goPackage
	for _, env := range [][]string{{"GOOS=wasip1", "GOARCH=wasm"}, nil} {
		dec := json.NewDecoder(strings.NewReader(goIn(t, "../..", append(env, "GOFLAGS="), "list", "-deps", "-json", "./functions/sdk")))
		for {
			var p goPackage
			if err := dec.Decode(&p); err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			if !p.Standard && !slices.ContainsFunc(all, func(q goPackage) bool { return q.ImportPath == p.ImportPath }) {
				all = append(all, p)
			}
		}
	}
	return all
}

// nonTestGoFiles lists the non-test Go files of a package directory.
func nonTestGoFiles(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			names = append(names, n)
		}
	}
	return names
}

// TestGuestSDKMatchesRepository: cairn.GuestPackages are exactly the
// packages of this module functions/sdk imports, and the vendor/ that
// init writes holds their non-test Go files byte for byte, so the SDK a
// function builds with is the one in this tree.
func TestGuestSDKMatchesRepository(t *testing.T) {
	var ours []string
	for _, p := range sdkDeps(t) {
		if rel, ok := strings.CutPrefix(p.ImportPath, cairn.ModulePath+"/"); ok {
			ours = append(ours, rel)
		}
	}
	slices.Sort(ours)
	if !slices.Equal(ours, cairn.GuestPackages) {
		t.Fatalf("functions/sdk imports %v of this module; cairn.GuestPackages (and guestsdk.go's go:embed lines) name %v", ours, cairn.GuestPackages)
	}
	files, err := vendorFiles()
	if err != nil {
		t.Fatal(err)
	}
	written := map[string][]byte{}
	for _, f := range files {
		written[f.name] = f.data
	}
	for _, pkg := range cairn.GuestPackages {
		for _, n := range nonTestGoFiles(t, filepath.Join("../..", pkg)) {
			want, err := os.ReadFile(filepath.Join("../..", pkg, n))
			if err != nil {
				t.Fatal(err)
			}
			name := "vendor/" + cairn.ModulePath + "/" + pkg + "/" + n
			if got, ok := written[name]; !ok || !bytes.Equal(got, want) {
				t.Errorf("%s: init writes %d bytes (written: %v), the repository has %d", name, len(got), ok, len(want))
			}
			delete(written, name)
		}
	}
	for name := range written {
		if strings.HasPrefix(name, "vendor/"+cairn.ModulePath+"/") {
			t.Errorf("init writes %s, which the repository does not have", name)
		}
	}
}

// TestGuestSDKThirdPartyMatchesModuleCache: functions/sdk/_thirdparty
// holds, byte for byte, the non-test Go files and licence of every
// package outside this module that functions/sdk imports, at the
// versions go.mod requires, and its modules.txt names them with their
// modules' go versions. With -update-thirdparty it rewrites the copy.
func TestGuestSDKThirdPartyMatchesModuleCache(t *testing.T) {
	type module struct {
		path, version, dir, goVersion string
		pkgs                          []goPackage
	}
	var mods []*module
	for _, p := range sdkDeps(t) {
		if p.Module == nil || p.Module.Path == cairn.ModulePath {
			continue
		}
		i := slices.IndexFunc(mods, func(m *module) bool { return m.path == p.Module.Path })
		if i < 0 {
			mods = append(mods, &module{path: p.Module.Path, version: p.Module.Version, dir: p.Module.Dir, goVersion: p.Module.GoVersion})
			i = len(mods) - 1
		}
		mods[i].pkgs = append(mods[i].pkgs, p)
	}
	slices.SortFunc(mods, func(a, b *module) int { return strings.Compare(a.path, b.path) })

	// want: every file of the copy, by its path under _thirdparty.
	want := map[string][]byte{}
	var modulesTxt strings.Builder
	for _, m := range mods {
		modulesTxt.WriteString("# " + m.path + " " + m.version + "\n## explicit; go " + m.goVersion + "\n")
		lic, err := os.ReadFile(filepath.Join(m.dir, "LICENSE"))
		if err != nil {
			t.Fatalf("module %s: %v (the copy needs its licence)", m.path, err)
		}
		want[m.path+"/LICENSE"] = lic
		slices.SortFunc(m.pkgs, func(a, b goPackage) int { return strings.Compare(a.ImportPath, b.ImportPath) })
		for _, p := range m.pkgs {
			modulesTxt.WriteString(p.ImportPath + "\n")
			for _, n := range nonTestGoFiles(t, p.Dir) {
				b, err := os.ReadFile(filepath.Join(p.Dir, n))
				if err != nil {
					t.Fatal(err)
				}
				want[p.ImportPath+"/"+n+".txt"] = b
			}
		}
	}
	want["modules.txt"] = []byte(modulesTxt.String())

	if *updateThirdParty {
		root := filepath.Join("../..", filepath.FromSlash(cairn.ThirdPartyDir))
		readme, err := os.ReadFile(filepath.Join(root, "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(root); err != nil {
			t.Fatal(err)
		}
		want["README.md"] = readme
		for name, b := range want {
			p := filepath.Join(root, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("rewrote %s: rebuild the host to embed it", root)
		return
	}

	err := fs.WalkDir(cairn.GuestSDK, cairn.ThirdPartyDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := strings.TrimPrefix(p, cairn.ThirdPartyDir+"/")
		if name == "README.md" {
			return nil
		}
		got, err := cairn.GuestSDK.ReadFile(p)
		if err != nil {
			return err
		}
		if w, ok := want[name]; !ok {
			t.Errorf("the copy has %s, which the SDK does not need", name)
		} else if !bytes.Equal(got, w) {
			t.Errorf("the copy's %s differs from the module cache's (%d bytes, want %d)", name, len(got), len(w))
		}
		delete(want, name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range want {
		t.Errorf("the copy lacks %s", name)
	}
	if t.Failed() {
		t.Log("refresh the copy: go test ./cmd/host -run TestGuestSDKThirdPartyMatchesModuleCache -update-thirdparty")
	}
}
