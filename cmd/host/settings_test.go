package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/functions"
)

// withStdin runs fn with os.Stdin reading s.
func withStdin(t *testing.T, s string, fn func()) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { w.WriteString(s); w.Close() }()
	old := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = old; r.Close() }()
	fn()
}

// TestSettingsCLI: settings and secrets set with the CLI reach the node's
// functions; a secret's value comes from stdin or a file, is refused on the
// command line, and is never printed; bad names are refused.
func TestSettingsCLI(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{})
	conn := []string{"functions", "-nats-url", h.ClientURL(), "-nats-creds", h.NATSCredsFile()}
	cmd := func(args ...string) (string, error) {
		return runCLI(t, append(append([]string(nil), conn...), args...)...)
	}
	const secret = "cli-secret-8d1e-never-printed"
	var outs []string
	out, err := cmd("settings", "billing", "set", "REGION", "eu-west")
	if err != nil || !strings.Contains(out, "set setting REGION of billing") {
		t.Fatalf("settings set: %v\n%s", err, out)
	}
	withStdin(t, secret+"\n", func() { out, err = cmd("secrets", "billing", "set", "TOKEN") })
	outs = append(outs, out)
	if err != nil || !strings.Contains(out, "set secret TOKEN of billing") {
		t.Fatalf("secrets set from stdin: %v\n%s", err, out)
	}
	eventually(t, 10*time.Second, "the node reads the secret set from stdin, without its line ending", func() bool {
		v, ok, err := h.Functions().Setting("billing", "TOKEN")
		return err == nil && ok && v == secret
	})
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte(secret+"-2"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = cmd("secrets", "billing", "set", "OTHER", "-file", file)
	outs = append(outs, out)
	if err != nil {
		t.Fatalf("secrets set -file: %v\n%s", err, out)
	}
	eventually(t, 10*time.Second, "the node reads the secret set from a file", func() bool {
		v, ok, err := h.Functions().Setting("billing", "OTHER")
		return err == nil && ok && v == secret+"-2"
	})
	// Never from the command line; bad names refused; nothing stored.
	out, err = cmd("secrets", "billing", "set", "THIRD", secret)
	if err == nil || !strings.Contains(err.Error(), "never given on the command line") || strings.Contains(err.Error(), secret) {
		t.Fatalf("a secret on the command line: %v\n%s", err, out)
	}
	withStdin(t, secret, func() { out, err = cmd("secrets", "billing", "set", "BAD-NAME") })
	if err == nil || !strings.Contains(err.Error(), "InvalidInput") || strings.Contains(err.Error(), secret) {
		t.Fatalf("a bad name: %v\n%s", err, out)
	}
	for _, name := range []string{"THIRD", "BAD-NAME"} {
		if _, ok, _ := h.Functions().Setting("billing", name); ok {
			t.Fatalf("%s was stored", name)
		}
	}
	out, err = cmd("settings", "billing")
	outs = append(outs, out)
	if err != nil || !strings.Contains(out, "REGION") || !strings.Contains(out, "eu-west") || !strings.Contains(out, "TOKEN") || !strings.Contains(out, "(hidden)") {
		t.Fatalf("settings list: %v\n%s", err, out)
	}
	out, err = cmd("secrets", "billing", "list")
	outs = append(outs, out)
	if err != nil || strings.Contains(out, "REGION") || !strings.Contains(out, "OTHER") {
		t.Fatalf("secrets list: %v\n%s", err, out)
	}
	for _, o := range outs {
		if strings.Contains(o, "never-printed") {
			t.Fatalf("the CLI printed the secret: %s", o)
		}
	}
	if out, err = cmd("secrets", "billing", "remove", "TOKEN"); err != nil {
		t.Fatalf("remove: %v\n%s", err, out)
	}
	eventually(t, 10*time.Second, "the secret removed on the node", func() bool {
		_, ok, _ := h.Functions().Setting("billing", "TOKEN")
		return !ok
	})
	if _, err = cmd("settings", "billing", "remove", "TOKEN"); err == nil || !strings.Contains(err.Error(), "ResourceNotFound") {
		t.Fatalf("remove again: %v", err)
	}
}

// TestResealSecretsCLI: secrets sealed under the node user's previous
// password are unreadable to the node until `functions reseal-secrets`,
// given that password on stdin, seals them with the current one; a wrong
// previous password reseals nothing and names what it could not open.
func TestResealSecretsCLI(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{})
	ctx := context.Background()
	js, err := jetstream.New(nodetest.Connect(t, h))
	if err != nil {
		t.Fatal(err)
	}
	const previous = "the node user's password before it changed"
	old, err := functions.OpenSettings(ctx, js, "cairn", 0, functions.SecretsKey([]byte(previous)))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := old.Set(ctx, "billing", "TOKEN", "sealed-long-ago", true); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the node sees a secret it cannot open", func() bool {
		_, _, err := h.Functions().Setting("billing", "TOKEN")
		return err != nil
	})
	conn := []string{"functions", "-nats-url", h.ClientURL(), "-nats-creds", h.NATSCredsFile()}
	var out string
	withStdin(t, "not the previous password\n", func() { out, err = runCLI(t, append(conn, "reseal-secrets")...) })
	if err == nil || !strings.Contains(err.Error(), "billing/TOKEN") || !strings.Contains(out, "resealed 0 secrets") {
		t.Fatalf("a reseal with a wrong password: %v\n%s", err, out)
	}
	if out, err = runCLI(t, append(conn, "reseal-secrets", previous)...); err == nil || !strings.Contains(err.Error(), "not as an argument") {
		t.Fatalf("the password as an argument: %v\n%s", err, out)
	}
	withStdin(t, previous+"\n", func() { out, err = runCLI(t, append(conn, "reseal-secrets")...) })
	if err != nil || !strings.Contains(out, "resealed 1 secrets of 1 functions") || strings.Contains(out, previous) {
		t.Fatalf("reseal: %v\n%s", err, out)
	}
	eventually(t, 10*time.Second, "the node opens the resealed secret", func() bool {
		v, ok, err := h.Functions().Setting("billing", "TOKEN")
		return err == nil && ok && v == "sealed-long-ago"
	})
}
