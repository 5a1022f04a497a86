package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
)

// The helpers of the examples' tests: each test builds the programs it
// walks through (examples/<name>), runs them against a node it started,
// and compares what they print with what the README says.

// example is an example program built for a test, run with flags that
// point it at the test's node ahead of each command line.
type example struct {
	t     *testing.T
	bin   string
	flags []string
}

// buildExample builds examples/<name> into the test's temporary directory;
// every run passes flags first. It skips the test when there is no go
// command to build with.
func buildExample(t *testing.T, name string, flags ...string) *example {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the examples with")
	}
	bin := filepath.Join(t.TempDir(), name)
	cmd := exec.Command(goCmd, "build", "-o", bin, "./examples/"+name)
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/%s: %v\n%s", name, err, out)
	}
	return &example{t: t, bin: bin, flags: flags}
}

// nodeFlags point an example at node h: its NATS server and, through the
// development account's connection string, its HTTP API.
func nodeFlags(h *node.Node) []string {
	return append([]string{"-nats-url", h.ClientURL()}, httpFlags(h)...)
}

// httpFlags point an example that uses only the HTTP API at node h.
func httpFlags(h *node.Node) []string {
	return []string{"-connection-string", httpapi.DevConnectionString(h.HTTPURL())}
}

// run runs the program and returns what it printed on stdout; the error
// ends with the exit status and what it printed on stderr
// ("<name> <args>: exit status 1: <stderr>").
func (e *example) run(args ...string) (string, error) {
	e.t.Helper()
	args = append(append([]string(nil), e.flags...), args...)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(e.bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v: %s", filepath.Base(e.bin), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// must runs the program and returns what it printed; a failure fails the
// test.
func (e *example) must(args ...string) string {
	e.t.Helper()
	out, err := e.run(args...)
	if err != nil {
		e.t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// same fails the test when what printed got rather than want.
func same(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s printed\n%s\nwant\n%s", what, got, want)
	}
}

// refused checks the result of run for a command that must fail: exit
// status 1, stdout on its standard output and stderr, whole, on its
// standard error.
func refused(t *testing.T, what, out string, err error, stdout, stderr string) {
	t.Helper()
	if err == nil || !strings.HasSuffix(err.Error(), ": exit status 1: "+stderr) {
		t.Fatalf("%s: %v, want exit status 1 and\n%s", what, err, stderr)
	}
	same(t, what, out, stdout)
}

// with is the same program run with other flags ahead of each command
// line.
func (e *example) with(flags ...string) *example {
	return &example{t: e.t, bin: e.bin, flags: flags}
}
