package guesttest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// The AssemblyScript builds: the compiler is the npm package the SDK's
// package.json names, installed once into the user's cache directory
// (cairn/assemblyscript-<version>), so that only a first run needs the
// registry; the sources are compiled where they are, and the module is
// written to a temporary directory, never into the source tree.

// SDKDir is the directory of the AssemblyScript guest SDK.
func SDKDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "sdk", "assemblyscript")
}

// CompilerVersion is the version of the npm package assemblyscript the
// SDK's package.json pins.
func CompilerVersion() (string, error) {
	b, err := os.ReadFile(filepath.Join(SDKDir(), "package.json"))
	if err != nil {
		return "", err
	}
	var p struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("the SDK's package.json: %w", err)
	}
	v := p.DevDependencies["assemblyscript"]
	if v == "" {
		return "", fmt.Errorf("the SDK's package.json names no assemblyscript")
	}
	return v, nil
}

var compiler struct {
	once       sync.Once
	asc        string // the compiler's script, run with node
	node, skip string
	err        error
}

// ascCompiler returns node and the compiler's script, installing the
// compiler on first use; skip, if set, says why there is none here.
func ascCompiler() (node, asc, skip string, err error) {
	c := &compiler
	c.once.Do(func() {
		node, errNode := exec.LookPath("node")
		npm, errNPM := exec.LookPath("npm")
		if errNode != nil || errNPM != nil {
			c.skip = "node and npm are needed to build an AssemblyScript guest; skipped"
			return
		}
		version, err := CompilerVersion()
		if err != nil {
			c.err = err
			return
		}
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		dir := filepath.Join(cache, "cairn", "assemblyscript-"+version)
		pkg := filepath.Join(dir, "node_modules", "assemblyscript")
		if _, err := os.Stat(filepath.Join(pkg, "package.json")); err != nil {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				c.err = err
				return
			}
			out, err := exec.Command(npm, "install", "--no-audit", "--no-fund", "--prefix", dir, "assemblyscript@"+version).CombinedOutput()
			if err != nil {
				c.skip = fmt.Sprintf("npm could not install assemblyscript@%s (no registry?); skipped:\n%s", version, out)
				return
			}
		}
		c.node, c.asc = node, filepath.Join(pkg, "bin", "asc.js")
	})
	return c.node, c.asc, c.skip, c.err
}

var asBuilt sync.Map // entry file → *result

// AssemblyScript returns the module of the AssemblyScript entry file
// entry, compiled with the SDK's asconfig.json on first use. Without node
// and npm, or when npm cannot install the compiler, the test is skipped
// saying so.
func AssemblyScript(t testing.TB, entry string) []byte {
	t.Helper()
	node, asc, skip, err := ascCompiler()
	switch {
	case err != nil:
		t.Fatal(err)
	case skip != "":
		t.Skip(skip)
	}
	v, _ := asBuilt.LoadOrStore(entry, &result{})
	r := v.(*result)
	r.once.Do(func() { r.module, r.err = buildAS(node, asc, entry) })
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.module
}

func buildAS(node, asc, entry string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "cairn-asguest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "guest.wasm")
	cmd := exec.Command(node, asc, entry, "--config", filepath.Join(SDKDir(), "asconfig.json"), "--outFile", out)
	if output, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build %s: %v\n%s", entry, err, output)
	}
	return os.ReadFile(out)
}
