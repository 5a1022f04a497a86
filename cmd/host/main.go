// Command host runs a Cairn node: by default an embedded NATS server with
// JetStream storing its journal under -data, and the node on top of it
// (package cmd/internal/node). Its other subcommands are the operators'
// CLI: deploy a function, list and roll back functions, inspect and
// requeue poison messages, enqueue a message, hash a NATS service user's
// password, print the version ("host help" lists them all).
//
//	go run ./cmd/host                 # serve (the default subcommand)
//	go run ./cmd/host serve -data /var/lib/cairn
//	go run ./cmd/host deploy ./examples/archive
//
// The benchmarks are a binary of their own, cmd/cairn-bench.
//
// Every flag can also be set by an environment variable CAIRN_<NAME>, with
// the flag's name upper-cased and dashes turned into underscores
// (CAIRN_NATS_URL for -nats-url). A flag on the command line wins. Flags
// may follow the arguments; every command answers -h with its usage.
//
// It exits 1 with the reason on stderr when the node cannot start (a bad
// flag, a busy port, a data directory locked by another node) or stops on
// its own, and 0 after SIGINT or SIGTERM once the commands it had taken
// are answered. Its cost is the node's (docs/PERFORMANCE.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/cmd/internal/cors"
	"github.com/cairn-dev/cairn/cmd/internal/hostcheck"
	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/commit"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/journal/values"
	"github.com/cairn-dev/cairn/projections"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "cairn:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	sub := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	} else if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		sub, args = "help", args[1:]
	} else if len(args) > 0 && (args[0] == "-version" || args[0] == "--version") {
		sub, args = "version", args[1:]
	}
	switch sub {
	case "serve":
		return serve(args)
	case "init":
		return initCmd(args)
	case "deploy":
		return deploy(args)
	case "functions":
		return functionsCmd(args)
	case "poison":
		return poisonCmd(args)
	case "enqueue":
		return enqueue(args)
	case "outbox":
		return outboxCmd(args)
	case "history":
		return historyCmd(args)
	case "cluster":
		return clusterCmd(args)
	case "projections":
		return projectionsCmd(args)
	case "nats-password":
		return natsPassword(args, os.Stdin, os.Stdout)
	case "version":
		return versionCmd(args, os.Stdout)
	case "help":
		if len(args) > 0 && args[0] != "help" {
			return run([]string{args[0], "-h"}) // host help deploy
		}
		usage(os.Stdout)
		return nil
	}
	usage(os.Stderr)
	return fmt.Errorf("unknown subcommand %q", sub)
}

// hostFlags declares the flags of a host on fs and returns the config they fill.
func hostFlags(fs *flag.FlagSet) *node.Config {
	cfg := &node.Config{}
	fs.StringVar(&cfg.DataDir, "data", "./data", "data directory (the embedded server's JetStream store, the views' snapshots)")
	fs.StringVar(&cfg.NATSListen, "nats-listen", "127.0.0.1:4222", "client address of the embedded NATS server")
	fs.StringVar(&cfg.NATSURL, "nats-url", "", "use this NATS server or cluster instead of the embedded one")
	fs.StringVar(&cfg.NATSCreds, "nats-creds", "", "file with user:password to connect to -nats-url with (another node's <data>/nats/node.user); default: the credentials in -nats-url, if any")
	fs.StringVar(&cfg.NATSServeCreds, "nats-serve-creds", "", "file with user:password of the user the node answers requests as on -nats-url, one that may only publish replies (docs/PROTOCOL.md, An external NATS server); default: the serving user of another node's embedded server")
	fs.StringVar(&cfg.NATSUsers, "nats-users", "", "JSON file of the embedded server's service users, each with rights on some tables of one storage account, queues and functions, outbox subjects and streams to consume (docs/PROTOCOL.md, Giving a service its own user); mode 0600; not with -nats-url")
	fs.IntVar(&cfg.Replicas, "replicas", 1, "stream replicas (3 on a cluster)")
	fs.IntVar(&cfg.ViewReplicas, "view-replicas", 0, "hosts holding each view shard of a table on a cluster (2 is the sane choice): each host then holds its share of every table's entities and asks the others for the rest (docs/SCALE.md); 0: every host holds every table whole; give every host the same")
	fs.StringVar(&cfg.HTTP, "http", "127.0.0.1:10002", "address of the HTTP API (Azure Tables protocol); \"off\" for none")
	fs.IntVar(&cfg.HTTPMaxConns, "http-max-conns", node.DefaultHTTPMaxConns, "HTTP connections open at once; at the cap a new one takes the place of the one idle longest, else of one that has not sent its request header, else of the busiest client address's oldest request, else it is closed")
	fs.Var((*accountsFlag)(&cfg.API.Accounts), "accounts", "further storage accounts for the HTTP API, as name:base64key,… (the development account "+httpapi.DevAccountName+" is served too unless -dev-account=false)")
	fs.Var(invertedBool{&cfg.API.NoDevAccount}, "dev-account", "serve the development account "+httpapi.DevAccountName+" with its well-known key, and let NATS clients without credentials send commands, queue messages and function calls (default true)")
	fs.Var(tableShardsFlag{&cfg.TableShards}, "table-shards", fmt.Sprintf("view shards a table created on this node is cut into, fixed for its life: the most hosts that can share its entities, times the replicas (docs/SCALE.md), at most %d; 0 for none, the journal layout older hosts read, while a cluster is being upgraded (default %d)", engine.MaxShards, engine.DefaultShards))
	fs.IntVar(&cfg.Commit.MaxTablesPerAccount, "max-tables-per-account", commit.DefaultMaxTablesPerAccount, "tables one storage account may have; creating one more fails with TableQuotaExceeded")
	fs.StringVar(&cfg.OperatorToken, "operator-token", "", "secret the operators' API (/$cairn/) and /metrics require as Authorization: Bearer <token>, at least 16 characters (default: the token of <data>/operator.token, created on first start); prefer CAIRN_OPERATOR_TOKEN to the command line")
	fs.Var(&hostsFlag{n: &cfg.API.Hosts}, "http-hosts", "DNS names the HTTP API answers (tables.example.com), comma-separated, besides IP addresses and localhost; a request with another name in its Host is refused (DNS rebinding): the development account's, the operators' API's, /metrics' and the console's, and once names are listed every request's; none by default")
	fs.Var(&corsFlag{o: &cfg.API.CORS}, "cors-origins", "web origins a browser may call the HTTP API from, exactly as scheme://host[:port], comma-separated; * for any (the Tables API only); none by default")
	fs.Var((*listFlag)(&cfg.OutboxSubjects), "outbox-subjects", "NATS subject patterns (orders.>, billing.*.created), comma-separated, that the outbox messages of commands may name besides Cairn queues; never $… or _… or under -prefix; none by default")
	fs.Var((*listFlag)(&cfg.OutboxCore), "outbox-core", "NATS subject patterns (notify.>, cache.*.invalidate), comma-separated, whose outbox messages go to core NATS: published once without an acknowledgement, at most once; every other subject's messages wait, blocking their partition, until a stream stores them; none by default")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate (chain) to serve the HTTP API and the embedded NATS server's client port with TLS")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key of -tls-cert")
	fs.StringVar(&cfg.Prefix, "prefix", "cairn", "first token of every subject and stream name")
	fs.Var(invertedBool{&cfg.NoSnapshots}, "snapshots", "write snapshots of the views to <data>/snapshots and start from the newest, replaying only the journal after it (default true)")
	fs.Var(invertedBool{&cfg.NoSharedSnapshots}, "snapshots-shared", "with -snapshots, also put each snapshot in the JetStream object store <PREFIX>_SNAPSHOTS (-replicas), and start a table's view from the store's when it is newer than this node's, so that a new node replays only the journal after it (default true)")
	fs.StringVar(&cfg.History, "history", "all", "how much of its journal a table keeps when it has no retention of its own (host history): all, a duration (7d, 36h) or a number of records (1000000); records are pruned only right after a shared snapshot (docs/OPERATIONS.md, History)")
	fs.IntVar(&cfg.Views.SnapshotEvery, "snapshot-every", projections.DefaultSnapshotEvery, "records a table's view applies after its last snapshot before it writes the next, whatever the time: what a start after a crash replays at most")
	fs.Int64Var(&cfg.Views.SnapshotBytes, "snapshot-bytes", projections.DefaultSnapshotBytes, "bytes of records a table's view applies after its last snapshot before it writes the next, whichever of -snapshot-every and this comes first")
	fs.DurationVar(&cfg.Views.SnapshotInterval, "snapshot-interval", projections.DefaultSnapshotInterval, "the longest a table's records go without a snapshot: a view with fewer records than the bounds since its last snapshot writes one once that is this old (negative: never by time). Before bounded tails it was the least time between two snapshots")
	fs.Float64Var(&cfg.Views.SnapshotCompact, "snapshot-compact", projections.DefaultSnapshotCompact, "a table's snapshots are deltas after a full base; a new base is written once the chain holds more entities beyond the table's (written again, or deleted) than this fraction of them (a start then loads at most 1+this times the table)")
	fs.DurationVar(&cfg.Views.SnapshotBaseAge, "snapshot-base-age", projections.DefaultSnapshotBaseAge, "a new full base is written once a written table's base is this old, so that bases, where the journal may be pruned, come at regular positions")
	fs.BoolVar(&cfg.SyncAlways, "sync-always", false, "fsync every journal write before acknowledging it (embedded server)")
	fs.Var(invertedBool{&cfg.Functions.NoBuiltins}, "builtins", "run the built-in functions (archive on the queue \"archive\"; values-scan and values-sweep, which remove the large values no entity holds) (default true)")
	fs.IntVar(&cfg.Functions.MemoryMB, "functions-memory", 0, "memory budget of the function sandbox in MiB: the loaded functions' memoryMB × concurrency must fit, or a deploy is refused (default 2048)")
	fs.Int64Var(&cfg.Functions.QueueMaxMessages, "queue-max-messages", 0, "messages one queue (poison queues included) may hold: past it the queue stream refuses new ones, whoever sends them; give every node of a server the same (default 1000000)")
	fs.Int64Var(&cfg.Functions.QueueMaxBytes, "queue-max-bytes", 0, fmt.Sprintf("bytes every queue together may hold: past it the queue stream refuses every new message, whoever sends it; at least %d (one message of the largest size); give every node of a server the same (default %d, 1 GiB)", functions.MinQueueMaxBytes, functions.DefaultQueueMaxBytes))
	fs.Int64Var(&cfg.API.MaxValue, "value-max-bytes", values.DefaultMaxSize, "bytes one large value (PUT …/$value) may hold; a larger upload is refused with RequestBodyTooLarge and nothing is stored (docs/VALUES.md)")
	fs.IntVar(&cfg.ValueSessions, "value-sessions", 32, "large values' uploads and downloads over NATS (PutValue, GetValue) open at once on this node; past it they are refused with ServerBusy. Each may hold up to 2 MiB of chunks its client sent ahead")
	fs.DurationVar(&cfg.Commit.ClaimWindow, "value-claim-window", engine.DefaultClaimWindow, "how long after its upload a large value may be newly referenced by a write; later the write is refused with InvalidInput. An unreferenced value lives at most this plus -value-sweep-margin plus -value-sweep-every; give every node the same")
	fs.DurationVar(&cfg.Functions.ValueSweepMargin, "value-sweep-margin", functions.DefaultSweepMargin, "added to -value-claim-window before the sweep removes an unreferenced large value: covers the nodes' clock skew and a write's time to commit")
	fs.DurationVar(&cfg.Functions.ValueSweepEvery, "value-sweep-every", functions.DefaultSweepEvery, "interval of the values-scan timer, which lists the large values and sends those past the claim window and margin to the values-sweep queue")
	fs.StringVar(&cfg.Functions.Failpoint, "failpoint", "", "for crash tests: kill the process at this step (functions.invoke, functions.between-commits, history.between-horizon-and-purge; a function's step only: functions.invoke:<function>)")
	cli.Hide(fs, "failpoint") // tests only
	return cfg
}

// tableShardsFlag is -table-shards: the number, or 0 for none (stored as
// node.Config's -1; its 0 is the default).
type tableShardsFlag struct{ n *int }

func (f tableShardsFlag) String() string {
	switch {
	case f.n == nil || *f.n == 0:
		return strconv.Itoa(engine.DefaultShards)
	case *f.n < 0:
		return "0"
	}
	return strconv.Itoa(*f.n)
}

func (f tableShardsFlag) Set(v string) error {
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		return err
	case n < 0 || n > engine.MaxShards:
		return fmt.Errorf("must be between 0 (none) and %d", engine.MaxShards)
	case n == 0:
		n = -1
	}
	*f.n = n
	return nil
}

// invertedBool is a boolean flag stored negated (-dev-account sets
// NoDevAccount).
type invertedBool struct{ no *bool }

func (b invertedBool) IsBoolFlag() bool { return true }

func (b invertedBool) String() string {
	if b.no == nil {
		return "true"
	}
	return strconv.FormatBool(!*b.no)
}

func (b invertedBool) Set(v string) error {
	on, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	*b.no = !on
	return nil
}

// accountsFlag parses -accounts name:base64key,….
type accountsFlag []httpapi.Account

func (a *accountsFlag) String() string {
	if a == nil {
		return ""
	}
	names := make([]string, len(*a))
	for i, acct := range *a {
		names[i] = acct.Name + ":…"
	}
	return strings.Join(names, ",")
}

func (a *accountsFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		acct, err := httpapi.ParseAccount(s)
		if err != nil {
			return err
		}
		*a = append(*a, acct)
	}
	return nil
}

// listFlag parses a comma-separated list, blanks dropped; setting it
// again replaces the list (a flag on the command line wins over the
// environment).
type listFlag []string

func (l *listFlag) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, ",")
}

func (l *listFlag) Set(v string) error {
	*l = nil
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// corsFlag parses -cors-origins a,b into the HTTP API's origins.
type corsFlag struct {
	list string
	o    *cors.Origins
}

func (c *corsFlag) String() string { return c.list }

func (c *corsFlag) Set(v string) error {
	o, err := cors.Parse(strings.Split(v, ","))
	if err != nil {
		return err
	}
	c.list, *c.o = v, o
	return nil
}

// hostsFlag parses -http-hosts a,b into the names the HTTP API answers.
type hostsFlag struct {
	list string
	n    *hostcheck.Names
}

func (h *hostsFlag) String() string { return h.list }

func (h *hostsFlag) Set(v string) error {
	n, err := hostcheck.Parse(strings.Split(v, ","))
	if err != nil {
		return err
	}
	h.list, *h.n = v, n
	return nil
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := hostFlags(fs)
	logger := logFlags(fs)
	cli.Usage(fs, serveUsage)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected arguments %q", fs.Args())
	}
	log, err := logger(os.Stderr)
	if err != nil {
		return err
	}
	cfg.Log = log
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return explainListen(node.Run(ctx, *cfg, nil), cfg)
}
