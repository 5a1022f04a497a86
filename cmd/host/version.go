package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/cmd/internal/version"
)

// versionCmd prints the build of this binary (package version).
func versionCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	cli.Usage(fs, versionUsage)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("version: unexpected arguments %q", fs.Args())
	}
	_, err := fmt.Fprint(out, version.Get().String())
	return err
}

const versionUsage = `usage: host version   (or host -version)

Prints the version, the VCS revision and time the binary was built from
("(modified)" for a tree with local changes) and the Go version. The
version is the release's for a binary of a release archive (stamped by
.ci/release), the module's for one installed with
"go install github.com/cairn-dev/cairn/cmd/host@v0.1.0", and a
pseudo-version or "(devel)" for one built from a checkout. The running
node shows the same as cairn_build_info on /metrics.
`
