package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/projections/members"
)

// clusterCmd lists the cluster's hosts from their heartbeats.
func clusterCmd(args []string) error {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	var conn connFlags
	conn.declare(fs)
	cli.Usage(fs, clusterUsage)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return errors.New("cluster: no arguments")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, js, err := conn.dial()
	if err != nil {
		return err
	}
	defer nc.Close()
	hosts, err := members.Hosts(ctx, js, conn.prefix)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tLIVE\tHEARTBEAT_BEHIND_NEWEST\tKEY")
	for _, h := range hosts {
		live := "yes"
		if !h.Live {
			live = "no"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", h.Name, live, h.Behind.Round(100*time.Millisecond), h.Key)
	}
	return tw.Flush()
}
