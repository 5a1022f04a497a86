package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/outbox"
	"github.com/cairn-dev/cairn/projections"
)

// historyCmd shows how much of their journals the tables keep and sets a
// table's retention (in its stream's metadata, which every node reads).
func historyCmd(args []string) error {
	fs := flag.NewFlagSet("history", flag.ContinueOnError)
	var conn connFlags
	conn.declare(fs)
	cli.Usage(fs, historyUsage)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	a := fs.Args()
	if len(a) == 0 || (a[0] != "show" && a[0] != "set") || (a[0] == "set" && len(a) != 3) || (a[0] == "show" && len(a) > 2) {
		fs.Usage()
		return errors.New("history: want show [<table>] or set <table> <retention>")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, js, err := conn.dial()
	if err != nil {
		return err
	}
	defer nc.Close()
	if a[0] == "set" {
		if a[2] != "default" {
			if _, err := projections.ParseRetention(a[2]); err != nil {
				return fmt.Errorf("history set: %w", err)
			}
		}
		table, epoch, err := tableIncarnation(ctx, js, conn.prefix, a[1])
		if err != nil {
			return err
		}
		j, err := journal.New(nc, journal.Config{Prefix: conn.prefix})
		if err != nil {
			return err
		}
		retention := a[2]
		if retention == "default" {
			retention = ""
		}
		if err := j.SetRetention(ctx, table, epoch, retention); err != nil {
			return err
		}
		if retention == "" {
			retention = "the nodes' default (-history)"
		}
		fmt.Printf("table %s keeps %s of its journal; the nodes prune it within a minute, up to the newest shared snapshot\n", a[1], retention)
		return nil
	}
	want := ""
	if len(a) == 2 {
		want = journal.TableStreamPrefix(conn.prefix, a[1])
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOURNAL\tRETENTION\tHORIZON\tFIRST\tLAST\tRECORDS\tBYTES")
	streams := js.ListStreams(ctx, jetstream.WithStreamListSubject(journal.TableSubjects(conn.prefix)))
	found := false
	for info := range streams.Info() {
		name := info.Config.Name
		if !strings.HasPrefix(name, journal.TableStreamPrefix(conn.prefix, "")) || (want != "" && !strings.HasPrefix(name, want)) {
			continue
		}
		found = true
		h := journal.HistoryOf(info)
		ret := h.Retention
		if ret == "" {
			ret = "(default)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\n", name, ret, h.Horizon, h.First, h.Last, h.Records, h.Bytes)
	}
	if err := streams.Err(); err != nil {
		return err
	}
	if want != "" && !found {
		return fmt.Errorf("history: no journal of table %s", a[1])
	}
	return tw.Flush()
}

// tableIncarnation finds the live incarnation of a table (its full name,
// "contoso.Orders" for account contoso's) by its journal: the newest
// stream of the name.
func tableIncarnation(ctx context.Context, js jetstream.JetStream, prefix, table string) (string, uint64, error) {
	stream, err := outbox.StreamOf(ctx, js, prefix, table)
	if err != nil {
		return "", 0, fmt.Errorf("history: no journal of table %s", table)
	}
	epoch, err := strconv.ParseUint(strings.TrimPrefix(stream, journal.TableStreamPrefix(prefix, table)), 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("history: journal %s: %w", stream, err)
	}
	return table, epoch, nil
}
