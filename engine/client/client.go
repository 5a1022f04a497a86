// Package client is the Go client of Cairn's NATS command protocol
// (docs/PROTOCOL.md): one call per operation, msgpack on the wire, errors as
// *engine.Error with their Azure codes.
//
// A command sent with WithID is idempotent: when its reply is lost (a
// timeout, a host restart), the client sends it again with the same id and
// the host answers with the first result instead of applying it twice.
// Commands without an id are sent once.
//
// A request in flight when the client's connection is lost (its NATS
// server died or was restarted) may have been lost with it, and its reply
// surely was: the client does not wait out the timeout for it. A command
// with an id and a read are sent again at once, to be delivered when the
// connection is back (nats.go buffers them while it reconnects); a command
// without an id returns ErrConnectionLost, its outcome unknown. A request
// can also be lost without the client's connection noticing (taken by a
// host that then died, or routed through a server as it died): a command
// with an id, or a read, still unanswered after a second (WithResend) is
// sent again, then after two more, four more…, and the first reply to
// any copy is the answer (a command's copies are one command: its id).
//
// What fails: a refused command returns its *engine.Error (TableNotFound,
// UpdateConditionNotSatisfied, …); a command without an id whose reply
// does not come within the timeout (10 s) returns an error wrapping
// context.DeadlineExceeded, and its outcome is then unknown to the caller;
// with no node listening, nats.ErrNoResponders. What it costs: one NATS request
// per call (a round trip to a node), and up to five for a command with an
// id whose replies are lost; one goroutine per connection (shared by its
// Clients), which follows its status until it is closed.
package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	resend   time.Duration
}

// ErrConnectionLost is returned, wrapped, for a command without an id
// that was in flight when the client's NATS connection was lost: it may or
// may not have been applied.
var ErrConnectionLost = errors.New("client: the connection was lost while waiting for the reply")

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

// WithResend sets how long a command with an id, or a read, waits for its
// reply before a copy is sent (1s); each further copy waits twice as long
// as the one before, within the attempt's timeout, and the first reply to
// any copy is the answer. 0 sends one copy per attempt.
func WithResend(d time.Duration) Option { return func(c *Client) { c.resend = max(d, 0) } }

// New returns a client on nc.
func New(nc *nats.Conn, opts ...Option) *Client {
	c := &Client{nc: nc, prefix: "cairn", timeout: 10 * time.Second, attempts: 5, resend: time.Second}
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
	safe := req.ID != "" || readOnly(req.Op)
	msg, err := c.roundTrip(ctx, subject, body, c.timeout, safe, req.ID != "", safe)
	if err != nil {
		return nil, fmt.Errorf("client: %s on %s: %w", req.Op, subject, err)
	}
	rep, err := wire.DecodeReplyMsgpack(msg.Data)
	if err != nil {
		return nil, fmt.Errorf("client: decode reply to %s: %w", req.Op, err)
	}
	if rep.Error != nil {
		return rep, rep.Error
	}
	return rep, nil
}

// roundTrip sends body to subject and returns the reply. safe says that
// sending it again changes nothing more (a command with an id, a read):
// it is then sent again, up to the client's attempts, when the connection
// was lost while it waited, and afterwards while no node answers (a
// restarted server's nodes reconnecting). retryTimeouts (a command with an
// id) sends it again after a timeout or no responders from the first
// attempt on. A request that is not safe returns ErrConnectionLost when
// the connection is lost. hedge sends copies within an attempt (see
// WithResend): safe, and answered at once when answered at all.
func (c *Client) roundTrip(ctx context.Context, subject string, body []byte, timeout time.Duration, safe, retryTimeouts, hedge bool) (*nats.Msg, error) {
	attempts := 1
	if safe {
		attempts = c.attempts
	}
	var lastErr error
	for a := 0; a < attempts; a++ {
		msg, lost, err := c.request(ctx, subject, body, timeout, hedge)
		if err == nil {
			return msg, nil
		}
		lastErr = err
		switch {
		case ctx.Err() != nil:
			return nil, err
		case lost && !safe:
			return nil, fmt.Errorf("%w (the outcome is unknown)", err)
		case lost:
			retryTimeouts = true // the request may never have reached a node
			continue
		case !retryTimeouts:
			return nil, err
		case errors.Is(err, nats.ErrNoResponders):
			select {
			case <-ctx.Done():
				return nil, err
			case <-time.After(time.Duration(100*(a+1)) * time.Millisecond):
			}
		case !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout):
			return nil, err
		}
	}
	return nil, lastErr
}

// readOnly reports whether an operation only reads, so that sending it
// again changes nothing.
func readOnly(op string) bool {
	return op == "Retrieve" || op == "ListTables"
}

// request makes one attempt: a request that gives up after timeout, or
// as soon as the connection is lost (lost, with err wrapping
// ErrConnectionLost): its reply cannot come after that. With hedge, a
// request unanswered after the client's resend wait is sent again
// (resendUntil).
func (c *Client) request(ctx context.Context, subject string, body []byte, timeout time.Duration, hedge bool) (msg *nats.Msg, lost bool, err error) {
	first := timeout
	if hedge && c.resend > 0 && c.resend < timeout {
		first = c.resend
	}
	msg, lost, err = c.requestOnce(ctx, subject, body, first)
	if first == timeout || err == nil || lost || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return msg, lost, err
	}
	return c.resendUntil(ctx, subject, body, timeout-first, first)
}

// resendUntil sends body again, and again each time twice as long has
// passed without a reply (at once when the connection was lost), until a
// reply to any copy comes or left has passed. The copies share one reply
// inbox: a request taken by a host that died, or lost with a server on
// its way, costs a resend wait instead of the whole timeout.
func (c *Client) resendUntil(ctx context.Context, subject string, body []byte, left, wait time.Duration) (*nats.Msg, bool, error) {
	inbox := c.nc.NewInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	deadline := time.Now().Add(left)
	for {
		conn := c.connection()
		wait = min(2*wait, time.Until(deadline))
		if err := c.nc.PublishRequest(subject, inbox, body); err != nil {
			return nil, false, err
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		stop := context.AfterFunc(conn, cancel)
		m, err := sub.NextMsgWithContext(wctx)
		stop()
		cancel()
		switch {
		case err == nil && len(m.Data) == 0 && m.Header.Get("Status") == "503":
			return nil, false, nats.ErrNoResponders
		case err == nil:
			return m, false, nil
		case ctx.Err() != nil:
			return nil, false, ctx.Err()
		case !time.Now().Before(deadline):
			return nil, false, context.DeadlineExceeded
		}
	}
}

// requestOnce is one request, given up after timeout or when the
// connection is lost.
func (c *Client) requestOnce(ctx context.Context, subject string, body []byte, timeout time.Duration) (msg *nats.Msg, lost bool, err error) {
	conn := c.connection()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := context.AfterFunc(conn, cancel)
	msg, err = c.nc.RequestWithContext(rctx, subject, body)
	stop()
	if err != nil && conn.Err() != nil && ctx.Err() == nil && errors.Is(err, context.Canceled) {
		return nil, true, fmt.Errorf("%w: %w", ErrConnectionLost, err)
	}
	return msg, false, err
}

// read makes a request that changes nothing (see roundTrip); hedge as
// there: false for a request the node may keep waiting on purpose (a
// long poll).
func (c *Client) read(ctx context.Context, subject string, body []byte, timeout time.Duration, hedge bool) (*nats.Msg, error) {
	return c.roundTrip(ctx, subject, body, timeout, true, false, hedge)
}

// connection returns a context that ends when the client's connection is
// next lost.
func (c *Client) connection() context.Context { return watchOf(c.nc).current() }

// watches holds the one connWatch of each connection in use (however
// many Clients share it), until the connection is closed.
var watches sync.Map // *nats.Conn → *connWatch

// connWatch follows a connection's status: lost ends when the connection
// is next lost, and is then replaced.
type connWatch struct {
	mu   sync.Mutex
	lost context.Context
	lose context.CancelFunc
}

func (w *connWatch) current() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lost
}

// watchOf returns nc's connWatch, starting it on first use: one goroutine
// per connection, which ends when the connection is closed.
func watchOf(nc *nats.Conn) *connWatch {
	if w, ok := watches.Load(nc); ok {
		return w.(*connWatch)
	}
	w := &connWatch{}
	w.lost, w.lose = context.WithCancel(context.Background())
	if prev, loaded := watches.LoadOrStore(nc, w); loaded {
		w.lose()
		return prev.(*connWatch)
	}
	ch := nc.StatusChanged(nats.RECONNECTING, nats.DISCONNECTED, nats.CLOSED)
	go func() {
		defer watches.Delete(nc)
		defer nc.RemoveStatusListener(ch)
		for s := range ch {
			if s == nats.CLOSED {
				return // requests fail with nats.ErrConnectionClosed
			}
			w.mu.Lock()
			w.lose()
			w.lost, w.lose = context.WithCancel(context.Background())
			w.mu.Unlock()
		}
	}()
	if nc.IsClosed() { // closed before the listener was registered
		nc.RemoveStatusListener(ch)
	}
	return w
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
	// An IfMatch the operation ignores (Insert's, the upserts') is left
	// out: the hosts refuse a field an operation does not take.
	return c.entity(ctx, table, wire.FromCommand(&engine.Command{Batch: true, Ops: ops}), opts)
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
// Its options are AsOf and AtLeast; a write's (WithID, WithMessages)
// make the node refuse it with InvalidInput.
func (c *Client) Retrieve(ctx context.Context, table, pk, rk string, opts ...CallOption) (*engine.Entity, *engine.Reply, error) {
	rep, err := c.entity(ctx, table, &engine.Request{Op: "Retrieve", PartitionKey: pk, RowKey: rk}, opts)
	if err != nil {
		return nil, rep, err
	}
	return rep.Entity, rep, nil
}
