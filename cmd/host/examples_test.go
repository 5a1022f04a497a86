package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/functions/guesttest"
)

// runCLI runs a subcommand as the binary would and returns what it printed.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	out := make(chan string)
	go func() { b, _ := io.ReadAll(r); out <- string(b) }()
	err = run(args)
	w.Close()
	os.Stdout = stdout
	return <-out, err
}

func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestExamplesWalkthrough follows examples/README.md with the commands it
// gives: deploy the archive function, hire employees, archive two, deploy
// the failing function, see its message poisoned, requeue and delete it.
func TestExamplesWalkthrough(t *testing.T) {
	ctx := context.Background()
	h, _ := nodetest.Start(t, node.Config{})
	url, creds := h.ClientURL(), h.NATSCredsFile()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := client.New(nc)

	out, err := runCLI(t, "deploy", "-nats-url", url, "-nats-creds", creds, "../../examples/archive")
	if err != nil || !strings.Contains(out, "deployed archive-employee version 1") {
		t.Fatalf("deploy: %v\n%s", err, out)
	}
	// What "go run ./examples/employees seed" does.
	for _, tb := range []string{"Current", "Archive"} {
		if _, err := c.CreateTable(ctx, tb); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"000001", "000003"} {
		if _, err := c.Insert(ctx, "Current", engine.NewEntity("Sales", id, engine.Property{Name: "FirstName", Value: engine.String("E" + id)})); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 60*time.Second, "archive-employee loaded", func() bool { _, ok := h.Functions().Version("archive-employee"); return ok })
	if out, err := runCLI(t, "enqueue", "-nats-url", url, "-nats-creds", creds, "archive-employee", `{"department":"Sales","id":"000003"}`); err != nil || !strings.Contains(out, "enqueued 1") {
		t.Fatalf("enqueue: %v %s", err, out)
	}
	gone := func(table, id string) bool {
		_, _, err := c.Retrieve(ctx, table, "Sales", id)
		return engine.ErrorCode(err) == engine.CodeResourceNotFound
	}
	eventually(t, 30*time.Second, "000003 archived", func() bool { return gone("Current", "000003") && !gone("Archive", "000003") })
	if gone("Current", "000001") {
		t.Fatal("000001 was archived too")
	}
	out, err = runCLI(t, "functions", "-nats-url", url, "-nats-creds", creds, "list")
	if err != nil || !strings.Contains(out, "archive-employee") || !strings.Contains(out, "queue archive-employee") {
		t.Fatalf("functions list: %v\n%s", err, out)
	}

	// The failing function: five attempts with back-off (1+2+4+8 s), then poison.
	if out, err := runCLI(t, "deploy", "-nats-url", url, "-nats-creds", creds, "../../examples/failing"); err != nil {
		t.Fatalf("deploy failing: %v\n%s", err, out)
	}
	eventually(t, 60*time.Second, "always-fails loaded", func() bool { _, ok := h.Functions().Version("always-fails"); return ok })
	if _, err := runCLI(t, "enqueue", "-nats-url", url, "-nats-creds", creds, "doomed", "order 42"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the message in doomed-poison", func() bool {
		out, _ := runCLI(t, "poison", "-nats-url", url, "-nats-creds", creds, "list", "doomed")
		return strings.Contains(out, "always-fails")
	})
	out, _ = runCLI(t, "poison", "-nats-url", url, "-nats-creds", creds, "list", "doomed")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "this function always fails") || strings.Fields(lines[1])[3] != "5" {
		t.Fatalf("poison list:\n%s", out)
	}
	seq := strings.Fields(lines[1])[0]
	if out, err := runCLI(t, "poison", "-nats-url", url, "-nats-creds", creds, "show", "doomed", seq); err != nil || !strings.Contains(out, "order 42") || !strings.Contains(out, "attempts:  5") {
		t.Fatalf("poison show: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "poison", "-nats-url", url, "-nats-creds", creds, "requeue", "doomed", seq); err != nil || !strings.Contains(out, "requeued 1") {
		t.Fatalf("poison requeue: %v\n%s", err, out)
	}
	eventually(t, 60*time.Second, "the requeued message poisoned again", func() bool {
		out, _ := runCLI(t, "poison", "-nats-url", url, "-nats-creds", creds, "list", "doomed")
		return strings.Contains(out, "always-fails") && !strings.Contains(out, "\n"+seq+" ")
	})
	if out, err := runCLI(t, "poison", "-nats-url", url, "-nats-creds", creds, "delete", "doomed", "all"); err != nil || !strings.Contains(out, "deleted 1") {
		t.Fatalf("poison delete: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "functions", "-nats-url", url, "-nats-creds", creds, "undeploy", "always-fails"); err != nil || !strings.Contains(out, "undeployed") {
		t.Fatalf("undeploy: %v\n%s", err, out)
	}
}

// TestDeployRefusesNonFunctions: a module without the ABI's export, and a
// file that is not WebAssembly, are refused before anything is uploaded:
// the host has no function of that name after.
func TestDeployRefusesNonFunctions(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{})
	url, creds := h.ClientURL(), h.NATSCredsFile()
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.wasm")
	os.WriteFile(plain, guesttest.Module(t, guesttest.Build{Dir: "testdata/noexport", Command: true}), 0o644)
	garbage := filepath.Join(dir, "garbage.wasm")
	os.WriteFile(garbage, []byte("#!/bin/sh\necho not wasm\n"), 0o644)
	for file, want := range map[string]string{plain: "does not export cairn_handle", garbage: "not a WebAssembly module"} {
		_, err := runCLI(t, "deploy", "-nats-url", url, "-nats-creds", creds, "-name", "bad", file)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a refusal mentioning %q", filepath.Base(file), err, want)
		}
	}
	out, err := runCLI(t, "functions", "list", "-nats-url", url, "-nats-creds", creds)
	if err != nil || strings.Contains(out, "bad") {
		t.Fatalf("after the refusals: %v\n%s", err, out)
	}
}
