// Package host assembles a Cairn host: the embedded NATS server (or a
// connection to an existing one), the journal, the views, the committer and
// the NATS command service. cmd/host reads flags into a Config and calls Run;
// tests start hosts in-process the same way.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/natsapi"
	"github.com/cairn-dev/cairn/engine/commit"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/projections"
)

// Config is a host's configuration. The zero value plus DataDir is a
// working single-machine host.
type Config struct {
	// DataDir holds the embedded server's JetStream store ("./data").
	DataDir string
	// NATSListen is the embedded server's client address
	// ("127.0.0.1:4222"); port 0 picks a free port.
	NATSListen string
	// NATSURL, when set, connects to an existing NATS server or cluster
	// instead of embedding one.
	NATSURL string
	// Replicas is the replica count of the streams (1; 3 on a cluster).
	Replicas int
	// HTTP is the HTTP API's address ("127.0.0.1:10002"; port 0 picks a
	// free port; "off" serves no HTTP).
	HTTP string
	// API tunes the HTTP API (accounts, page budget, read-your-writes wait).
	API httpapi.Config
	// Prefix is the first token of every subject and stream ("cairn").
	Prefix string
	// SyncAlways makes the embedded server fsync every write before it
	// acknowledges it (survives power loss; much slower). Otherwise an
	// acknowledged write is in the OS and fsynced within 2 minutes.
	SyncAlways bool
	// Log receives the host's log lines (slog.Default() when nil).
	Log *slog.Logger
	// Views and Commit tune those components; zero values are defaults.
	Views  projections.Config
	Commit commit.Config
	// Functions configures the function runner (built-ins, failpoints).
	Functions FunctionsConfig
}

// FunctionsConfig is the part of functions.Config a host's user sets; the
// rest comes from the host.
type FunctionsConfig struct {
	// NoBuiltins leaves the built-in functions (archive) off.
	NoBuiltins bool
	// Failpoint kills the process at a named step (crash tests).
	Failpoint string
}

// Validate fills defaults and checks the configuration.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		c.DataDir = "./data"
	}
	if c.NATSListen == "" {
		c.NATSListen = "127.0.0.1:4222"
	}
	if c.HTTP == "" {
		c.HTTP = "127.0.0.1:10002"
	}
	if c.Prefix == "" {
		c.Prefix = "cairn"
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		return fmt.Errorf("host: replicas must be between 1 and 5, got %d", c.Replicas)
	}
	if c.NATSURL == "" && c.Replicas != 1 {
		return errors.New("host: the embedded server is a single node: -replicas > 1 needs -nats-url of a cluster")
	}
	if _, _, err := net.SplitHostPort(c.NATSListen); err != nil {
		return fmt.Errorf("host: nats-listen %q: %v", c.NATSListen, err)
	}
	if c.HTTP != "off" {
		if _, _, err := net.SplitHostPort(c.HTTP); err != nil {
			return fmt.Errorf("host: http %q: %v", c.HTTP, err)
		}
		if err := c.API.Validate(); err != nil {
			return fmt.Errorf("host: %w", err)
		}
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return (&journal.Config{Prefix: c.Prefix, Replicas: c.Replicas}).Validate()
}

// Host is a running Cairn host.
type Node struct {
	cfg   Config
	ns    *server.Server
	nc    *nats.Conn
	j     *journal.Journal
	views *projections.Views
	comm  *commit.Committer
	fns   *functions.Runner

	unlock func() // releases the data directory
	httpLn net.Listener
}

// HTTPURL returns the base URL of the HTTP API ("http://127.0.0.1:10002"),
// or "" when it is off.
func (h *Node) HTTPURL() string {
	if h.httpLn == nil {
		return ""
	}
	return "http://" + h.httpLn.Addr().String()
}

// Functions returns the node's function runner (nil before it is ready).
func (h *Node) Functions() *functions.Runner { return h.fns }

// Views returns the host's views (for in-process readers and tests).
func (h *Node) Views() *projections.Views { return h.views }

// CommitStats returns the committer's counters (zero before the host is
// ready).
func (h *Node) CommitStats() commit.Stats {
	if h.comm == nil {
		return commit.Stats{}
	}
	return h.comm.Stats()
}

// ClientURL returns the URL clients connect to.
func (h *Node) ClientURL() string {
	if h.ns != nil {
		return h.ns.ClientURL()
	}
	return h.cfg.NATSURL
}

// Run starts the host, calls ready (if not nil) once it serves commands, and
// blocks until ctx ends; then it stops accepting commands, finishes those in
// flight and shuts down.
func Run(ctx context.Context, cfg Config, ready func(*Node)) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	h := &Node{cfg: cfg}
	log := cfg.Log
	if cfg.HTTP != "off" {
		// Listen first: a busy port is reported before anything starts.
		ln, err := net.Listen("tcp", cfg.HTTP)
		if err != nil {
			return fmt.Errorf("host: http: %w", err)
		}
		h.httpLn = ln
		defer ln.Close()
	}
	if err := h.connect(); err != nil {
		return err
	}
	defer h.close()

	var err error
	h.j, err = journal.New(h.nc, journal.Config{Prefix: cfg.Prefix, Replicas: cfg.Replicas})
	if err != nil {
		return err
	}
	if err := h.j.Init(ctx); err != nil {
		return err
	}
	// The views outlive ctx a little: commands in flight at shutdown still
	// need them to become visible. runCtx ends with ctx or when the views fail.
	vctx, stopViews := context.WithCancel(context.WithoutCancel(ctx))
	defer stopViews()
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	h.views = projections.NewViews(h.j, log, cfg.Views)
	viewsDone := make(chan error, 1)
	go func() {
		err := h.views.Run(vctx)
		if err == nil && vctx.Err() == nil {
			err = errors.New("host: views stopped")
		}
		if err != nil {
			cancelRun(err)
		}
		viewsDone <- err
	}()
	fail := func(err error) error {
		stopViews()
		<-viewsDone
		if cause := context.Cause(runCtx); cause != nil && !errors.Is(cause, context.Canceled) {
			return cause
		}
		return err
	}

	start := time.Now()
	log.Info("replaying the journal into the views")
	if err := h.views.WaitReady(runCtx); err != nil {
		if ctx.Err() != nil {
			return fail(nil)
		}
		return fail(fmt.Errorf("host: views did not become ready: %w", err))
	}
	log.Info("views ready", "tables", len(h.views.Tables()), "elapsed", time.Since(start).Round(time.Millisecond))

	cctx, cancelCommit := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCommit()
	h.comm = commit.New(cctx, h.j, h.views, log, cfg.Commit)
	svc := natsapi.New(runCtx, h.nc, h.comm, h.views, log, natsapi.Config{Prefix: cfg.Prefix})
	if err := svc.Start(); err != nil {
		return fail(err)
	}
	fctx, stopFunctions := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFunctions()
	sb, err := newSandbox(fctx, cfg.DataDir, log)
	if err != nil {
		svc.Stop()
		return fail(err)
	}
	h.fns, err = functions.NewRunner(h.nc, h.views, runnerCommitter{h.comm}, functions.Config{
		Prefix:     cfg.Prefix,
		Replicas:   cfg.Replicas,
		Sandbox:    sb,
		NoBuiltins: cfg.Functions.NoBuiltins,
		Failpoint:  cfg.Functions.Failpoint,
		Log:        log,
	})
	fnsDone := make(chan error, 1)
	if err == nil {
		go func() { fnsDone <- h.fns.Run(fctx) }()
		select {
		case <-h.fns.Ready():
		case err = <-fnsDone:
			if err == nil {
				err = errors.New("stopped before it was ready")
			}
		}
	}
	if err != nil {
		svc.Stop()
		return fail(fmt.Errorf("host: functions: %w", err))
	}
	var web *http.Server
	webDone := make(chan error, 1)
	if h.httpLn != nil {
		mux := http.NewServeMux()
		mux.Handle(functions.AdminPrefix, h.fns.AdminHandler())
		api := cfg.API
		api.Metrics = h.fns.WriteMetrics
		mux.Handle("/", httpapi.New(h.views, h.comm, log, api))
		web = &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		go func() { webDone <- web.Serve(h.httpLn) }()
	}
	attrs := []any{"nats", h.ClientURL(), "commands", natsapi.CommandSubject(cfg.Prefix, "<Table>"), "tables", natsapi.TablesSubject(cfg.Prefix)}
	if web != nil {
		account := httpapi.DevAccountName
		if cfg.API.NoDevAccount {
			account = cfg.API.Accounts[0].Name // Validate made sure there is one
		}
		attrs = append(attrs, "http", h.HTTPURL()+"/"+account)
	}
	if h.ns != nil {
		attrs = append(attrs, "data", cfg.DataDir)
	}
	log.Info("cairn host ready", attrs...)
	if ready != nil {
		ready(h)
	}
	<-runCtx.Done()
	log.Info("shutting down")
	if web != nil {
		// Requests in flight finish (their writes are answered); new
		// connections are refused.
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := web.Shutdown(sctx); err != nil {
			log.Warn("http requests still in flight after 10s; closing them", "err", err)
			web.Close()
		}
		cancel()
		<-webDone
	}
	svc.Stop()
	stopFunctions()
	<-fnsDone
	// Commands already taken get their answers before the journal goes.
	done := make(chan struct{})
	go func() { h.comm.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		log.Warn("commands still in flight after 10s; abandoning them")
	}
	cancelCommit()
	err = fail(nil)
	log.Info("stopped")
	return err
}

func (h *Node) connect() error {
	cfg := h.cfg
	opts := []nats.Option{nats.Name("cairn-host"), nats.MaxReconnects(-1)}
	if cfg.NATSURL != "" {
		nc, err := nats.Connect(cfg.NATSURL, opts...)
		if err != nil {
			return fmt.Errorf("host: connect to %s: %w", cfg.NATSURL, err)
		}
		h.nc = nc
		return nil
	}
	hostName, portStr, _ := net.SplitHostPort(cfg.NATSListen)
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("host: nats-listen port %q: %v", portStr, err)
	}
	if port == 0 {
		port = -1 // the server's "pick a free port"
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("host: data directory: %w", err)
	}
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	h.unlock = unlock
	ns, err := journal.StartEmbedded(journal.EmbeddedConfig{
		StoreDir:   filepath.Join(cfg.DataDir, "jetstream"),
		Host:       hostName,
		Port:       port,
		SyncAlways: cfg.SyncAlways,
		NoLog:      true,
	})
	if err != nil {
		unlock()
		return fmt.Errorf("host: embedded NATS server: %w", err)
	}
	h.ns = ns
	nc, err := nats.Connect(ns.ClientURL(), append(opts, nats.InProcessServer(ns))...)
	if err != nil {
		ns.Shutdown()
		unlock()
		return fmt.Errorf("host: connect to the embedded server: %w", err)
	}
	h.nc = nc
	return nil
}

func (h *Node) close() {
	if h.nc != nil {
		_ = h.nc.Drain()
		h.nc.Close()
	}
	if h.ns != nil {
		h.ns.Shutdown()
		h.ns.WaitForShutdown()
	}
	if h.unlock != nil {
		h.unlock()
	}
}
