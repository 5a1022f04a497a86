// Command tablecopy keeps a copy of a Cairn table in a JSON file, in sync
// through the table's change feed (package copier): it starts where the
// file's copy ends (the beginning when there is no file), applies every
// page of changes and saves the copy and its position after each.
//
//	go run ./examples/tablecopy -table Employees [-file copy.json] [-account acme]
//
// The copy's file is by default <temporary directory>/cairn-tablecopy/<table>.json
// (<account>.<table>.json for another account's table), never the current
// directory, so that a run from a checkout writes nothing into it; the
// program prints the path.
//
// It runs until interrupted (Ctrl-C), then exits 0; it exits 1 with the
// node's coded error (TableNotFound, TableFaulted), or when the copy is
// out of sync with the table (a change's previous ETag is not the one the
// file holds: start again with a new file).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/examples/internal/demo"
	"github.com/cairn-dev/cairn/examples/tablecopy/copier"
)

func main() { demo.Main("tablecopy", run) }

func run(args []string) error {
	fs := flag.NewFlagSet("tablecopy", flag.ContinueOnError)
	var host demo.Host
	host.NATSFlags(fs, "the host's NATS server")
	table := fs.String("table", "", "the table to copy (required)")
	path := fs.String("file", "", "the copy's file (default: <temporary directory>/cairn-tablecopy/<table>.json)")
	account := fs.String("account", "", "the table's storage account (default: the development account)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *table == "" {
		fs.Usage()
		return fmt.Errorf("-table is required")
	}
	if *path == "" {
		p, err := defaultFile(*account, *table)
		if err != nil {
			return err
		}
		*path = p
	}
	c, err := copier.Load(*path)
	if err != nil {
		return err
	}
	nc, err := host.Connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Printf("copying %s into %s from position %d (%d entities)\n", *table, *path, c.Next, len(c.Entities))
	return copier.Follow(ctx, client.New(nc, client.WithAccount(*account)), *table, c, func(c *copier.Copy) error {
		if err := copier.Save(*path, c); err != nil {
			return err
		}
		fmt.Printf("at position %d: %d entities\n", c.Next, len(c.Entities))
		return nil
	})
}

// defaultFile is the copy's file when -file is not given: one per account
// and table under the temporary directory, the same on every run so that
// a copy started again goes on from where it stopped.
func defaultFile(account, table string) (string, error) {
	// Checked here, before they name a file, as the node would check them.
	if err := engine.ValidateTableName(table); err != nil {
		return "", err
	}
	if account != "" {
		if err := engine.ValidateAccountName(account); err != nil {
			return "", err
		}
	}
	dir := filepath.Join(os.TempDir(), "cairn-tablecopy")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	name := table + ".json"
	if account != "" {
		name = account + "." + name
	}
	return filepath.Join(dir, name), nil
}
