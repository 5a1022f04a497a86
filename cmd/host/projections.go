package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/projections"
)

// projectionsCmd declares, lists, rebuilds and drops projections.
func projectionsCmd(args []string) error {
	fs := flag.NewFlagSet("projections", flag.ContinueOnError)
	var conn connFlags
	conn.declare(fs)
	wait := fs.Duration("wait", 10*time.Minute, "how long deploy and rebuild wait for every host to serve the new version (0: do not wait)")
	cli.Usage(fs, projectionsUsage)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	a := fs.Args()
	if len(a) == 0 {
		fs.Usage()
		return errors.New("projections: missing arguments")
	}
	if want := map[string]int{"list": 1, "deploy": 2, "rebuild": 2, "drop": 2}[a[0]]; want == 0 {
		fs.Usage()
		return fmt.Errorf("projections: unknown command %q", a[0])
	} else if len(a) != want {
		fs.Usage()
		return fmt.Errorf("projections %s: %d arguments, want %d", a[0], len(a)-1, want-1)
	}
	var defs []*projections.Definition
	if a[0] == "deploy" {
		var err error
		if defs, err = readDefinitions(a[1]); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *wait+time.Minute)
	defer cancel()
	nc, js, err := conn.dial()
	if err != nil {
		return err
	}
	defer nc.Close()
	kv, err := js.KeyValue(ctx, projections.DeclarationsBucket(conn.prefix))
	if err != nil {
		return fmt.Errorf("projections: bucket %s: %w (has a host with prefix %q run?)", projections.DeclarationsBucket(conn.prefix), err, conn.prefix)
	}
	switch a[0] {
	case "list":
		return listProjections(ctx, kv, os.Stdout)
	case "deploy":
		for _, def := range defs {
			did, err := projections.Deploy(ctx, kv, def)
			if err != nil {
				return err
			}
			fmt.Printf("%s version %d: %s\n", def.Full(), def.Version, did)
		}
		if *wait > 0 {
			for _, def := range defs {
				if err := awaitProjection(ctx, kv, def, *wait, os.Stdout); err != nil {
					return err
				}
			}
		}
	case "rebuild":
		def, err := projections.Rebuild(ctx, kv, a[1])
		if err != nil {
			return err
		}
		fmt.Printf("%s version %d: rebuilding (generation %d)\n", def.Full(), def.Version, def.Generation)
		if *wait > 0 {
			return awaitProjection(ctx, kv, def, *wait, os.Stdout)
		}
	case "drop":
		if err := projections.Drop(ctx, kv, a[1]); err != nil {
			return err
		}
		fmt.Printf("%s: dropped\n", a[1])
	}
	return nil
}

// readDefinitions reads a file of one definition or a JSON array of them,
// refusing unknown fields (a misspelt "include" must not pass silently).
func readDefinitions(path string) ([]*projections.Definition, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	var defs []*projections.Definition
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if len(b) > 0 && b[0] == '[' {
		err = dec.Decode(&defs)
	} else {
		var d projections.Definition
		err = dec.Decode(&d)
		defs = append(defs, &d)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: not a projection definition: %w", path, err)
	}
	for _, d := range defs {
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return defs, nil
}

func listProjections(ctx context.Context, kv jetstream.KeyValue, w io.Writer) error {
	defs, nodes, err := projections.Declared(ctx, kv)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECTION\tSOURCE\tKIND\tDECLARED\tHOST\tSERVING\tSTATE\tENTITIES\tPOSITION\tLAG\tBUILD")
	for _, d := range defs {
		seen := false
		for _, n := range nodes {
			for _, st := range n.Projections {
				if projections.Lower(st.Full) != projections.Lower(d.Full()) {
					continue
				}
				seen = true
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\t%d\t%d\t%d\t%s\n", d.Full(), d.FullSource(), d.Kind, d.Version, n.Node, st.Version, st.State, st.Entities, st.Seq, st.Lag, buildLine(st))
			}
		}
		if !seen {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t-\t-\tno host reports it\t-\t-\t-\t\n", d.Full(), d.FullSource(), d.Kind, d.Version)
		}
	}
	tw.Flush()
	for _, n := range nodes {
		for _, st := range n.Projections {
			if st.Error != "" {
				fmt.Fprintf(w, "%s on %s: %s\n", st.Full, n.Node, st.Error)
			}
		}
	}
	return nil
}

func buildLine(st projections.ProjectionStatus) string {
	b := st.Build
	if b == nil {
		return ""
	}
	pct := 100.0
	if b.Total > 0 {
		pct = 100 * float64(b.Done) / float64(b.Total)
	}
	s := fmt.Sprintf("v%d %s %d/%d (%.0f%%) %.0f/s", b.Version, b.Phase, b.Done, b.Total, pct, b.RatePerSec)
	if b.ETA != "" {
		s += " eta " + b.ETA
	}
	return s
}

// awaitProjection waits until every host that reports serves def's version
// and generation, printing the builds' progress every 2 s; it fails when a
// host's build fails or the wait ends first, naming the hosts not done.
func awaitProjection(ctx context.Context, kv jetstream.KeyValue, def *projections.Definition, wait time.Duration, w io.Writer) error {
	// A failure counts only in a report written after the declaration.
	since := time.Now()
	deadline := since.Add(wait)
	lastPrint := time.Time{}
	for {
		_, nodes, err := projections.Declared(ctx, kv)
		if err != nil {
			return err
		}
		var pending []string
		var noSource []string // hosts without the source table
		source := ""
		for _, n := range nodes {
			var st *projections.ProjectionStatus
			for i := range n.Projections {
				if projections.Lower(n.Projections[i].Full) == projections.Lower(def.Full()) {
					st = &n.Projections[i]
				}
			}
			switch {
			case st != nil && st.Version == def.Version && st.Generation == def.Generation && st.State == "active":
				continue
			case st != nil && st.State == "faulted":
				return fmt.Errorf("%s on %s: %s", def.Full(), n.Node, st.Error)
			case st != nil && st.Build == nil && st.Error != "" && n.Time.After(since.Add(projections.ReportEvery)):
				return fmt.Errorf("%s version %d on %s: the build failed: %s", def.Full(), def.Version, n.Node, st.Error)
			case st != nil && st.State == "no-source" && n.Time.After(since.Add(projections.ReportEvery)):
				// Declared before its table: built when the table is created.
				noSource = append(noSource, n.Node)
				source = st.Source
				continue
			}
			line := n.Node + ": waiting for its report"
			if st != nil && st.Build != nil {
				line = n.Node + ": " + buildLine(*st)
			}
			pending = append(pending, line)
		}
		if len(nodes) == 0 {
			pending = append(pending, "no host has reported in the last "+(3*projections.ReportEvery).String()+" (is one running with this -prefix?)")
		}
		if len(pending) == 0 {
			if served := len(nodes) - len(noSource); served > 0 {
				fmt.Fprintf(w, "%s version %d: served by %d host(s)\n", def.Full(), def.Version, served)
			}
			if len(noSource) > 0 {
				fmt.Fprintf(w, "%s version %d: its source table %s does not exist yet on %s; the projection is built when the table is created\n",
					def.Full(), def.Version, source, strings.Join(noSource, ", "))
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s version %d is not served everywhere after %v: %s", def.Full(), def.Version, wait, strings.Join(pending, "; "))
		}
		if time.Since(lastPrint) >= 2*time.Second {
			lastPrint = time.Now()
			fmt.Fprintf(w, "%s version %d: %s\n", def.Full(), def.Version, strings.Join(pending, "; "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
