// Package guesttest builds Go function packages to WebAssembly for tests,
// with the go command on PATH, once per test binary and build. A build
// that fails fails the test with the compiler's output. A build costs one
// run of the go command, whose build cache makes later test runs cheaper.
// AssemblyScript guests are built the same way with node and the npm
// package assemblyscript (assemblyscript.go).
package guesttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Build describes a build of a package for GOOS=wasip1 GOARCH=wasm.
type Build struct {
	// Dir is the package's directory.
	Dir string
	// Command builds a plain WASI program instead of a reactor module
	// (-buildmode=c-shared), which is what a function is.
	Command bool
	// LDFlags are passed to -ldflags (e.g. "-X main.version=2").
	LDFlags string
}

type result struct {
	once   sync.Once
	module []byte
	err    error
}

var built sync.Map // Build → *result

// Module returns the module of b, building it on first use.
func Module(t testing.TB, b Build) []byte {
	t.Helper()
	v, _ := built.LoadOrStore(b, &result{})
	r := v.(*result)
	r.once.Do(func() { r.module, r.err = build(b) })
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.module
}

func build(b Build) ([]byte, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("building a test guest needs the go command on PATH: %w", err)
	}
	dir, err := os.MkdirTemp("", "cairn-guest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "guest.wasm")
	args := []string{"build", "-o", out}
	if !b.Command {
		args = append(args, "-buildmode=c-shared")
	}
	if b.LDFlags != "" {
		args = append(args, "-ldflags", b.LDFlags)
	}
	cmd := exec.Command(goCmd, append(args, ".")...)
	cmd.Dir = b.Dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if output, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build %s: %v\n%s", b.Dir, err, output)
	}
	return os.ReadFile(out)
}
