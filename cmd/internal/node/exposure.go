package node

import (
	"fmt"
	"net"
	"os"

	"github.com/cairn-dev/cairn/cmd/internal/operator"
)

// loadOperatorToken takes the configured operator token, or the one of the
// data directory (created on first start), and logs where it comes from
// (never the token itself).
func (n *Node) loadOperatorToken() error {
	cfg, log := n.cfg, n.cfg.Log
	if cfg.OperatorToken != "" {
		n.opToken = cfg.OperatorToken
		log.Info("operator token from the configuration (-operator-token)")
		return nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("node: data directory: %w", err)
	}
	token, path, created, loose, err := operator.LoadToken(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	n.opToken = token
	if created {
		log.Info("operator token created for /$cairn/ and /metrics (send Authorization: Bearer <token>)", "file", path)
	} else {
		log.Info("operator token for /$cairn/ and /metrics (send Authorization: Bearer <token>)", "file", path)
	}
	if loose {
		log.Warn("the operator token file is readable by other users: chmod 600 it", "file", path)
	}
	return nil
}

// warnExposed logs a warning for each listener reachable beyond loopback
// that carries data in clear (no TLS), and for an embedded NATS server
// reachable beyond loopback that lets clients without credentials in (the
// development account).
func (n *Node) warnExposed() {
	var httpAddr, natsAddr string
	if n.httpLn != nil {
		httpAddr = n.httpLn.Addr().String()
	}
	if n.ns != nil {
		natsAddr = n.cfg.NATSListen
	}
	for _, w := range exposures(httpAddr, natsAddr, n.tls != nil, !n.cfg.API.NoDevAccount) {
		n.cfg.Log.Warn(w.msg, w.listener, w.addr)
	}
}

// exposure is a warning about a listener.
type exposure struct{ msg, listener, addr string }

// exposures returns the warnings for an HTTP listener and an embedded NATS
// server on the given addresses ("" for none); dev tells whether the
// development account (and the NATS development user) is on.
func exposures(httpAddr, natsAddr string, tls, dev bool) []exposure {
	var ws []exposure
	if httpAddr != "" && !tls && !onLoopback(httpAddr) {
		ws = append(ws, exposure{"the HTTP API listens beyond loopback without TLS: data, signatures and the operator token cross the network in clear; use -tls-cert and -tls-key, or a TLS proxy", "http", httpAddr})
	}
	devNote := ""
	if dev {
		devNote = "; and clients without credentials may read and write every table through the commands (the development account; -dev-account=false refuses them)"
	}
	switch {
	case natsAddr == "" || onLoopback(natsAddr):
	case !tls:
		ws = append(ws, exposure{"the embedded NATS server listens beyond loopback without TLS: passwords, commands and data cross the network in clear; use -tls-cert and -tls-key, or keep -nats-listen on loopback" + devNote, "nats", natsAddr})
	case dev:
		ws = append(ws, exposure{"the embedded NATS server listens beyond loopback and lets clients without credentials read and write every table through the commands (the development account): -dev-account=false refuses them, or keep it on a trusted network", "nats", natsAddr})
	}
	return ws
}

// onLoopback reports whether the address (host:port) listens on loopback
// only: a loopback IP or "localhost". An empty host or 0.0.0.0 listens on
// every interface.
func onLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
