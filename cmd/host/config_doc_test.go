package main

import (
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
)

// docFlag is one row of a flag table in docs/CONFIGURATION.md.
type docFlag struct {
	def  string // the first `…` of the default column, or ""
	line int
}

// configTables reads the flag tables of docs/CONFIGURATION.md: for each
// "## " heading, the rows whose first cell starts with `-name`.
func configTables(t *testing.T) map[string]map[string]docFlag {
	t.Helper()
	b, err := os.ReadFile("../../docs/CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]map[string]docFlag{}
	section := ""
	for i, line := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			section = h
			continue
		}
		if !strings.HasPrefix(line, "| `-") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			t.Fatalf("docs/CONFIGURATION.md:%d: a flag row without a default and a meaning", i+1)
		}
		name, _, _ := strings.Cut(strings.Trim(strings.TrimSpace(cells[1]), "`-"), " ")
		name = strings.TrimSuffix(name, "`")
		def := ""
		if _, rest, ok := strings.Cut(cells[2], "`"); ok {
			def, _, _ = strings.Cut(rest, "`")
		}
		if tables[section] == nil {
			tables[section] = map[string]docFlag{}
		}
		if _, dup := tables[section][name]; dup {
			t.Errorf("docs/CONFIGURATION.md:%d: -%s listed twice under %q", i+1, name, section)
		}
		tables[section][name] = docFlag{def: def, line: i + 1}
	}
	return tables
}

// checkFlagTable fails for a flag of fs (hidden ones aside) the table
// lacks, for a row naming no flag of fs, and for a default that differs
// from the flag's. A default of "", "0" or "false" in the code is left
// to the table's prose ("none", "derived", the default the code applies
// later), and durations compare as durations ("5m" is "5m0s").
func checkFlagTable(t *testing.T, section string, table map[string]docFlag, fs *flag.FlagSet) {
	t.Helper()
	if len(table) == 0 {
		t.Fatalf("docs/CONFIGURATION.md has no flag table under %q", section)
	}
	fs.VisitAll(func(f *flag.Flag) {
		if cli.IsHidden(f) {
			return
		}
		row, ok := table[f.Name]
		if !ok {
			t.Errorf("docs/CONFIGURATION.md, %s: -%s is missing", section, f.Name)
			return
		}
		switch f.DefValue {
		case "", "0", "false":
			return
		}
		if row.def == f.DefValue {
			return
		}
		if d, err := time.ParseDuration(f.DefValue); err == nil {
			if e, err := time.ParseDuration(row.def); err == nil && e == d {
				return
			}
		}
		t.Errorf("docs/CONFIGURATION.md:%d: -%s defaults to %q, not %q", row.line, f.Name, f.DefValue, row.def)
	})
	for name, row := range table {
		if fs.Lookup(name) == nil {
			t.Errorf("docs/CONFIGURATION.md:%d: %s has no flag -%s", row.line, section, name)
		}
	}
}

// TestConfigurationDoc keeps docs/CONFIGURATION.md's tables equal to the
// flags of host serve and of the operators' commands.
func TestConfigurationDoc(t *testing.T) {
	tables := configTables(t)

	serveFS := flag.NewFlagSet("serve", flag.ContinueOnError)
	serveFS.SetOutput(io.Discard)
	hostFlags(serveFS)
	logFlags(serveFS)
	checkFlagTable(t, "`host serve`", tables["`host serve`"], serveFS)

	opFS := flag.NewFlagSet("operators", flag.ContinueOnError)
	opFS.SetOutput(io.Discard)
	new(connFlags).declare(opFS)
	checkFlagTable(t, "The operators' commands", tables["The operators' commands"], opFS)
}
