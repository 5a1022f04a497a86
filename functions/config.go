package functions

import (
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine/wire"
)

// Config configures the runner.
type Config struct {
	// Prefix is the first token of subjects and the base of stream names.
	Prefix string
	// Remote reads the partitions of tables whose views on this node
	// hold only some shards; nil: every view is whole.
	Remote Remote
	// Replicas of the queue stream and the registry's buckets (1).
	Replicas int
	// Sandbox runs deployed modules; nil: only native functions run.
	Sandbox Sandbox
	// QueueMaxMessages caps every queue of the queue stream, poison
	// queues included (0: DefaultQueueMaxMessages), and QueueMaxBytes the
	// stream, every queue together (0: DefaultQueueMaxBytes). They are
	// the stream's settings, shared by every node: the last node to start
	// sets them.
	QueueMaxMessages int64
	QueueMaxBytes    int64
	// Queues and Registry are the queue stream and the registry, opened
	// by the caller with OpenQueues and OpenRegistry (which may wait for
	// JetStream at start); nil: Run opens them.
	Queues   *Queues
	Registry *Registry
	// SecretsKey seals and opens the functions' secrets: SecretsKey of
	// the node user's password, the same on every node (nil: secrets
	// are refused, settings still work).
	SecretsKey []byte
	// Node names this node in its load reports (LoadReport; the host
	// name when empty).
	Node string
	// NoBuiltins leaves the built-in functions (archive) off.
	NoBuiltins bool
	// Failpoint, when it names a point in the code, kills the process with
	// SIGKILL when it is reached: how crash tests stop a node at an exact
	// step. "functions.invoke": as an invocation starts;
	// "functions.between-commits": after the first partition's commit of an
	// invocation that writes several. Either followed by ":<function>"
	// (functions.invoke:deadly) stops only that function's invocations,
	// not a built-in's that runs first.
	Failpoint string
	// Serve is the connection that answers direct calls and the hosts'
	// status requests: one that may take those requests and publish only
	// replies (the node's serving user). nil: the runner's own connection.
	Serve *nats.Conn
	// Replies drops requests whose reply subject is not an inbox
	// (wire.ReplyAllowed) before anything runs for them; nil: a guard of
	// the runner's own, logging to Log.
	Replies *wire.ReplyGuard
	// Values runs the large values' sweep (sweep.go) when its Store is
	// set and the built-ins are on. Its Store is also what the functions'
	// writes check their references against and what the built-in archive
	// copies values with (nil: a reference is refused).
	Values ValueSweep
	// MaxValue caps a large value the built-in archive copies: the node's
	// -value-max-bytes, as its uploads are capped (values.DefaultMaxSize
	// when zero).
	MaxValue int64
	// ClaimWindow is the committer's (engine.Claims): an invocation's
	// write of a large value's reference is decided with it before it is
	// committed (engine.DefaultClaimWindow when zero).
	ClaimWindow time.Duration
	// Log receives the runner's lines (slog.Default() when nil).
	Log *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// setDefaults fills the zero fields: prefix "cairn", one replica, the
// default queue cap, the host name, the default logger, the real clock.
func (c *Config) setDefaults() {
	if c.QueueMaxMessages <= 0 {
		c.QueueMaxMessages = DefaultQueueMaxMessages
	}
	if c.Node == "" {
		c.Node, _ = os.Hostname()
	}

	if c.Prefix == "" {
		c.Prefix = "cairn"
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Replies == nil {
		c.Replies = &wire.ReplyGuard{Log: c.Log}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Values.Window <= 0 {
		c.Values.Window = c.ClaimWindow
	}
	c.Values.defaults()
}
