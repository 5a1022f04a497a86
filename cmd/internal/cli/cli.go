// Package cli holds what the binaries under cmd share: flags that can also
// be set from the environment and may stand anywhere among the arguments,
// help on -h that shows each flag's environment variable and hides
// test-only flags (parse.go), and building a Go function package into a
// WebAssembly module. Errors are returned as they are, ready to be printed
// to the user: a bad environment value names the variable, a failed build
// shows the compiler's output on stderr. Building a module costs one run
// of the go command (its build cache makes later builds cheaper).
package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Module returns the WebAssembly module at src: the file itself when it
// ends in .wasm, otherwise the Go package in the directory src built with
// GOOS=wasip1 GOARCH=wasm -buildmode=c-shared (the go command must be on
// PATH; its output goes to stderr).
func Module(ctx context.Context, src string) ([]byte, error) {
	if strings.HasSuffix(src, ".wasm") {
		return os.ReadFile(src)
	}
	if st, err := os.Stat(src); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%s: not a package directory or a .wasm file", src)
	}
	out, err := os.MkdirTemp("", "cairn-deploy-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(out)
	wasmPath := filepath.Join(out, "function.wasm")
	fmt.Fprintf(os.Stderr, "building %s (GOOS=wasip1 GOARCH=wasm)…\n", src)
	cmd := exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared", "-o", wasmPath, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("build %s: %w", src, err)
	}
	return os.ReadFile(wasmPath)
}
