// Package client is the Go client of Cairn's NATS command protocol
// (docs/PROTOCOL.md): one call per operation, msgpack on the wire, errors as
// *engine.Error with their Azure codes.
//
// A command sent with WithID is idempotent: when its reply is lost (a
// timeout, a host restart), the client sends it again with the same id and
// the host answers with the first result instead of applying it twice.
// Commands without an id are sent once.
//
// What fails: a refused command returns its *engine.Error (TableNotFound,
// UpdateConditionNotSatisfied, …); a command without an id whose reply
// does not come within the timeout (10 s) returns an error wrapping
// context.DeadlineExceeded, and its outcome is then unknown to the caller;
// with no node listening, nats.ErrNoResponders. What it costs: one NATS request
// per call (a round trip to a node), and up to five for a command with an
// id whose replies are lost.
package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
)

// Client sends commands to Cairn hosts over a NATS connection.
type Client struct {
	nc       *nats.Conn
	prefix   string
	account  string // "" for the development account
	timeout  time.Duration
	attempts int
}

// Option configures a Client.
type Option func(*Client)

// WithPrefix sets the subject prefix of the hosts ("cairn").
func WithPrefix(p string) Option { return func(c *Client) { c.prefix = p } }

// WithAccount sends the commands to an account's tables
// (<prefix>.cmd.<account>.<Table>, <prefix>.tables.<account>); without
// it they go to the development account's.
func WithAccount(a string) Option {
	return func(c *Client) {
		if a == engine.DevAccount {
			a = ""
		}
		c.account = a
	}
}

// WithTimeout sets the time one attempt waits for its reply (10s).
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithAttempts sets how often a command with an id is sent before the
// client gives up (5).
func WithAttempts(n int) Option { return func(c *Client) { c.attempts = max(n, 1) } }

// New returns a client on nc.
func New(nc *nats.Conn, opts ...Option) *Client {
	c := &Client{nc: nc, prefix: "cairn", timeout: 10 * time.Second, attempts: 5}
	for _, o := range opts {
		o(c)
	}
	return c
}

// CallOption adds to one command.
type CallOption func(*engine.Request)

// WithID gives the command an id, making it safe to retry.
func WithID(id string) CallOption { return func(r *engine.Request) { r.ID = id } }

// WithMessages attaches outbox messages, committed with the write.
func WithMessages(m ...engine.Message) CallOption {
	return func(r *engine.Request) { r.Messages = append(r.Messages, m...) }
}

// Do sends a request to subject and returns the reply; a reply carrying an
// error is returned as that *engine.Error (with the reply).
func (c *Client) Do(ctx context.Context, subject string, req *engine.Request) (*engine.Reply, error) {
	body, err := wire.EncodeRequestMsgpack(req)
	if err != nil {
		return nil, fmt.Errorf("client: encode %s: %w", req.Op, err)
	}
	attempts := 1
	if req.ID != "" {
		attempts = c.attempts
	}
	var lastErr error
	for a := 0; a < attempts; a++ {
		actx, cancel := context.WithTimeout(ctx, c.timeout)
		msg, err := c.nc.RequestWithContext(actx, subject, body)
		cancel()
		if err == nil {
			rep, err := wire.DecodeReplyMsgpack(msg.Data)
			if err != nil {
				return nil, fmt.Errorf("client: decode reply to %s: %w", req.Op, err)
			}
			if rep.Error != nil {
				return rep, rep.Error
			}
			return rep, nil
		}
		lastErr = err
		if ctx.Err() != nil || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders)) {
			break
		}
		if errors.Is(err, nats.ErrNoResponders) {
			time.Sleep(time.Duration(100*(a+1)) * time.Millisecond)
		}
	}
	return nil, fmt.Errorf("client: %s on %s: %w", req.Op, subject, lastErr)
}

func (c *Client) entity(ctx context.Context, table string, req *engine.Request, opts []CallOption) (*engine.Reply, error) {
	for _, o := range opts {
		o(req)
	}
	return c.Do(ctx, c.commandSubject(table), req)
}

// commandSubject is the subject of a table's commands and queries:
// <prefix>.cmd.<Table>, or <prefix>.cmd.<account>.<Table> with WithAccount.
func (c *Client) commandSubject(table string) string {
	if c.account != "" {
		return c.prefix + ".cmd." + c.account + "." + table
	}
	return c.prefix + ".cmd." + table
}

func (c *Client) tables(ctx context.Context, req *engine.Request) (*engine.Reply, error) {
	if c.account != "" {
		return c.Do(ctx, c.prefix+".tables."+c.account, req)
	}
	return c.Do(ctx, c.prefix+".tables", req)
}

// CreateTable creates a table.
func (c *Client) CreateTable(ctx context.Context, name string) (engine.TableInfo, error) {
	rep, err := c.tables(ctx, &engine.Request{Op: "CreateTable", Table: name})
	if err != nil {
		return engine.TableInfo{}, err
	}
	if len(rep.Tables) != 1 {
		return engine.TableInfo{}, errors.New("client: CreateTable reply without the table")
	}
	return rep.Tables[0], nil
}

// DeleteTable deletes a table and all its entities.
func (c *Client) DeleteTable(ctx context.Context, name string) error {
	_, err := c.tables(ctx, &engine.Request{Op: "DeleteTable", Table: name})
	return err
}

// ListTables lists the tables.
func (c *Client) ListTables(ctx context.Context) ([]engine.TableInfo, error) {
	rep, err := c.tables(ctx, &engine.Request{Op: "ListTables"})
	if err != nil {
		return nil, err
	}
	return rep.Tables, nil
}

// Insert inserts e; it fails with EntityAlreadyExists if it exists.
func (c *Client) Insert(ctx context.Context, table string, e *engine.Entity, opts ...CallOption) (*engine.Reply, error) {
	return c.entity(ctx, table, &engine.Request{Op: "Insert", Entity: e}, opts)
}

// Replace replaces all properties of an existing entity. ifMatch is its ETag
// or "*".
func (c *Client) Replace(ctx context.Context, table string, e *engine.Entity, ifMatch string, opts ...CallOption) (*engine.Reply, error) {
	return c.entity(ctx, table, &engine.Request{Op: "Replace", Entity: e, IfMatch: ifMatch}, opts)
}

// Merge overwrites the given properties of an existing entity and keeps the
// others. ifMatch is its ETag or "*".
func (c *Client) Merge(ctx context.Context, table string, e *engine.Entity, ifMatch string, opts ...CallOption) (*engine.Reply, error) {
	return c.entity(ctx, table, &engine.Request{Op: "Merge", Entity: e, IfMatch: ifMatch}, opts)
}

// InsertOrReplace creates or replaces e.
func (c *Client) InsertOrReplace(ctx context.Context, table string, e *engine.Entity, opts ...CallOption) (*engine.Reply, error) {
	return c.entity(ctx, table, &engine.Request{Op: "InsertOrReplace", Entity: e}, opts)
}

// InsertOrMerge creates e or merges it into the existing entity.
func (c *Client) InsertOrMerge(ctx context.Context, table string, e *engine.Entity, opts ...CallOption) (*engine.Reply, error) {
	return c.entity(ctx, table, &engine.Request{Op: "InsertOrMerge", Entity: e}, opts)
}

// Delete deletes an entity. ifMatch is its ETag or "*".
func (c *Client) Delete(ctx context.Context, table, pk, rk, ifMatch string, opts ...CallOption) (*engine.Reply, error) {
	return c.entity(ctx, table, &engine.Request{Op: "Delete", PartitionKey: pk, RowKey: rk, IfMatch: ifMatch}, opts)
}

// Batch commits up to 100 operations on one partition atomically. The
// reply's Results hold one ETag per operation; on failure the
// *engine.Error's Index names the failing operation.
func (c *Client) Batch(ctx context.Context, table string, ops []engine.Operation, opts ...CallOption) (*engine.Reply, error) {
	req := &engine.Request{Op: "Batch", Ops: make([]engine.Request, len(ops))}
	for i, op := range ops {
		r := engine.Request{Op: op.Op.String(), IfMatch: op.IfMatch}
		if op.Op == engine.OpDelete && op.Entity != nil {
			r.PartitionKey, r.RowKey = op.Entity.PartitionKey, op.Entity.RowKey
		} else {
			r.Entity = op.Entity
		}
		req.Ops[i] = r
	}
	return c.entity(ctx, table, req, opts)
}

// AsOf reads as of a journal position of the table (a write's Reply.Seq,
// or an earlier read's): the entity as it was then (Retrieve). The node
// replays the table's journal up to it; see docs/PROTOCOL.md for the
// limits and their errors.
func AsOf(seq uint64) CallOption { return func(r *engine.Request) { r.AsOf = seq } }

// AtLeast makes a read wait until the node's view has reached a journal
// position of the table (a write's Reply.Seq), up to the node's wait
// (10 s), so that a read on any node sees that write (Retrieve). The
// error PositionNotReached says the view did not get there in time.
func AtLeast(seq uint64) CallOption { return func(r *engine.Request) { r.Position = seq } }

// Retrieve reads one entity from a host's view. The reply's ETag is the
// entity's and Seq the view's journal position (with AsOf, that position).
// Its options are AsOf and AtLeast (a write's are ignored).
func (c *Client) Retrieve(ctx context.Context, table, pk, rk string, opts ...CallOption) (*engine.Entity, *engine.Reply, error) {
	rep, err := c.entity(ctx, table, &engine.Request{Op: "Retrieve", PartitionKey: pk, RowKey: rk}, opts)
	if err != nil {
		return nil, rep, err
	}
	return rep.Entity, rep, nil
}
