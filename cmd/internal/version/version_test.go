package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestInfo: the test binary's build has the Go version; the text and the
// metric carry every field, with label values escaped.
func TestInfo(t *testing.T) {
	in := Get()
	if in.GoVersion == "" || !strings.HasPrefix(in.GoVersion, "go") {
		t.Fatalf("Go version %q (runtime %s)", in.GoVersion, runtime.Version())
	}
	in = Info{Version: "v1.2.3", Revision: "abc123", Time: "2026-11-23T19:00:00Z", Modified: true, GoVersion: "go1.24.0"}
	s := in.String()
	for _, want := range []string{"version:   v1.2.3\n", "revision:  abc123 (modified)\n", "time:      2026-11-23T19:00:00Z\n", "go:        go1.24.0\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
	if s := (Info{GoVersion: "go1"}).String(); !strings.Contains(s, "version:   unknown") || !strings.Contains(s, "revision:  unknown\n") {
		t.Errorf("no build information: %q", s)
	}
	var b strings.Builder
	Info{Version: `v"1\`, Revision: "abc", Modified: true, GoVersion: "go1.24.0"}.WriteMetric(&b)
	if want := `cairn_build_info{version="v\"1\\",revision="abc-modified",goversion="go1.24.0"} 1` + "\n"; !strings.HasSuffix(b.String(), want) || !strings.Contains(b.String(), "# TYPE cairn_build_info gauge\n") {
		t.Fatalf("metric %q, want it to end in %q", b.String(), want)
	}
}

// TestStampedWins: a stamped version wins over the module's; without one
// the module's is kept; with no build information at all, the stamped
// one is still told.
func TestStampedWins(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/cairn-dev/cairn", Version: "(devel)"},
		Settings:  []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}},
	}
	for _, c := range []struct {
		stamped string
		bi      *debug.BuildInfo
		want    string
	}{
		{"v0.1.0", bi, "v0.1.0"},
		{"", bi, "(devel)"},
		{"v0.1.0", nil, "v0.1.0"},
		{"", nil, ""},
	} {
		in := fromBuild(c.stamped, c.bi)
		if in.Version != c.want {
			t.Errorf("stamped %q, build info %v: version %q, want %q", c.stamped, c.bi != nil, in.Version, c.want)
		}
		if c.bi != nil && (in.Revision != "abc123" || in.GoVersion != "go1.26.0") {
			t.Errorf("stamped %q: the rest of the build lost: %+v", c.stamped, in)
		}
	}
}

// TestStampedByLinker builds a program that prints Get().Version, once
// with the version stamped as .ci/release stamps it (-ldflags -X on the
// variable's full name: a renamed variable or package fails here, not in
// a release) and once without, where the module's version shows. It
// needs the go command; the binaries go to a temporary directory.
func TestStampedByLinker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	dir := t.TempDir()
	build := func(name string, args ...string) string {
		t.Helper()
		bin := filepath.Join(dir, name)
		cmd := exec.Command(gobin, append(append([]string{"build", "-o", bin}, args...), "./testdata/stamp")...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %q: %v\n%s", args, err, out)
		}
		out, err := exec.Command(bin).Output()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	const v = "v9.8.7-rc.1"
	if got := build("stamped", "-ldflags", "-X github.com/cairn-dev/cairn/cmd/internal/version.stamped="+v); got != v {
		t.Errorf("stamped build says %q, want %q", got, v)
	}
	if got := build("plain"); got == v || got == "" {
		t.Errorf("a build without a stamp says %q, want the module's version", got)
	}
}
