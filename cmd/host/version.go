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
	cli.Usage(fs, "usage: host version   (or host -version)\n\nPrints the module version, the VCS revision and time the binary was built\nfrom (\"(modified)\" for a tree with local changes) and the Go version.\nThe running node shows the same as cairn_build_info on /metrics.\n")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("version: unexpected arguments %q", fs.Args())
	}
	_, err := fmt.Fprint(out, version.Get().String())
	return err
}
