package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
	"github.com/cairn-dev/cairn/journal"
)

// connect starts the embedded NATS server (locking the data directory
// first) with the node user (its credentials made on first start), the
// service users of the users file (NATSUsers) and, while the development
// account is on, the development user, and
// connects to it in process as the node user; or it connects to the
// configured server with the credentials given (NATSCreds, or those in
// the URL), waiting until ctx ends for servers not up yet. The node's
// replies come on natsauth.InboxPrefix.
func (n *Node) connect(ctx context.Context) error {
	cfg := n.cfg
	opts := []nats.Option{nats.Name("cairn-host"), nats.MaxReconnects(-1), nats.CustomInboxPrefix(natsauth.InboxPrefix),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { cfg.Log.Warn("nats", "err", err) }),
		// A lost server shows in the log beside what it delays.
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if !c.IsClosed() { // not the node's own stop
				cfg.Log.Warn("nats: disconnected; reconnecting", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { cfg.Log.Info("nats: reconnected", "server", c.ConnectedServerName()) })}
	if cfg.NATSURL != "" {
		var node *natsauth.Creds // the node's credentials, when it has some
		if cfg.NATSCreds != "" {
			c, err := natsauth.Read(cfg.NATSCreds)
			if err != nil {
				return fmt.Errorf("node: -nats-creds: %w", err)
			}
			opts = append(opts, c.Options()...)
			n.credsFile, n.secret, node = cfg.NATSCreds, []byte(c.Password), &c
		} else if u, err := url.Parse(cfg.NATSURL); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok {
				n.secret = []byte(p)
				node = &natsauth.Creds{User: u.User.Username(), Password: p}
			}
		}
		// The servers may not be up yet: wait for them (a refused
		// password stops the node at once).
		var nc *nats.Conn
		err := defaultStartRetry.untilUp(ctx, cfg.Log, "connect to "+cfg.NATSURL, func(context.Context) error {
			c, err := nats.Connect(cfg.NATSURL, opts...)
			nc = c
			return err
		})
		if err != nil {
			return err
		}
		if err := checkRights(nc); err != nil {
			nc.Close()
			return fmt.Errorf("node: %s refuses this node what it needs (connect as the node user: -nats-creds <data>/nats/node.user of the node whose server it is, or user:password in -nats-url): %w", cfg.NATSURL, err)
		}
		n.nc = nc
		if err := n.connectServe(ctx, node); err != nil {
			n.close()
			return err
		}
		n.recordURL(cfg.NATSURL)
		return nil
	}
	hostName, portStr, _ := net.SplitHostPort(cfg.NATSListen)
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("node: nats-listen port %q: %v", portStr, err)
	}
	if port == 0 {
		port = -1 // the server's "pick a free port"
	}
	var service []natsauth.ServiceUser
	if cfg.NATSUsers != "" {
		if service, err = natsauth.ReadUsers(cfg.NATSUsers); err != nil {
			return fmt.Errorf("node: -nats-users: %w", err)
		}
		for _, u := range service {
			if !u.Hashed() {
				cfg.Log.Warn("a NATS service user's password is in plain text in the users file: prefer its bcrypt hash (host nats-password)", "user", u.User, "file", cfg.NATSUsers)
			}
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("node: data directory: %w", err)
	}
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	n.unlock = unlock
	creds, path, created, loose, err := natsauth.LoadOrCreate(cfg.DataDir)
	if err != nil {
		unlock()
		return fmt.Errorf("node: %w", err)
	}
	n.credsFile, n.secret = path, []byte(creds.Password)
	if created {
		cfg.Log.Info("NATS node credentials created (other nodes and the operators' CLI need them: -nats-creds)", "file", path)
	}
	if loose {
		cfg.Log.Warn("the NATS node credentials file is readable by other users: chmod 600 it", "file", path)
	}
	auth, err := natsauth.NewServer(cfg.Prefix, creds, service, !cfg.API.NoDevAccount)
	if err != nil {
		unlock()
		return fmt.Errorf("node: %w", err)
	}
	ns, err := journal.StartEmbedded(journal.EmbeddedConfig{
		Accounts:   auth.Accounts,
		Users:      auth.Users,
		NoAuthUser: auth.NoAuthUser,
		StoreDir:   filepath.Join(cfg.DataDir, "jetstream"),
		Host:       hostName,
		Port:       port,
		SyncAlways: cfg.SyncAlways,
		TLS:        n.tls,
		NoLog:      true,
	})
	if err != nil {
		unlock()
		return fmt.Errorf("node: embedded NATS server: %w", err)
	}
	n.ns = ns
	// In process, without TLS even when the client port requires it (the
	// server skips it for in-process connections; a tls:// URL would make
	// the client insist).
	inProc := "nats://" + strings.TrimPrefix(strings.TrimPrefix(ns.ClientURL(), "tls://"), "nats://")
	nc, err := nats.Connect(inProc, append(append(opts, creds.Options()...), nats.InProcessServer(ns))...)
	if err == nil {
		n.nc = nc
		n.serve, err = nats.Connect(inProc, append(serveOpts(cfg), append(natsauth.ServeCreds(creds).ServeOptions(), nats.InProcessServer(ns))...)...)
	}
	if err != nil {
		n.close()
		return fmt.Errorf("node: connect to the embedded server: %w", err)
	}
	if natsauth.AnyConsumes(service) {
		api := &consumerAPI{prefix: cfg.Prefix, nc: n.nc, serve: n.serve, log: cfg.Log}
		if err := api.subscribe(); err != nil {
			n.close()
			return fmt.Errorf("node: take the service users' consumer creations: %w", err)
		}
	}
	n.recordURL(ns.ClientURL())
	return nil
}

// serveOpts are the options of the connection that answers requests.
func serveOpts(cfg Config) []nats.Option {
	return []nats.Option{nats.Name("cairn-host-serve"), nats.MaxReconnects(-1),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { cfg.Log.Warn("nats (serving)", "err", err) })}
}

// connectServe connects the serving connection to an external server:
// as the user of NATSServeCreds, or else as the serving user derived from
// the node's credentials (the user another node's embedded server has).
// A server that has neither leaves the node answering on its own
// connection, with a warning: the node still drops requests whose reply is
// not an inbox (wire.ReplyGuard), but the server no longer enforces it.
func (n *Node) connectServe(ctx context.Context, node *natsauth.Creds) error {
	cfg := n.cfg
	var creds natsauth.Creds
	switch {
	case cfg.NATSServeCreds != "":
		c, err := natsauth.Read(cfg.NATSServeCreds)
		if err != nil {
			return fmt.Errorf("node: -nats-serve-creds: %w", err)
		}
		creds = c
	case node != nil:
		creds = natsauth.ServeCreds(*node)
	default:
		cfg.Log.Warn("the node answers requests as the user it writes the journal with: give it -nats-serve-creds, a user that may only publish replies (docs/PROTOCOL.md, An external NATS server)")
		n.serve = n.nc
		return nil
	}
	var nc *nats.Conn
	err := defaultStartRetry.untilUp(ctx, cfg.Log, "connect to "+cfg.NATSURL+" as "+creds.User, func(context.Context) error {
		c, err := nats.Connect(cfg.NATSURL, append(serveOpts(cfg), creds.ServeOptions()...)...)
		nc = c
		return err
	})
	if errors.Is(err, nats.ErrAuthorization) && cfg.NATSServeCreds == "" {
		cfg.Log.Warn("the server has no serving user: the node answers requests as the user it writes the journal with; give it -nats-serve-creds, a user that may only publish replies (docs/PROTOCOL.md, An external NATS server)", "user", creds.User)
		n.serve = n.nc
		return nil
	}
	if err != nil {
		return fmt.Errorf("node: connect as %s: %w", creds.User, err)
	}
	if err := checkServeRights(nc, cfg.Prefix); err != nil {
		nc.Close()
		return fmt.Errorf("node: %s refuses the serving user %s what it needs (docs/PROTOCOL.md, An external NATS server): %w", cfg.NATSURL, creds.User, err)
	}
	n.serve = nc
	return nil
}

// checkServeRights finds out at once whether the serving connection may
// take the requests the node answers: the server reports a refused
// subscription before it answers the flush.
func checkServeRights(nc *nats.Conn, prefix string) error {
	for _, subject := range natsauth.ServedSubjects(prefix) {
		sub, err := nc.SubscribeSync(subject)
		if err != nil {
			return err
		}
		err = nc.Flush()
		_ = sub.Unsubscribe()
		if err != nil {
			return err
		}
		if err := nc.LastError(); errors.Is(err, nats.ErrPermissionViolation) {
			return err
		}
	}
	return nil
}

// recordURL writes the server's client URL to <data>/nats/url for the
// operators' CLI (natsauth.WriteURL); a failure only costs the CLI its
// default, so it is logged.
func (n *Node) recordURL(url string) {
	if err := natsauth.WriteURL(n.cfg.DataDir, url); err != nil {
		n.cfg.Log.Warn("the NATS client URL is not recorded in the data directory: the CLI needs -nats-url", "err", err)
	}
}

// close closes the connection, stops the embedded server and releases
// the data directory.
func (n *Node) close() {
	if n.serve != nil && n.serve != n.nc {
		_ = n.serve.Drain()
		n.serve.Close()
	}
	if n.nc != nil {
		_ = n.nc.Drain()
		n.nc.Close()
	}
	if n.ns != nil {
		n.ns.Shutdown()
		n.ns.WaitForShutdown()
	}
	if n.unlock != nil {
		n.unlock()
	}
}

// checkRights finds out at once whether the server lets the connection do
// what a node does: take replies on natsauth.InboxPrefix and use the
// JetStream API. Without it a node connected as a restricted user (the
// development user of another node's server, for one) would wait for
// JetStream replies that never come. The server reports a refusal before
// it answers the flush.
func checkRights(nc *nats.Conn) error {
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("$JS.API.INFO", inbox, nil); err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	if err := nc.LastError(); errors.Is(err, nats.ErrPermissionViolation) {
		return err
	}
	return nil
}
