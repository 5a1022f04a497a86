package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/operator"
	"github.com/cairn-dev/cairn/cmd/internal/outboxsubjects"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/commit"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/outbox"
	"github.com/cairn-dev/cairn/projections"
)

// Config is a node's configuration. The zero value plus DataDir is a
// working single-machine node.
type Config struct {
	// DataDir holds the embedded server's JetStream store, the views'
	// snapshots and the sandbox's compilation cache. Required: a node never picks a
	// directory of its own (cmd/host's flag defaults to "./data").
	DataDir string
	// NATSListen is the embedded server's client address
	// ("127.0.0.1:4222"); port 0 picks a free port.
	NATSListen string
	// NATSURL, when set, connects to an existing NATS server or cluster
	// instead of embedding one.
	NATSURL string
	// NATSCreds names a credentials file ("user:password" on one line,
	// as <DataDir>/nats/node.user) to connect to NATSURL with: the node
	// user of another node's embedded server, or a user of an external
	// server. Empty: the credentials in NATSURL, if any. The embedded
	// server's node uses its own credentials and ignores it.
	NATSCreds string
	// NATSServeCreds names the credentials file of the user the node
	// answers requests as on NATSURL: one that may take the requests the
	// node serves and publish only replies (docs/PROTOCOL.md, An external
	// NATS server). Empty: the serving user of another node's embedded
	// server (natsauth.ServeCreds of NATSCreds); a server without it
	// leaves the node answering as its own user, with a warning. The
	// embedded server's node ignores it.
	NATSServeCreds string
	// NATSUsers names the users file of the embedded server: services'
	// users with rights on some tables of one storage account, some
	// queues and some functions (natsauth.ReadUsers; docs/PROTOCOL.md,
	// Giving a service its own user). A bad file, or one others may read,
	// stops the node at start. Not with NATSURL: an external server's
	// users are configured on that server.
	NATSUsers string
	// Replicas is the replica count of the streams (1; 3 on a cluster).
	Replicas int
	// HTTP is the HTTP API's address ("127.0.0.1:10002"; port 0 picks a
	// free port; "off" serves no HTTP).
	HTTP string
	// HTTPMaxConns caps the HTTP connections open at once
	// (DefaultHTTPMaxConns, 1,024), so that clients cannot take the
	// node's memory. At the cap a new connection takes the place of the
	// one idle longest, else of the oldest that has not sent its request
	// header, else of the oldest request of the client holding the most
	// connections; when none may go it is closed at once (connLimit).
	HTTPMaxConns int
	// API tunes the HTTP API (accounts, page budget, read-your-writes wait,
	// CORS origins; the origins named there may also call the operators'
	// API from a browser).
	API httpapi.Config
	// ValueSessions caps the large values' sessions over NATS open at
	// once on this node (PutValue, GetValue; 32); ValueIdle ends one
	// whose next chunk does not come within it (10 s; tests shorten it).
	ValueSessions int
	ValueIdle     time.Duration
	// OperatorToken is the secret the operators' API (/$cairn/…) and
	// /metrics require as "Authorization: Bearer <token>". Empty: the
	// token of <DataDir>/operator.token, created on first start.
	OperatorToken string
	// TLSCert and TLSKey are the PEM files of the certificate and key the
	// HTTP API and the embedded server's client port serve TLS with
	// (both or neither; plain TCP when neither).
	TLSCert, TLSKey string
	// Prefix is the first token of every subject and stream ("cairn").
	Prefix string
	// SyncAlways makes the embedded server fsync every write before it
	// acknowledges it (survives power loss; much slower). Otherwise an
	// acknowledged write is in the OS and fsynced within 2 minutes.
	SyncAlways bool
	// Log receives the node's log lines (slog.Default() when nil).
	Log *slog.Logger
	// NoSnapshots turns off the views' snapshot files in
	// <DataDir>/snapshots (Views.SnapshotDir, unless set): every view is
	// then rebuilt from its whole journal on start.
	NoSnapshots bool
	// NoSharedSnapshots keeps the snapshot files the node's own: otherwise
	// (with snapshots on) each is also put in the object store bucket
	// <PREFIX>_SNAPSHOTS (Views.SnapshotStore, unless set), and a view
	// starts from the bucket's snapshot of its table when it is newer
	// than the node's files, so that a new node replays only the tail.
	NoSharedSnapshots bool
	// History is the retention of a table that has none of its own
	// (projections.ParseRetention: "" or "all" keeps everything, a
	// duration such as "7d", or a number of records): how much of its
	// journal a table keeps. Pruning needs shared snapshots: a table's
	// journal is cut only right after one (projections.Pruner).
	History string
	// PruneEvery and PruneGrace tune the pruner (projections.PrunerConfig;
	// zero values are defaults).
	PruneEvery, PruneGrace time.Duration
	// TableShards is the number of view shards a table created on this
	// node is cut into, fixed for the table's life (docs/SCALE.md): 0 is
	// engine.DefaultShards, -1 none (the journal layout before shards,
	// which hosts older than journal format 3 read: for creating tables
	// while a cluster is being upgraded). It overrides Commit.TableShards.
	TableShards int
	// ViewReplicas is how many live hosts hold each shard of a table with
	// shards (docs/SCALE.md): each host materialises only the shards the
	// placement gives it, and sends a command for another shard's
	// partition to one of its holders. 0: every host holds every table
	// whole, as a single host does.
	ViewReplicas int
	// Views and Commit tune those components; zero values are defaults.
	Views  projections.Config
	Commit commit.Config
	// Functions configures the function runner (built-ins, failpoints).
	Functions FunctionsConfig
	// OutboxSubjects are the NATS subject patterns (`*` one token, a final
	// `>` the rest) that commands' outbox messages may name besides Cairn
	// queues, over NATS and HTTP alike. None by default: Cairn queues only.
	// Subjects under $ or _ and under Prefix are never allowed: the relay
	// publishes with the node's rights.
	OutboxSubjects []string
	// OutboxCore are the subject patterns whose outbox messages the relay
	// publishes on core NATS, once, without an acknowledgement: at most
	// once. Every other message to a subject is stream-backed: its
	// partition waits until a stream stores it (outbox.Config.Core).
	OutboxCore []string

	outbox  *outboxsubjects.Allowlist // OutboxSubjects, checked by Validate
	history projections.Retention     // History, checked by Validate
}

// FunctionsConfig is the part of functions.Config a node's user sets; the
// rest comes from the node.
type FunctionsConfig struct {
	// NoBuiltins leaves the built-in functions (archive) off.
	NoBuiltins bool
	// Failpoint kills the process at a named step (crash tests).
	Failpoint string
	// MemoryMB is the sandbox's memory budget in MiB: the sum over loaded
	// functions of memoryMB × concurrency must fit, or a deploy is not
	// loaded (0: wasm.DefaultMemoryBudget, 2 GiB).
	MemoryMB int
	// QueueMaxMessages caps every queue, poison queues included: the
	// queue stream refuses a message to a queue that holds that many
	// (0: functions.DefaultQueueMaxMessages, 1,000,000). It is the
	// stream's setting: give every node of a server the same.
	QueueMaxMessages int64
	// QueueMaxBytes bounds the queue stream, every queue together: past
	// it the stream refuses every new message (0:
	// functions.DefaultQueueMaxBytes, 1 GiB; at least
	// functions.MinQueueMaxBytes). The stream's setting too.
	QueueMaxBytes int64
	// ValueSweepMargin and ValueSweepEvery tune the large values' sweep
	// (docs/VALUES.md; 0: functions.DefaultSweepMargin, 5 minutes, and
	// functions.DefaultSweepEvery, 10 minutes). The claim window is
	// Commit.ClaimWindow.
	ValueSweepMargin, ValueSweepEvery time.Duration
}

// Validate fills defaults and checks the configuration.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("node: a data directory is required")
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
	if c.HTTPMaxConns == 0 {
		c.HTTPMaxConns = DefaultHTTPMaxConns
	}
	if c.HTTPMaxConns < 1 {
		return fmt.Errorf("node: http-max-conns must be positive, got %d", c.HTTPMaxConns)
	}
	if c.NATSUsers != "" && c.NATSURL != "" {
		return errors.New("node: -nats-users is for the embedded server; with -nats-url, configure the users on that server (docs/PROTOCOL.md, Giving a service its own user, shows the equivalent configuration)")
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		return fmt.Errorf("node: replicas must be between 1 and 5, got %d", c.Replicas)
	}
	if c.NATSURL == "" && c.Replicas != 1 {
		return errors.New("node: the embedded server is a single node: -replicas > 1 needs -nats-url of a cluster")
	}
	if _, _, err := net.SplitHostPort(c.NATSListen); err != nil {
		return fmt.Errorf("node: nats-listen %q: %v", c.NATSListen, err)
	}
	if c.OperatorToken != "" && len(c.OperatorToken) < operator.MinTokenLength {
		return fmt.Errorf("node: the operator token must have at least %d characters", operator.MinTokenLength)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("node: TLS needs both a certificate (-tls-cert) and its key (-tls-key)")
	}
	if err := c.checkValues(); err != nil { // before the API's defaults replace a bad bound
		return err
	}
	if c.HTTP != "off" {
		if _, _, err := net.SplitHostPort(c.HTTP); err != nil {
			return fmt.Errorf("node: http %q: %v", c.HTTP, err)
		}
		if err := c.API.Validate(); err != nil {
			return fmt.Errorf("node: %w", err)
		}
	}
	if c.Functions.MemoryMB < 0 || c.Functions.MemoryMB > 1<<20 {
		return fmt.Errorf("node: functions-memory must be between 0 and 1048576 MiB, got %d", c.Functions.MemoryMB)
	}
	if c.Functions.QueueMaxMessages < 0 {
		return fmt.Errorf("node: queue-max-messages must be 0 (the default, %d) or more, got %d", functions.DefaultQueueMaxMessages, c.Functions.QueueMaxMessages)
	}
	if b := c.Functions.QueueMaxBytes; b != 0 && b < functions.MinQueueMaxBytes {
		return fmt.Errorf("node: queue-max-bytes must be 0 (the default, %d) or at least %d (one message of the largest size), got %d", functions.DefaultQueueMaxBytes, functions.MinQueueMaxBytes, b)
	}
	switch {
	case c.TableShards == 0:
		c.Commit.TableShards = engine.DefaultShards
	case c.TableShards == -1:
		c.Commit.TableShards = 0
	case c.TableShards < 1 || c.TableShards > engine.MaxShards:
		return fmt.Errorf("node: -table-shards must be between 1 and %d, or 0 for none, got %d", engine.MaxShards, c.TableShards)
	default:
		c.Commit.TableShards = uint32(c.TableShards)
	}
	if c.ViewReplicas < 0 || c.ViewReplicas > 16 {
		return fmt.Errorf("node: view replicas must be between 0 (every host holds everything) and 16, got %d", c.ViewReplicas)
	}
	history, err := projections.ParseRetention(c.History)
	if err != nil {
		return fmt.Errorf("node: -history: %w", err)
	}
	c.history = history
	allow, err := outboxsubjects.New(c.Prefix, c.OutboxSubjects)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	c.outbox = allow
	if err := outbox.CheckCore(c.OutboxCore); err != nil {
		return fmt.Errorf("node: -outbox-core: %w", err)
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return (&journal.Config{Prefix: c.Prefix, Replicas: c.Replicas}).Validate()
}

// maxValueSessions bounds -value-sessions: each session may hold a few
// MiB of chunks its client sent ahead (natsapi), and 4,096 of them are
// gigabytes.
const maxValueSessions = 4096

// minValueInterval is the shortest claim window, sweep margin or scan
// interval a node takes: below it a timer would spin, and a value could
// not be referenced by the write that follows its upload.
const minValueInterval = time.Second

// checkValues checks the large values' settings (docs/VALUES.md); zero is
// each one's default.
func (c *Config) checkValues() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"value-claim-window", c.Commit.ClaimWindow},
		{"value-sweep-margin", c.Functions.ValueSweepMargin},
		{"value-sweep-every", c.Functions.ValueSweepEvery},
	} {
		if d.v != 0 && d.v < minValueInterval {
			return fmt.Errorf("node: -%s must be at least %v, got %v", d.flag, minValueInterval, d.v)
		}
	}
	if c.API.MaxValue < 0 {
		return fmt.Errorf("node: -value-max-bytes must be positive, got %d", c.API.MaxValue)
	}
	if c.ValueSessions < 0 || c.ValueSessions > maxValueSessions {
		return fmt.Errorf("node: -value-sessions must be 1 to %d (0: the default, 32), got %d", maxValueSessions, c.ValueSessions)
	}
	return nil
}
