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
