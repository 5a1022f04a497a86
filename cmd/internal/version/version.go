// Package version tells which build of Cairn is running, from the build
// information the Go toolchain embeds in every binary
// (runtime/debug.ReadBuildInfo): the module version, the VCS revision,
// its time and whether the tree had local changes, and the Go version.
// Reading it costs a parse of that information once per call; the
// values do not change while the process runs.
//
// A release build stamps its version into the binary (.ci/release):
//
//	go build -ldflags "-X github.com/cairn-dev/cairn/cmd/internal/version.stamped=v0.1.0" ./cmd/host
//
// A stamped version wins over the module's. Without one the version is
// the module's, as the go command recorded it: v0.1.0 for
// "go install github.com/cairn-dev/cairn/cmd/host@v0.1.0", a
// pseudo-version or "(devel)" for a build from a checkout.
package version

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// stamped is the version a release build sets with -ldflags -X (see the
// package doc); empty otherwise. It is a variable, not a constant, for
// the linker to be able to set it.
var stamped string

// Info is the build of the running binary. Fields the build did not
// record are empty ("(devel)" is the version of a binary built from a
// checkout rather than installed at a tagged version).
type Info struct {
	Version   string // the stamped version, else the main module's
	Revision  string // vcs.revision
	Time      string // vcs.time
	Modified  bool   // vcs.modified: built from a tree with local changes
	GoVersion string
}

// Get returns the running binary's build.
func Get() Info {
	bi, _ := debug.ReadBuildInfo() // nil when the binary recorded none
	return fromBuild(stamped, bi)
}

// fromBuild is the build that bi (nil: none recorded) describes, with
// the version stamped, when not empty, in place of the module's.
func fromBuild(stamped string, bi *debug.BuildInfo) Info {
	in := Info{Version: stamped, GoVersion: runtime.Version()}
	if bi == nil {
		return in
	}
	if in.Version == "" {
		in.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		in.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the build on lines of "key: value", as "host version"
// prints it.
func (in Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "version:   %s\n", orUnknown(in.Version))
	rev := orUnknown(in.Revision)
	if in.Modified {
		rev += " (modified)"
	}
	fmt.Fprintf(&b, "revision:  %s\n", rev)
	fmt.Fprintf(&b, "time:      %s\n", orUnknown(in.Time))
	fmt.Fprintf(&b, "go:        %s\n", in.GoVersion)
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// WriteMetric writes the gauge cairn_build_info, always 1, whose labels
// tell the build (Prometheus text format), for dashboards to see which
// build each node runs.
func (in Info) WriteMetric(w io.Writer) {
	rev := in.Revision
	if in.Modified && rev != "" {
		rev += "-modified"
	}
	fmt.Fprintf(w, "# HELP cairn_build_info The build of the running node (labels); always 1.\n# TYPE cairn_build_info gauge\n")
	fmt.Fprintf(w, "cairn_build_info{version=%s,revision=%s,goversion=%s} 1\n", label(in.Version), label(rev), label(in.GoVersion))
}

// labelEscaper escapes \, " and newlines in a label value, as the text
// format requires (built once: a Replacer is safe for concurrent use).
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// label quotes a label value.
func label(s string) string { return `"` + labelEscaper.Replace(s) + `"` }
