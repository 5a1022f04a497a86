package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// Config configures a relay. The zero value plus NodeID works.
type Config struct {
	// Prefix is the first token of subjects and streams ("cairn").
	Prefix string
	// NodeID names this node in the leases: stable across restarts of
	// one node (a restarted node takes its own leases back at once), and
	// different on every node.
	NodeID string
	// IDKey keys the messages' ids (MessageID): a secret every node of
	// the system shares, the node user's password. Nil: ids anyone can
	// compute, which a client publishing to the same destination could
	// use to have the relay's messages dropped as duplicates.
	IDKey []byte
	// Replicas of the bucket (1).
	Replicas int
	// Bucket is the relay's bucket, opened by the caller with Bucket
	// (which may wait for JetStream at start); nil: Run opens it.
	Bucket jetstream.KeyValue
	// Shards is how many shards the tables are hashed into (16). All
	// nodes of a cluster must agree.
	Shards int
	// LeaseTTL is how long a lease or a heartbeat lasts unrenewed (10 s);
	// Renew how often they are renewed (2 s).
	LeaseTTL, Renew time.Duration
	// CheckpointEvery bounds how often a table's position is stored
	// (200 ms).
	CheckpointEvery time.Duration
	// MaxPending bounds the messages of one table read and not yet
	// delivered (100,000).
	MaxPending int
	// MaxBackoff bounds the wait between two attempts of a blocked
	// message (30 s).
	MaxBackoff time.Duration
	// Core are the subject patterns (NATS wildcards) whose messages go to
	// core NATS: published once, at most once, without an
	// acknowledgement. Every other message is stream-backed: delivered
	// only once a stream acknowledges it, its partition blocked until then
	// (CheckCore checks them).
	Core []string
	// AckWait bounds the wait for a stream's acknowledgement of one
	// attempt (publishAckWait, 10 s).
	AckWait time.Duration
	// Log receives the relay's lines.
	Log *slog.Logger
}

func (c *Config) defaults() {
	if c.Prefix == "" {
		c.Prefix = "cairn"
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Shards <= 0 {
		c.Shards = 16
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 10 * time.Second
	}
	if c.Renew <= 0 {
		c.Renew = 2 * time.Second
	}
	if c.CheckpointEvery <= 0 {
		c.CheckpointEvery = 200 * time.Millisecond
	}
	if c.MaxPending <= 0 {
		c.MaxPending = 100_000
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.AckWait <= 0 {
		c.AckWait = publishAckWait
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

func (c *Config) validate() error {
	if c.NodeID == "" || strings.ContainsAny(c.NodeID, " .*>\t\r\n") {
		return errors.New("outbox: a node id without spaces, dots or wildcards is required")
	}
	if err := CheckCore(c.Core); err != nil {
		return err
	}
	if c.Renew >= c.LeaseTTL {
		return errors.New("outbox: leases must be renewed more often than they expire")
	}
	return nil
}

// CheckCore checks the patterns of Config.Core: valid NATS subject
// patterns (`*` one token, a final `>` the rest), none under $ or _, which
// outbox messages never reach. An error names the pattern.
func CheckCore(patterns []string) error {
	for _, p := range patterns {
		if err := engine.ValidateSubjectPattern(p); err != nil {
			return fmt.Errorf("outbox: core subjects: %s", engine.AsError(err).Message)
		}
		if p[0] == '$' || p[0] == '_' {
			return fmt.Errorf("outbox: core subjects: %q names the server's own subjects ($) or inboxes (_), which outbox messages never reach", p)
		}
	}
	return nil
}

// Tables is what the relay needs of the node's views: the live tables.
type Tables interface {
	Tables() []engine.TableInfo
}

// Store is where positions, leases and operator requests live: the
// bucket <PREFIX>_OUTBOX. BucketName names it.
func BucketName(prefix string) string { return strings.ToUpper(prefix) + "_OUTBOX" }

// keys of the bucket.
func posKey(stream string) string     { return "pos." + stream }
func blockedKey(stream string) string { return "blocked." + stream }
func retryKey(stream string) string   { return "retry." + stream }
func skipKey(stream string, seq uint64, index int) string {
	return "skip." + stream + "." + itoa(seq) + "." + itoa(uint64(index))
}
func leaseKey(shard int) string    { return "lease." + itoa(uint64(shard)) }
func memberKey(node string) string { return "node." + node }

// sleep waits d or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
