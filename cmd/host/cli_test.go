package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/cmd/internal/version"
)

// TestHelpEverywhere: every command and sub-command answers -h, --help
// and help with its usage on stdout and flag.ErrHelp (exit 0), never
// taking the request for a name, and without connecting anywhere (-data
// points nowhere).
func TestHelpEverywhere(t *testing.T) {
	t.Setenv("CAIRN_DATA", "/nowhere")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-h"}, "usage: host <command>"},
		{[]string{"--help"}, "usage: host <command>"},
		{[]string{"help"}, "usage: host <command>"},
		{[]string{"help", "poison"}, "usage: host poison"},
		{[]string{"serve", "-h"}, "usage: host [serve]"},
		{[]string{"serve", "help"}, "usage: host [serve]"},
		{[]string{"deploy", "-h"}, "usage: host deploy"},
		{[]string{"deploy", "./fn", "--help"}, "usage: host deploy"},
		{[]string{"functions", "-h"}, "usage: host functions"},
		{[]string{"functions", "help"}, "usage: host functions"},
		{[]string{"functions", "list", "-h"}, "usage: host functions"},
		{[]string{"functions", "history", "-h"}, "usage: host functions"},
		{[]string{"functions", "undeploy", "-h"}, "usage: host functions"},
		{[]string{"functions", "rollback", "fn", "--help"}, "usage: host functions"},
		{[]string{"poison", "-h"}, "usage: host poison"},
		{[]string{"poison", "list", "-h"}, "usage: host poison"},
		{[]string{"poison", "show", "q", "-h"}, "usage: host poison"},
		{[]string{"poison", "requeue", "-h"}, "usage: host poison"},
		{[]string{"poison", "delete", "q", "all", "-help"}, "usage: host poison"},
		{[]string{"enqueue", "-h"}, "usage: host enqueue"},
		{[]string{"enqueue", "q", "-h"}, "usage: host enqueue"},
		{[]string{"outbox", "-h"}, "usage: host outbox"},
		{[]string{"outbox", "status", "-h"}, "usage: host outbox"},
		{[]string{"outbox", "retry", "-h"}, "usage: host outbox"},
		{[]string{"outbox", "skip", "--help"}, "usage: host outbox"},
		{[]string{"projections", "-h"}, "usage: host projections"},
		{[]string{"projections", "list", "-h"}, "usage: host projections"},
		{[]string{"projections", "deploy", "-h"}, "usage: host projections"},
		{[]string{"projections", "rebuild", "x", "-h"}, "usage: host projections"},
		{[]string{"projections", "drop", "help"}, ""}, // a projection named help: not a help request
		{[]string{"init", "-h"}, "usage: host init function"},
		{[]string{"init", "function", "-h"}, "usage: host init function"},
		{[]string{"init", "function", "dir", "--help"}, "usage: host init function"},
		{[]string{"nats-password", "-h"}, "usage: host nats-password"},
		{[]string{"version", "-h"}, "usage: host version"},
	} {
		out, err := runCLI(t, c.args...)
		if c.want == "" {
			if errors.Is(err, flag.ErrHelp) || strings.Contains(out, "usage:") {
				t.Errorf("%q: taken for help: %v\n%s", c.args, err, out)
			}
			continue
		}
		if (err != nil && !errors.Is(err, flag.ErrHelp)) || !strings.Contains(out, c.want) {
			t.Errorf("%q: %v, printed %q; want %q", c.args, err, firstLine(out, 200), c.want)
		}
	}
}

// TestHelpShowsEnvironment: the top help names every command and the
// CAIRN_ variables; serve's help gives each flag its variable and leaves
// the test-only -failpoint out, which is still taken.
func TestHelpShowsEnvironment(t *testing.T) {
	out, _ := runCLI(t, "help")
	for _, want := range []string{"serve", "deploy", "functions", "poison", "enqueue", "outbox", "projections", "nats-password", "version", "CAIRN_<NAME>", "CAIRN_DATA=/var/lib/cairn host serve"} {
		if !strings.Contains(out, "\n  "+want) && !strings.Contains(out, want) {
			t.Errorf("host help lacks %q", want)
		}
	}
	out, _ = runCLI(t, "serve", "-h")
	for _, want := range []string{"-data string", "[CAIRN_DATA]", "-nats-url string", "[CAIRN_NATS_URL]", "[CAIRN_OPERATOR_TOKEN]", "[CAIRN_SNAPSHOTS_SHARED]"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve -h lacks %q", want)
		}
	}
	if strings.Contains(out, "failpoint") || strings.Contains(out, "FAILPOINT") {
		t.Errorf("serve -h shows -failpoint:\n%s", out)
	}
	out, _ = runCLI(t, "poison", "-h")
	if !strings.Contains(out, "[CAIRN_NATS_URL]") || !strings.Contains(out, "-data string") {
		t.Errorf("poison -h lacks its connection flags:\n%s", out)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := hostFlags(fs)
	if err := fs.Parse([]string{"-failpoint", "functions.invoke"}); err != nil || cfg.Functions.Failpoint != "functions.invoke" {
		t.Fatalf("-failpoint hidden but no longer taken: %v %q", err, cfg.Functions.Failpoint)
	}
}

// TestFlagsAfterArguments: a flag after the positional arguments is
// taken (here -data, whose missing URL file the error names), an unknown
// one is refused wherever it stands, and "--" makes what follows
// positional.
func TestFlagsAfterArguments(t *testing.T) {
	for _, args := range [][]string{
		{"poison", "list", "-data", "/nowhere", "q"},
		{"poison", "list", "q", "-data=/nowhere"},
		{"functions", "undeploy", "fn", "-data", "/nowhere"},
		{"enqueue", "q", "m", "--data", "/nowhere"},
		{"projections", "list", "-data", "/nowhere"},
	} {
		out, err := runCLI(t, args...)
		if err == nil || !strings.Contains(err.Error(), "/nowhere/nats/url does not exist") {
			t.Errorf("%q: %v, want the error of -data /nowhere\n%s", args, err, out)
		}
	}
	if _, err := runCLI(t, "poison", "list", "q", "-nope"); err == nil || !strings.Contains(err.Error(), "-nope") {
		t.Errorf("an unknown flag after the arguments: %v", err)
	}
	if _, err := runCLI(t, "serve", "-data", t.TempDir(), "extra"); err == nil || !strings.Contains(err.Error(), "unexpected arguments") {
		t.Errorf("serve with an argument: %v", err)
	}
	if _, err := runCLI(t, "serve", "--", "-http", "off"); err == nil || !strings.Contains(err.Error(), `unexpected arguments ["-http" "off"]`) {
		t.Errorf("flags after --: %v", err)
	}
}

// TestVersion: host version and host -version print the build; extra
// arguments are refused.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"-version"}, {"--version"}} {
		out, err := runCLI(t, args...)
		if err != nil || !strings.Contains(out, "version:   ") || !strings.Contains(out, "revision:  ") || !strings.Contains(out, "go:        go") {
			t.Errorf("%q: %v\n%s", args, err, out)
		}
	}
	if _, err := runCLI(t, "version", "extra"); err == nil {
		t.Error("version with an argument accepted")
	}
}

// TestDataDirDefaults: with a host started on <dir>/data, the operator
// commands find its NATS URL and credentials from ./data (run in dir),
// CAIRN_DATA and -data; -nats-url still wins; a directory without a
// host's files is a clear error. functions list shows the built-in
// archive function on the host.
func TestDataDirDefaults(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	h, _ := nodetest.Start(t, node.Config{DataDir: data})
	if st, err := os.Stat(filepath.Join(data, "nats", "url")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the node's URL file: %v %v", st, err)
	}
	check := func(what string, args ...string) {
		t.Helper()
		out, err := runCLI(t, args...)
		if err != nil || !strings.Contains(out, "NAME") || !strings.Contains(out, "BUILT-IN") || !strings.Contains(out, "archive") || !strings.Contains(out, "queue archive") {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
	}
	check("-data", "functions", "list", "-data", data)
	t.Setenv("CAIRN_DATA", data)
	check("CAIRN_DATA", "functions", "list")
	t.Setenv("CAIRN_DATA", "")
	os.Unsetenv("CAIRN_DATA")
	t.Chdir(dir)
	check("./data", "functions")
	out, _ := runCLI(t, "functions", "list")
	t.Log("\n" + out)

	// A flag wins over the data directory's URL.
	if _, err := runCLI(t, "functions", "list", "-nats-url", "nats://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("-nats-url did not win: %v", err)
	}
	// And the URL file is the one the host recorded.
	if b, err := os.ReadFile(filepath.Join(data, "nats", "url")); err != nil || strings.TrimSpace(string(b)) != h.ClientURL() {
		t.Fatalf("recorded %q, the host's client URL is %q (%v)", b, h.ClientURL(), err)
	}
	empty := t.TempDir()
	if _, err := runCLI(t, "functions", "list", "-data", empty); err == nil || !strings.Contains(err.Error(), "no NATS URL: "+filepath.Join(empty, "nats", "url")+" does not exist") {
		t.Fatalf("a data directory without a host: %v", err)
	}
}

// TestBuildInfoMetric: a host's /metrics, behind the operator token, has
// cairn_build_info with the build's labels, the same Go version host
// version prints.
func TestBuildInfoMetric(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{})
	get := func(token string) (int, string) {
		req, err := http.NewRequest("GET", h.HTTPURL()+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := get(""); status != http.StatusUnauthorized || strings.Contains(body, "cairn_build_info") {
		t.Fatalf("/metrics without the token: %d\n%s", status, body)
	}
	status, body := get(h.OperatorToken())
	in := version.Get()
	rev := in.Revision
	if in.Modified && rev != "" {
		rev += "-modified"
	}
	want := fmt.Sprintf(`cairn_build_info{version=%q,revision=%q,goversion=%q} 1`, in.Version, rev, in.GoVersion)
	if status != http.StatusOK || !strings.Contains(body, "\n"+want+"\n") {
		t.Fatalf("/metrics: %d, want a line %s in\n%s", status, want, body)
	}
	out, err := runCLI(t, "version")
	if err != nil || !strings.Contains(out, "go:        "+in.GoVersion+"\n") {
		t.Fatalf("host version: %v\n%s", err, out)
	}
}
