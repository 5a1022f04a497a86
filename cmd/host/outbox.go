package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/outbox"
)

// outboxCmd shows where the outbox relay stands and passes the operators'
// requests to it.
func outboxCmd(args []string) error {
	fs := flag.NewFlagSet("outbox", flag.ContinueOnError)
	var conn connFlags
	conn.declare(fs)
	cli.Usage(fs, outboxUsage)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	a := fs.Args()
	if len(a) == 0 {
		fs.Usage()
		return errors.New("outbox: missing arguments")
	}
	if want := map[string]int{"status": 1, "retry": 2, "skip": 4}[a[0]]; want != 0 && len(a) != want {
		fs.Usage()
		return fmt.Errorf("outbox %s: %d arguments, want %d", a[0], len(a)-1, want-1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, js, err := conn.dial()
	if err != nil {
		return err
	}
	defer nc.Close()
	switch a[0] {
	case "status":
		rs, err := outbox.Reports(ctx, js, conn.prefix)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "JOURNAL\tPOSITION\tHEAD\tLAG\tLAG_SECONDS\tBLOCKED")
		now := time.Now()
		for _, r := range rs {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t%d\n", r.Stream, r.Position, r.Head, r.LagRecords(), r.LagSeconds(now), len(r.Blocked))
		}
		tw.Flush()
		for _, r := range rs {
			for _, b := range r.Blocked {
				reason := string(b.Reason)
				if reason == "" {
					reason = "blocked" // written by a relay older than reasons
				}
				fmt.Printf("%s: partition %q blocked at record %d message %d → %s for %s (%d attempts, %d waiting): %s: %s\n",
					r.Stream, b.Partition, b.Seq, b.Index, b.Destination, time.Since(b.Since).Round(time.Second), b.Attempts, b.Waiting, reason, firstLine(b.Error, 120))
				if b.Remedy != "" {
					fmt.Printf("  what to do: %s\n", b.Remedy)
				}
			}
		}
	case "retry", "skip":
		stream, err := outbox.StreamOf(ctx, js, conn.prefix, a[1])
		if err != nil {
			return err
		}
		kv, err := js.KeyValue(ctx, outbox.BucketName(conn.prefix))
		if err != nil {
			return err
		}
		if a[0] == "retry" {
			if err := outbox.Retry(ctx, kv, stream); err != nil {
				return err
			}
			fmt.Printf("asked the relay of %s to try its blocked messages now\n", stream)
			return nil
		}
		seq, err1 := strconv.ParseUint(a[2], 10, 64)
		index, err2 := strconv.Atoi(a[3])
		if err1 != nil || err2 != nil || index < 0 {
			return fmt.Errorf("outbox skip: %q %q are not a record's sequence and a message's index in it (from 0, across the record's commands)", a[2], a[3])
		}
		if err := outbox.Skip(ctx, js, kv, stream, seq, index); err != nil {
			return err
		}
		fmt.Printf("asked the relay of %s to skip message %d of record %d at its next attempt\n", stream, index, seq)
	default:
		fs.Usage()
		return fmt.Errorf("outbox: unknown command %q", a[0])
	}
	return nil
}
