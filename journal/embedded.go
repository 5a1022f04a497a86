package journal

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedConfig configures an embedded NATS server with JetStream.
type EmbeddedConfig struct {
	// StoreDir is the JetStream file store's directory.
	StoreDir string
	// Host and Port of the client listener; Port -1 picks a free port.
	Host string
	Port int
	// MaxPayload is the largest message (8 MiB by default: an entity
	// group transaction may be 4 MiB, and its reply and record a bit more).
	MaxPayload int32
	// SyncAlways fsyncs every write before it is acknowledged.
	SyncAlways bool
	// ServerName names the server (default "cairn").
	ServerName string
	// NoLog silences the server's own log.
	NoLog bool
	// TLS, if set, makes the client port require TLS with this
	// configuration (its certificates); in-process connections skip it.
	TLS *tls.Config
	// Users, when set, are the only users the server lets in;
	// NoAuthUser names the one of them that connections without
	// credentials act as ("" refuses those connections). No users: the
	// server authenticates nobody.
	Users      []*server.User
	NoAuthUser string
	// Accounts are the server's accounts (the users name theirs); none:
	// every user is in the global account.
	Accounts []*server.Account
}

// StartEmbedded starts a NATS server with JetStream in this process and
// waits until it accepts connections.
func StartEmbedded(cfg EmbeddedConfig) (*server.Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("journal: embedded server needs a store directory")
	}
	if cfg.MaxPayload == 0 {
		cfg.MaxPayload = 8 << 20
	}
	if cfg.ServerName == "" {
		cfg.ServerName = "cairn"
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Port > 0 {
		// The server reports a busy port only after its start-up timeout;
		// find out at once.
		addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("journal: embedded server cannot listen on %s (another host or NATS server there?): %w", addr, err)
		}
		l.Close()
	}
	opts := &server.Options{
		ServerName: cfg.ServerName,
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		MaxPayload: cfg.MaxPayload,
		// A control line holds a subject of up to ~2 KiB (an encoded
		// 512-character partition key) plus a reply subject.
		MaxControlLine: 8192,
		SyncAlways:     cfg.SyncAlways,
		NoSigs:         true,
		NoLog:          cfg.NoLog,
		TLSConfig:      cfg.TLS,
		Users:          cfg.Users,
		NoAuthUser:     cfg.NoAuthUser,
		Accounts:       cfg.Accounts,
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("journal: embedded server: %w", err)
	}
	if !cfg.NoLog {
		ns.ConfigureLogger()
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("journal: embedded server not ready within 30s")
	}
	return ns, nil
}
