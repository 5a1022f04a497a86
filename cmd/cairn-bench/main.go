// Command cairn-bench runs Cairn's benchmarks, each against hosts it starts
// itself in temporary directories, and prints every figure next to a
// baseline measured in the same run (raw JetStream, raw work queues,
// Azurite). docs/PERFORMANCE.md has the figures and what bounds them.
//
//	go run ./cmd/cairn-bench                 # end to end over NATS (the default)
//	go run ./cmd/cairn-bench http            # the HTTP API side by side with Azurite
//	go run ./cmd/cairn-bench functions       # the function runner (from the repository's root)
//	go run ./cmd/cairn-bench projections     # what declared projections cost
//	go run ./cmd/cairn-bench start           # a view's start from the journal and from a snapshot
//	go run ./cmd/cairn-bench start -kill     # a node's start after SIGKILL under a write load
//	go run ./cmd/cairn-bench snapshots       # what writing snapshots costs the inserts
//	go run ./cmd/cairn-bench values          # a large value's upload, download and archive beside the object store's
//	go run ./cmd/cairn-bench -baseline main  # any of them on main's build and on this tree's, side by side
//
// It is a binary of its own so that the host links neither the Azure SDK
// nor the Azurite installer. Flags can be set as CAIRN_<NAME> too. A
// failure stops the run with the reason and exit status 1 (http needs node
// and npm for Azurite unless -no-azurite); a figure a target cannot give
// on this platform is printed as such. A full run takes minutes and both
// cores.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "cairn-bench:", err)
		os.Exit(1)
	}
}

// childBenchmarks are the processes a benchmark starts of this binary: not
// benchmarks themselves, and never compared with -baseline.
var childBenchmarks = map[string]bool{"host-child": true, "node-child": true, "http-floor-child": true}

func usage() {
	fmt.Fprintf(os.Stderr, `usage: cairn-bench [nats] [flags]   end-to-end benchmarks over NATS (default)
       cairn-bench http [flags]     the HTTP API side by side with Azurite
       cairn-bench functions [flags] the function runner (run from the repository's root)
       cairn-bench outbox [flags]    writes with outbox messages: to visible, to delivered, delay at half load
       cairn-bench projections [flags] declared indexes: write rate with 0, 1, 3, lag on a second node, build speed
       cairn-bench start [flags]     a view's start: from the whole journal and from a snapshot, as history grows
       cairn-bench start -kill [flags] a node's start after SIGKILL under a write load, beside its start after a clean stop
       cairn-bench snapshots [flags] many-partition inserts on a node writing snapshots and on one that does not
       cairn-bench placement [flags] a simulation of view shards placed on 3 to 1,000 hosts: balance, moves on a join and a death
       cairn-bench placed [flags]    the heap of each host when 3 and 6 hosts each hold their share of a table's shards, against one host holding it whole
       cairn-bench values [flags]    a large value's upload and download through HTTP, and the archive's copy, beside the object store's own put and get
       cairn-bench [name] -baseline REF [-rounds N] [flags]
                                     any of them on REF's build and on the current tree's, side by side

Run "cairn-bench <name> -h" for the flags.
`+baselineUsage)
}

// baselineUsage is the help of -baseline (baseline.go).
const baselineUsage = `
-baseline REF (or CAIRN_BASELINE) builds REF, a commit of the repository
holding the current directory, and the current tree with its uncommitted
changes, and runs the benchmark on both binaries, -rounds N rounds each
(default 3) of -rounds 1, alternating which runs first, each in its own
tree; the other flags go to both. It prints each table row's median on
both sides and head/base: above 1 is better for a rate, worse for a
duration or a size.
`

func run(args []string) error {
	if len(args) == 0 || !childBenchmarks[args[0]] {
		b, ok, err := cutBaseline(args, os.LookupEnv)
		if err != nil {
			return err
		}
		switch {
		case ok && b.sub == "help": // usage() says what -baseline does
			args = b.args
		case ok && b.help:
			fmt.Fprint(os.Stderr, baselineUsage)
			args = b.args
		case ok:
			if childBenchmarks[b.sub] {
				return fmt.Errorf("-baseline compares a benchmark, and %q is none", b.sub)
			}
			return compareBaseline(b)
		}
	}
	sub := "nats"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "nats":
		return bench(args)
	case "http":
		return benchHTTP(args)
	case "functions":
		return benchFunctions(args)
	case "outbox":
		return benchOutbox(args)
	case "projections":
		return benchProjections(args)
	case "start":
		return benchStart(args)
	case "snapshots":
		return benchSnapshotCost(args)
	case "placement":
		return benchPlacement(args)
	case "placed":
		return benchPlaced(args)
	case "values":
		return benchValues(args)
	case "host-child": // the HTTP benchmark's Cairn process (cairnchild.go)
		return hostChild(args)
	case "node-child": // the node that start -kill kills (benchkill.go)
		return nodeChildMain(args)
	case "http-floor-child": // the HTTP benchmark's net/http floor (cairnchild.go)
		return floorChild(args)
	case "help":
		usage()
		return nil
	}
	usage()
	return fmt.Errorf("unknown benchmark %q", sub)
}
