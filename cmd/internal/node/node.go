package node

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/console"
	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/natsapi"
	"github.com/cairn-dev/cairn/cmd/internal/operator"
	"github.com/cairn-dev/cairn/cmd/internal/pages"
	"github.com/cairn-dev/cairn/cmd/internal/version"
	"github.com/cairn-dev/cairn/engine/commit"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/admin"
	"github.com/cairn-dev/cairn/functions/queueadmin"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/outbox"
	"github.com/cairn-dev/cairn/projections"
	"github.com/cairn-dev/cairn/projections/members"
)

// Node is a running Cairn node.
type Node struct {
	cfg Config
	ns  *server.Server // the embedded server, or nil
	nc  *nats.Conn     // the node user's: the journal, the buckets, the queues
	// serve answers requests (the NATS front door, direct function
	// calls, the hosts' status): the serving user's connection, which may
	// publish only replies, or nc where the server has no such user.
	serve *nats.Conn
	// replies drops requests whose reply subject is not an inbox, for
	// every door that answers on serve.
	replies *wire.ReplyGuard
	j       *journal.Journal
	views   *projections.Views
	comm    *commit.Committer
	submit  httpapi.Committer // the committer, or the router in front of it
	pages   *pages.Service    // reads of tables whose shards other hosts hold too (nil: every view whole)
	api     *natsapi.Service
	fns     *functions.Runner
	queues  *queueadmin.Admin // the operators' side of the runner's queue stream
	relay   *outbox.Relay
	members *members.Members
	pruner  *projections.Pruner
	decls   *projections.Declarations
	// secret is known to every node of the system and to no client: the
	// node user's password (nil when the node connects without one). It
	// keys the outbox's message ids.
	secret []byte

	unlock  func() // releases the data directory
	httpLn  net.Listener
	conns   *connLimit // httpLn under the cap on connections (nil when HTTP is off)
	door    *frontDoor // serves conns (nil when HTTP is off)
	health  readiness
	tls     *tls.Config // nil: plain TCP
	opToken string      // the operator token ("" when HTTP is off)
	// credsFile is the node credentials file: the embedded server's, or
	// Config.NATSCreds ("" when the node has none of its own).
	credsFile string
}

// HTTPURL returns the base URL of the HTTP API ("http://127.0.0.1:10002",
// "https://…" with TLS), or "" when it is off.
func (n *Node) HTTPURL() string {
	if n.httpLn == nil {
		return ""
	}
	if n.tls != nil {
		return "https://" + n.httpLn.Addr().String()
	}
	return "http://" + n.httpLn.Addr().String()
}

// ConsoleURL returns the web console's URL, or "" when HTTP is off. A
// node listening on every address (0.0.0.0, ::) is named localhost there:
// a browser cannot open the unspecified address, and localhost passes the
// Host check.
func (n *Node) ConsoleURL() string {
	if n.httpLn == nil {
		return ""
	}
	addr := n.httpLn.Addr().String()
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			addr = net.JoinHostPort("localhost", port)
		}
	}
	scheme := "http://"
	if n.tls != nil {
		scheme = "https://"
	}
	return scheme + addr + console.Path
}

// OperatorToken returns the token the operators' API and /metrics require
// ("Authorization: Bearer <token>"), or "" when HTTP is off.
func (n *Node) OperatorToken() string { return n.opToken }

// Functions returns the node's function runner.
func (n *Node) Functions() *functions.Runner { return n.fns }

// QueueAdmin returns the operators' side of the node's queue stream: its
// queues' depths, messages and poison queues.
func (n *Node) QueueAdmin() *queueadmin.Admin { return n.queues }

// Views returns the node's views (for in-process readers and tests).
func (n *Node) Views() *projections.Views { return n.views }

// Members returns the node's view of the cluster's live hosts.
func (n *Node) Members() *members.Members { return n.members }

// CommitStats returns the committer's counters.
func (n *Node) CommitStats() commit.Stats { return n.comm.Stats() }

// ClientURL returns the URL clients connect to.
func (n *Node) ClientURL() string {
	if n.ns != nil {
		return n.ns.ClientURL()
	}
	return n.cfg.NATSURL
}

// NATSServer returns the embedded NATS server, or nil when the node
// connects to another (tests read its accounts).
func (n *Node) NATSServer() *server.Server { return n.ns }

// NATSCredsFile returns the file of the credentials the node connects
// with ("user:password"): <DataDir>/nats/node.user for the embedded
// server, Config.NATSCreds otherwise ("" when it has none). Other nodes
// and the operators' CLI connect to ClientURL with them.
func (n *Node) NATSCredsFile() string { return n.credsFile }

// Run runs a node until ctx ends: it connects to NATS (or starts the
// embedded server), waits for JetStream to answer (a cluster still
// electing its leader, servers not up yet: as long as ctx lasts), starts the components in the order of the data flow,
// calls ready (if not nil) once the node serves, and at the end stops them
// in the reverse order, so that commands already taken are answered before
// the journal goes. It returns nil after a clean stop, or why the node
// could not start or stopped on its own.
func Run(ctx context.Context, cfg Config, ready func(*Node)) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	n := &Node{cfg: cfg, replies: &wire.ReplyGuard{Log: cfg.Log}}
	log := cfg.Log
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("node: tls: %w", err)
		}
		n.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if cfg.HTTP != "off" {
		if err := n.loadOperatorToken(); err != nil {
			return err
		}
		// Listen first: a busy port is reported before anything starts.
		ln, err := net.Listen("tcp", cfg.HTTP)
		if err != nil {
			return fmt.Errorf("node: http: %w", err)
		}
		n.httpLn = ln
		defer ln.Close()
		// The health endpoints answer from now on; the APIs once started.
		n.conns = newConnLimit(ln, cfg.HTTPMaxConns, log)
		n.door = newFrontDoor(&http.Server{
			TLSConfig:         n.tls,
			ReadHeaderTimeout: readHeaderTimeout,
			IdleTimeout:       idleTimeout,
			ConnState:         n.conns.ConnState,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}, &n.health)
		defer n.door.serve(n.conns, log)()
	}
	if err := n.connect(ctx); err != nil {
		return err
	}
	defer n.close()
	defer n.health.startProbe(ctx, n.nc, n.serve)()
	n.warnExposed()
	// A cluster may still be electing its meta leader, or be short of
	// servers for the streams' replicas: wait for both to pass.
	if err := defaultStartRetry.waitJetStream(ctx, log, n.nc); err != nil {
		return err
	}
	n.health.jetStreamAnswered()
	j, err := journal.New(n.nc, journal.Config{Prefix: cfg.Prefix, Replicas: cfg.Replicas, Log: log})
	if err != nil {
		return err
	}
	if err := defaultStartRetry.untilUp(ctx, log, "create the catalog stream", j.Init); err != nil {
		return err
	}
	n.j = j

	g := newGroup(log)
	err = n.start(ctx, g)
	if err == nil {
		n.health.started.Store(true)
		log.Info("cairn host ready", n.readyAttrs()...)
		if ready != nil {
			ready(n)
		}
		select {
		case <-ctx.Done():
		case <-g.Failed():
		case <-n.door.Failed():
			err = n.door.err
		}
		log.Info("shutting down")
	} else if ctx.Err() != nil {
		err = nil // asked to stop while starting
	}
	n.health.stopped.Store(true)
	err = errors.Join(err, g.Stop())
	log.Info("stopped")
	return err
}

// start starts the components in the order of the data flow, each once the
// one before serves: the cluster's membership, the declared projections,
// the views (once they have replayed the journal), the committer, the NATS
// front door, the function runner, the outbox relay, the history pruner,
// the HTTP front door.
func (n *Node) start(ctx context.Context, g *group) error {
	cfg, log := n.cfg, n.cfg.Log
	vcfg := cfg.Views
	if !cfg.NoSnapshots && vcfg.SnapshotDir == "" {
		vcfg.SnapshotDir = filepath.Join(cfg.DataDir, "snapshots")
	} else if cfg.NoSnapshots {
		vcfg.SnapshotDir = ""
	}
	js, err := jetstream.New(n.nc)
	if err != nil {
		return err
	}
	if vcfg.SnapshotDir != "" && !cfg.NoSharedSnapshots && vcfg.SnapshotStore == nil {
		err := defaultStartRetry.untilUp(ctx, log, "open the shared snapshots' bucket", func(ctx context.Context) error {
			obj, err := projections.OpenSnapshotStore(ctx, js, cfg.Prefix, cfg.Replicas)
			vcfg.SnapshotStore = obj
			return err
		})
		if err != nil {
			return err
		}
	} else if vcfg.SnapshotDir == "" || cfg.NoSharedSnapshots {
		vcfg.SnapshotStore = nil
	}
	if !cfg.history.All() && vcfg.SnapshotStore == nil {
		log.Warn("-history is set but the snapshots are not shared (-snapshots, -snapshots-shared): no journal is pruned, since a new node could not start without the records", "history", cfg.history.String())
	}
	res, err := openResources(ctx, log, js, cfg)
	if err != nil {
		return err
	}
	name := nodeName(cfg.DataDir)
	var pl *placer // the placement of the views' shards, on the members below
	if cfg.ViewReplicas > 0 {
		vcfg.Placement = func(table string, epoch uint64, shards uint32) []bool { return pl.held(table, epoch, shards) }
	}
	n.views = projections.NewViews(n.j, log, vcfg)
	n.health.views.Store(n.views)
	// The live hosts, for the operators now and the views' placement
	// (docs/SCALE.md).
	n.members = members.New(res.hosts, members.Config{Host: nodeKey(name), Name: name, Log: log})
	if err := g.Start(ctx, "cluster members", n.members); err != nil {
		return fmt.Errorf("node: cluster members: %w", err)
	}
	if cfg.ViewReplicas > 0 {
		pl = newPlacer(nodeKey(name), cfg.ViewReplicas, n.members)
	}
	// The declared projections before the views replay, so that every
	// table follows its projections from its first record.
	n.decls = projections.NewDeclarations(res.declarations, cfg.Prefix, n.views, log, nodeKey(name))
	if err := g.Start(ctx, "projections", n.decls); err != nil {
		return fmt.Errorf("node: projections: %w", err)
	}
	begin := time.Now()
	log.Info("replaying the journal into the views")
	if err := g.Start(ctx, "views", n.views); err != nil {
		return fmt.Errorf("node: views did not become ready: %w", err)
	}
	log.Info("views ready", "tables", len(n.views.Tables()), "elapsed", time.Since(begin).Round(time.Millisecond))

	// A table is marked before its first outbox message: the relay reads
	// only marked tables' journals.
	cfg.Commit.MarkMessages = outbox.NewMarker(res.outbox, n.j.TableStream).Mark
	n.comm = commit.New(n.j, n.views.ForCommitter(), log, cfg.Commit)
	if err := g.Start(ctx, "committer", n.comm); err != nil {
		return err
	}
	// What the doors and the functions submit to: the committer, or on a
	// placed cluster the router in front of it.
	var submit interface {
		natsapi.Committer
		httpapi.Committer
		functions.Committer
	} = n.comm
	if pl != nil {
		timeout := cfg.Commit.Timeout
		if timeout <= 0 {
			timeout = commit.DefaultTimeout
		}
		rt := newRouter(n.nc, cfg.Prefix, nodeKey(name), n.views, n.comm, pl, timeout+5*time.Second, log)
		if err := g.Start(ctx, "router", rt); err != nil {
			return err
		}
		submit = rt
		n.pages = pages.New(n.nc, n.views, pages.Config{Prefix: cfg.Prefix, Self: nodeKey(name), Placement: pl.owners,
			PageBudget: cmp.Or(cfg.API.PageBudget, 5*time.Second), PositionWait: cmp.Or(cfg.API.PositionWait, 10*time.Second),
			HoldSnapshot: cfg.API.HoldSnapshot, HeldSnapshots: cfg.API.HeldSnapshots, Log: log})
		if err := g.Start(ctx, "pages", n.pages); err != nil {
			return err
		}
	}
	n.submit = submit
	n.api = natsapi.New(n.serve, submit, n.views, n.j, log, natsapi.Config{Prefix: cfg.Prefix, Outbox: cfg.outbox, Replies: n.replies, PositionWait: cfg.API.PositionWait,
		PageBudget: cfg.API.PageBudget, HoldSnapshot: cfg.API.HoldSnapshot, HeldSnapshots: cfg.API.HeldSnapshots, Pages: n.pages, Values: res.values, MaxValue: cfg.API.MaxValue,
		MaxValueSessions: cfg.ValueSessions, ValueIdle: cfg.ValueIdle})
	if err := g.Start(ctx, "nats api", n.api); err != nil {
		return err
	}
	sb, err := newSandbox(ctx, cfg.DataDir, uint64(cfg.Functions.MemoryMB)<<20, log)
	if err != nil {
		return err
	}
	var remote functions.Remote // reads of partitions other hosts hold
	if n.pages != nil {
		remote = remoteReads{n.pages}
	}
	n.fns, err = functions.NewRunner(n.nc, n.views, submit, functions.Config{
		Prefix:     cfg.Prefix,
		Remote:     remote,
		Replicas:   cfg.Replicas,
		Sandbox:    sb,
		Serve:      n.serve,
		Replies:    n.replies,
		NoBuiltins: cfg.Functions.NoBuiltins,
		Failpoint:  cfg.Functions.Failpoint,
		Log:        log,

		QueueMaxMessages: cfg.Functions.QueueMaxMessages,
		QueueMaxBytes:    cfg.Functions.QueueMaxBytes,
		Queues:           res.queues,
		Registry:         res.registry,
		Node:             name,
		SecretsKey:       functions.SecretsKey(n.secret),
		ClaimWindow:      cfg.Commit.ClaimWindow,
		MaxValue:         cfg.API.MaxValue,
		Values: functions.ValueSweep{
			Store: res.values,
			LastSeq: func(ctx context.Context, t *projections.Table, pk string) (uint64, error) {
				return n.j.LastSeq(ctx, t.Name(), t.Epoch(), t.Shards(), pk)
			},
			Window: cfg.Commit.ClaimWindow,
			Margin: cfg.Functions.ValueSweepMargin,
			Every:  cfg.Functions.ValueSweepEvery,
		},
	})
	if err != nil {
		_ = sb.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("node: functions: %w", err)
	}
	n.queues = queueadmin.New(res.queues, log)
	// The runner closes the sandbox when its Run returns.
	if err := g.Start(ctx, "functions", n.fns); err != nil {
		return fmt.Errorf("node: functions: %w", err)
	}
	// The relay after the runner, which made the queues' stream.
	n.relay, err = outbox.New(n.nc, n.j, n.views, outbox.Config{
		Prefix:   cfg.Prefix,
		NodeID:   nodeKey(name),
		IDKey:    n.secret,
		Replicas: cfg.Replicas,
		Bucket:   res.outbox,
		Core:     cfg.OutboxCore,
		Log:      log,
	})
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if err := g.Start(ctx, "outbox relay", n.relay); err != nil {
		return fmt.Errorf("node: outbox: %w", err)
	}
	// The pruner after the relay, whose positions bound it.
	n.pruner = projections.NewPruner(n.views, n.j, projections.PrunerConfig{
		Default: cfg.history,
		Every:   cfg.PruneEvery,
		Grace:   cfg.PruneGrace,
		Relayed: func(ctx context.Context, table string, epoch uint64) (uint64, bool, error) {
			_, info, live := n.views.CatalogEntry(table)
			marks := live && info.Epoch == epoch && info.MarksMessages
			return outbox.Relayed(ctx, res.outbox, journal.StreamName(cfg.Prefix, table, epoch), marks)
		},
		Bases:       n.views.SharedBases,
		DedupWindow: cfg.Views.DedupWindow,
		Failpoint:   cfg.Functions.Failpoint,
		Log:         log,
	})
	if err := g.Start(ctx, "history pruner", n.pruner); err != nil {
		return err
	}
	if n.httpLn == nil {
		return nil
	}
	// The operators' endpoints are behind the operator token; the Tables
	// API signs its own requests.
	guard := operator.NewGuard(n.opToken, cfg.API.CORS)
	mux := newRoutes()
	mux.handle(admin.Prefix, guard.Wrap(admin.New(n.fns, n.queues, n.nc, cfg.Prefix)))
	mux.handle(outbox.AdminPath, guard.Wrap(n.relay.AdminHandler()))
	mux.handle(outbox.AdminPath+"/", guard.Wrap(n.relay.AdminHandler()))
	mux.handle(projections.AdminPath, guard.Wrap(n.decls.AdminHandler()))
	mux.handle(projections.AdminPath+"/", guard.Wrap(n.decls.AdminHandler()))
	mux.handle(ClusterPath, guard.Wrap(n.clusterHandler(nodeName(cfg.DataDir))))
	api := cfg.API
	api.Pages = n.pages
	build := version.Get()
	api.Metrics = func(w io.Writer) {
		n.replies.WriteMetrics(w)
		n.conns.WriteMetrics(w)
		n.api.WriteMetrics(w)
		n.fns.WriteMetrics(w)
		n.queues.WriteMetrics(w)
		n.relay.WriteMetrics(w)
		n.pruner.WriteMetrics(w)
		n.members.WriteMetrics(w)
		n.views.WriteProjectionMetrics(w)
		n.views.WriteSnapshotMetrics(w)
		n.views.WriteMoveMetrics(w)
		build.WriteMetric(w)
	}
	api.Outbox = cfg.outbox
	api.History, api.DefaultRetention = n.j, cfg.history
	api.Values = res.values
	tables := httpapi.New(n.views, n.submit, log, api)
	mux.handle("/metrics", guard.Wrap(tables.MetricsHandler()))
	// The web console: its page and scripts hold no data and are served
	// to anyone; every call they make sends the operator token.
	mux.handle(httpapi.OperatorPrefix, guard.Wrap(tables.OperatorHandler()))
	mux.handle(console.Path, console.Handler())
	// The functions' HTTP routes authorise their own requests: a route
	// whose auth is "account" as the Tables API does.
	routes := functions.NewHTTPTriggers(n.fns)
	routes.Accounts = tables.AuthenticateAccount
	mux.handle(functions.HTTPPrefix, routes)
	// GET / sends a browser to the console (the Tables API's paths start
	// with an account).
	mux.handle(console.RootPattern, console.Root(tables))
	mux.handle("/", tables)
	// Everything but the health probes and the icon answers only the
	// node's names (DNS rebinding).
	return g.Start(ctx, "http api", newAPIGate(n.door, tables.HostGuard(mux), log))
}

// readyAttrs are the log attributes that tell a user where to reach the
// node.
func (n *Node) readyAttrs() []any {
	cfg := n.cfg
	attrs := []any{"nats", n.ClientURL(), "commands", natsapi.CommandSubject(cfg.Prefix, "<Table>"), "tables", natsapi.TablesSubject(cfg.Prefix, "")}
	if n.httpLn != nil {
		account := httpapi.DevAccountName
		if cfg.API.NoDevAccount {
			account = cfg.API.Accounts[0].Name // Validate made sure there is one
		}
		attrs = append(attrs, "http", n.HTTPURL()+"/"+account, "console", n.ConsoleURL())
	}
	if n.ns != nil {
		attrs = append(attrs, "data", cfg.DataDir)
	}
	return attrs
}

// nodeKey is the node's name as the buckets' keys spell it (letters and
// digits): its heartbeat, the relay's leases, its projection reports.
// Stable across restarts, so that a restarted node takes its own leases
// back at once and counts as the host it was.
func nodeKey(name string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return fmt.Sprintf("n%016x", h.Sum64())
}

// nodeName names the node in what it reports to the operators' tools:
// its machine and its data directory ("web-1:/var/lib/cairn"), which tell
// apart the nodes of one machine.
func nodeName(dataDir string) string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	if abs, err := filepath.Abs(dataDir); err == nil {
		dataDir = abs
	}
	return host + ":" + dataDir
}
