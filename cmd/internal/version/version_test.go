package version

import (
	"runtime"
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
