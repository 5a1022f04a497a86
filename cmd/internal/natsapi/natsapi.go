package natsapi

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/outboxsubjects"
	"github.com/cairn-dev/cairn/cmd/internal/pages"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/journal/values"
	"github.com/cairn-dev/cairn/projections"
	"github.com/cairn-dev/cairn/projections/query"
)

// Config configures the service.
type Config struct {
	// Prefix is the first subject token ("cairn").
	Prefix string
	// QueueGroup shares requests between hosts ("cairn-hosts").
	QueueGroup string
	// Subscriptions is how many subscriptions per subject the host opens in
	// the queue group; each delivers on its own goroutine. Default: GOMAXPROCS.
	Subscriptions int
	// TableTimeout bounds a table command.
	TableTimeout time.Duration
	// PositionWait is the longest a Retrieve waits for the view to reach
	// the journal position its request names ("position"; 10 s).
	PositionWait time.Duration
	// PageBudget ends a Query page early when walking takes longer (5 s,
	// as the HTTP API's); the page then carries a continuation.
	PageBudget time.Duration
	// HoldSnapshot is how long a Query's snapshot stays held for its next
	// page (30 s); HeldSnapshots caps how many are held at once (4096).
	HoldSnapshot  time.Duration
	HeldSnapshots int
	// DrainTimeout bounds the wait for the requests in hand at shutdown.
	DrainTimeout time.Duration
	// Outbox is the allowlist of the NATS subjects outbox messages may
	// name; nil allows Cairn queues only.
	Outbox *outboxsubjects.Allowlist
	// Replies drops the requests whose reply subject is not an inbox
	// (wire.ReplyAllowed) before they are decoded; nil: a guard of the
	// service's own, logging to the service's logger.
	Replies *wire.ReplyGuard
	// Pages reads the tables whose view here holds only some shards
	// from the hosts that hold the others (package pages); nil: every
	// view is whole.
	Pages *pages.Service
	// Values is the large values' store: a command's references are
	// checked against it before it is submitted (values.Check), and
	// PutValue and GetValue move values in and out of it (values.go); nil
	// refuses every reference.
	Values ValueStore
	// MaxValue bounds a value's size (1 GiB); MaxValueSessions the value
	// sessions open at once on this node (32); ValueIdle ends a session
	// whose next message does not come within it (10 s), and MinValueRate,
	// in bytes per second, one slower than that on the whole (16 KiB/s),
	// as the HTTP door's bodies.
	MaxValue         int64
	MaxValueSessions int
	ValueIdle        time.Duration
	MinValueRate     int64
}

func (c *Config) defaults() {
	if c.Prefix == "" {
		c.Prefix = "cairn"
	}
	if c.QueueGroup == "" {
		c.QueueGroup = "cairn-hosts"
	}
	if c.Subscriptions <= 0 {
		c.Subscriptions = runtime.GOMAXPROCS(0)
	}
	if c.TableTimeout <= 0 {
		c.TableTimeout = 30 * time.Second
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 5 * time.Second
	}
	if c.PositionWait <= 0 {
		c.PositionWait = 10 * time.Second
	}
	if c.PageBudget <= 0 {
		c.PageBudget = 5 * time.Second
	}
	if c.HoldSnapshot <= 0 {
		c.HoldSnapshot = 30 * time.Second
	}
	if c.HeldSnapshots <= 0 {
		c.HeldSnapshots = 4096
	}
	if c.MaxValue <= 0 {
		c.MaxValue = values.DefaultMaxSize
	}
	if c.MaxValueSessions <= 0 {
		c.MaxValueSessions = 32
	}
	if c.ValueIdle <= 0 {
		c.ValueIdle = 10 * time.Second
	}
	if c.MinValueRate <= 0 {
		c.MinValueRate = 16 << 10
	}
}

// Committer is what the service needs of the committer (engine/commit).
type Committer interface {
	// Submit queues a command; done receives its reply exactly once.
	Submit(cmd *engine.Command, done func(*engine.Reply))
	CreateTable(ctx context.Context, name string) (engine.TableInfo, error)
	DeleteTable(ctx context.Context, name string) error
}

// Service is the NATS front of the committer, the views and the journal.
type Service struct {
	nc      *nats.Conn
	c       Committer
	views   *projections.Views
	journal Journal
	log     *slog.Logger
	cfg     Config
	ready   chan struct{} // closed once subscribed
	held    *query.Holds  // the snapshots of Queries with more pages
	// ctx bounds the handlers: it outlives Run's context, so that requests
	// taken before a shutdown are still answered while it drains.
	ctx context.Context
	// feedCtx bounds the requests that wait or work on goroutines of
	// their own (wait.go): it ends once the subscriptions are drained,
	// and the waiting requests are then answered at once.
	feedCtx context.Context

	working chan struct{} // a token per request at work (maxWorking)
	waiting atomic.Int64  // requests waiting, until a wake worker takes them (maxWaiting)

	mu          sync.Mutex
	off         bool               // set once Run stops: no more waits or work
	expiry      expiryHeap         // the requests waiting, by deadline
	expiryMoved chan struct{}      // the earliest deadline moved
	woken       []*wakeGroup       // woken requests, for the wake workers
	grouped     map[any]*wakeGroup // the groups of woken, by key
	workers     int                // wake workers running
	wg          sync.WaitGroup     // requests at work and wake workers

	vsessions int                        // value sessions holding a slot (values.go)
	vopen     map[*valueSession]struct{} // those subscribed, for Run's end

	refused       [refusals]atomic.Uint64
	refusalLogged atomic.Int64 // when a refusal was last logged (Unix ns)
}

// New returns a service on nc, the connection that answers requests (it
// needs no rights but to take them and to publish replies). It starts
// nothing: Run subscribes.
func New(nc *nats.Conn, c Committer, views *projections.Views, j Journal, log *slog.Logger, cfg Config) *Service {
	cfg.defaults()
	if cfg.Replies == nil {
		cfg.Replies = &wire.ReplyGuard{Log: log}
	}
	return &Service{nc: nc, c: c, views: views, journal: j, log: log, cfg: cfg, ready: make(chan struct{}),
		held:    query.NewHolds(cfg.HoldSnapshot, cfg.HeldSnapshots),
		working: make(chan struct{}, maxWorking), expiryMoved: make(chan struct{}, 1), grouped: map[any]*wakeGroup{},
		vopen: map[*valueSession]struct{}{}}
}

// CommandSubject returns the subject of a table's entity commands; table
// is its full name (engine.FullTableName): <prefix>.cmd.<Table> for the
// development account's tables, <prefix>.cmd.<account>.<Table> for
// another account's. The development account's tables also answer on
// <prefix>.cmd.devstoreaccount1.<Table>.
func CommandSubject(prefix, table string) string { return prefix + ".cmd." + table }

// TablesSubject returns the subject of an account's table commands:
// <prefix>.tables for the development account (also
// <prefix>.tables.devstoreaccount1), <prefix>.tables.<account> for another.
func TablesSubject(prefix, account string) string {
	if account == "" || account == engine.DevAccount {
		return prefix + ".tables"
	}
	return prefix + ".tables." + account
}

// accountOf returns the account a subject names after its first tokens
// (rest is "" for the development account's short form), refusing a name
// that is not an account's.
func accountOf(rest string) (string, error) {
	if rest == "" {
		return engine.DevAccount, nil
	}
	if err := engine.ValidateAccountName(rest); err != nil {
		return "", err
	}
	return rest, nil
}

// subjectTable reads the table a subject names after kind (for example
// "cairn.cmd."): "<Table>", the development account's, or
// "<account>.<Table>". It returns the account and the table's full name.
func subjectTable(subject, kind string) (account, full string, err error) {
	a, table, ok := strings.Cut(strings.TrimPrefix(subject, kind), ".")
	if !ok {
		a, table = "", a
	}
	if account, err = accountOf(a); err != nil {
		return "", "", err
	}
	return account, engine.FullTableName(account, table), nil
}

// Ready is closed once the service is subscribed to its subjects.
func (s *Service) Ready() <-chan struct{} { return s.ready }

// Run subscribes to the command subjects in the queue group and serves
// until ctx ends. Then it drains: requests already received are answered,
// new ones go to the other hosts; after DrainTimeout the subscriptions are
// dropped. It returns an error only when it cannot subscribe.
func (s *Service) Run(ctx context.Context) error {
	s.ctx = context.WithoutCancel(ctx)
	var stopFeeds context.CancelFunc
	s.feedCtx, stopFeeds = context.WithCancel(s.ctx)
	expiring := make(chan struct{})
	go func() {
		defer close(expiring)
		s.expire(s.feedCtx)
	}()
	defer func() {
		// After the drain: the work under way ends, the waiting requests
		// are answered with what the view has, and Run returns once no
		// goroutine of a request is left.
		stopFeeds()
		<-expiring
		s.stopWaiting()
		s.endValues()
		s.wg.Wait()
	}()
	var subs []*nats.Subscription
	subscribe := func(subject string, h nats.MsgHandler) error {
		sub, err := s.nc.QueueSubscribe(subject, s.cfg.QueueGroup, func(m *nats.Msg) {
			if s.cfg.Replies.Allow(m.Subject, m.Reply) {
				h(m)
			}
		})
		if err != nil {
			return fmt.Errorf("natsapi: subscribe %s: %w", subject, err)
		}
		subs = append(subs, sub)
		return nil
	}
	var err error
	for i := 0; i < s.cfg.Subscriptions && err == nil; i++ {
		// The development account's tables (one token), then any account's
		// (two).
		for _, subject := range []string{CommandSubject(s.cfg.Prefix, "*"), CommandSubject(s.cfg.Prefix, "*.*")} {
			if err == nil {
				err = subscribe(subject, s.handleEntity)
			}
			if err == nil {
				// A slow host must not drop commands silently: allow a deep queue.
				_ = subs[len(subs)-1].SetPendingLimits(1<<20, 1<<30)
			}
		}
	}
	for _, subject := range []string{TablesSubject(s.cfg.Prefix, ""), TablesSubject(s.cfg.Prefix, "*")} {
		if err == nil {
			err = subscribe(subject, s.handleTables)
		}
	}
	for _, subject := range []string{ChangesSubject(s.cfg.Prefix, "*"), ChangesSubject(s.cfg.Prefix, "*.*")} {
		if err == nil {
			err = subscribe(subject, s.handleChanges)
		}
	}
	if err == nil {
		err = s.nc.Flush()
	}
	if err != nil {
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
		return err
	}
	close(s.ready)
	<-ctx.Done()
	s.drain(subs)
	return nil
}

// drain stops the subscriptions from taking requests and waits until those
// already taken are handled, DrainTimeout at the most.
func (s *Service) drain(subs []*nats.Subscription) {
	closed := make([]<-chan nats.SubStatus, len(subs))
	for i, sub := range subs {
		closed[i] = sub.StatusChanged(nats.SubscriptionClosed)
		_ = sub.Drain()
	}
	timeout := time.NewTimer(s.cfg.DrainTimeout)
	defer timeout.Stop()
	for i, sub := range subs {
		if !sub.IsValid() {
			continue
		}
		select {
		case <-closed[i]:
		case <-timeout.C:
			s.log.Warn("NATS requests still in flight after the drain timeout; dropping them", "timeout", s.cfg.DrainTimeout)
			for _, sub := range subs[i:] {
				_ = sub.Unsubscribe()
			}
			return
		}
	}
}

// respond sends a reply in the request's encoding; an error goes in JSON
// when the request was not msgpack a client sent (wire.ErrorEncoding), so
// that a person at a terminal can read it.
func respond(m *nats.Msg, enc wire.Encoding, r *engine.Reply) {
	if m.Reply == "" {
		return
	}
	if r.Error != nil {
		enc = errorEncoding(m)
		c := *r
		c.Error = notARequest(m, enc, r.Error)
		r = &c
	}
	_ = m.Respond(wire.EncodeReply(r, enc))
}

// errorEncoding is the encoding of an error reply to m (wire.ErrorEncoding).
func errorEncoding(m *nats.Msg) wire.Encoding {
	return wire.ErrorEncoding(m.Data, m.Header.Get("Content-Type"))
}

// notARequest adds to an error that answers a body read as msgpack but
// answered in JSON (text typed at a terminal) what a request looks like.
func notARequest(m *nats.Msg, enc wire.Encoding, e *engine.Error) *engine.Error {
	if enc != wire.JSON || wire.Detect(m.Data, m.Header.Get("Content-Type")) == wire.JSON || e.Code != engine.CodeInvalidInput {
		return e
	}
	c := *e
	c.Message += ` (a request is a JSON object, {"op": …}, or a msgpack map; docs/PROTOCOL.md)`
	return &c
}

// errReply turns err into a reply. Errors without an Azure code are bugs or
// infrastructure failures: the user sees InternalError with the text.
func errReply(err error) *engine.Reply { return &engine.Reply{Error: engine.AsError(err)} }

func (s *Service) handleEntity(m *nats.Msg) {
	enc := wire.Detect(m.Data, m.Header.Get("Content-Type"))
	account, table, err := subjectTable(m.Subject, s.cfg.Prefix+".cmd.")
	if err != nil {
		respond(m, enc, errReply(err))
		return
	}
	if wire.IsQuery(m.Data, enc) {
		s.handleQuery(m, enc, table)
		return
	}
	if wire.ValueOp(m.Data, enc) != "" {
		s.handleValue(m, enc, account, table)
		return
	}
	req, err := wire.DecodeRequest(m.Data, enc)
	if err != nil {
		respond(m, enc, errReply(err))
		return
	}
	switch req.Op {
	case "Retrieve":
		if req.AsOf == 0 && req.Position == 0 {
			respond(m, enc, s.retrieve(s.ctx, table, req))
			return
		}
		// A read of a position the view has not reached waits on the
		// view, without a goroutine, and one it has reached is a read
		// of the view; a read of the past may replay, on a goroutine of
		// its own, which keeps the subscription free.
		answer := func(ctx context.Context) { respond(m, enc, s.retrieve(ctx, table, req)) }
		fail := func(err error) { respond(m, enc, errReply(err)) }
		lookup := req.AsOf == 0 // for a view to wait on
		if t, ok := s.views.Table(table); ok && lookup {
			if t.Err() != nil || !s.waitPosition(t, req.Position, answer, fail) {
				answer(s.feedCtx) // the view's answer, or why it stopped
			}
			return
		}
		s.work(table, lookup, req.Position, answer, fail)
		return
	case "CreateTable", "DeleteTable", "ListTables":
		respond(m, enc, errReply(engine.Errorf(engine.CodeInvalidInput,
			"%s is a table command: send it to %s", req.Op, TablesSubject(s.cfg.Prefix, account))))
		return
	}
	cmd, err := wire.ToCommand(req, table)
	if err == nil {
		err = s.cfg.Outbox.Check(account, cmd.Messages)
	}
	if err == nil {
		err = s.checkValues(account, cmd)
	}
	if err != nil {
		respond(m, enc, errReply(err))
		return
	}
	s.c.Submit(cmd, func(r *engine.Reply) { respond(m, enc, r) })
}

// checkValues checks the references to large values that cmd's entities
// take up against the store, as the HTTP door does (values.Check): a
// command without references costs a scan of its strings' prefixes, one
// with references an Info each, on the subscription's goroutine.
func (s *Service) checkValues(account string, cmd *engine.Command) error {
	if !engine.CommandHoldsRefs(cmd) {
		return nil // no deadline, no closure: this runs for every command
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.TableTimeout)
	defer cancel()
	var table string
	return values.Check(ctx, s.cfg.Values, cmd, func(pk, rk string) (values.Key, error) {
		if table == "" {
			t, err := s.views.Read(ctx, cmd.Table)
			if err != nil {
				return values.Key{}, err
			}
			table = engine.ShownTable(t.Name())
		}
		return values.Key{Account: account, Table: table, PartitionKey: pk, RowKey: rk}, nil
	})
}

// retrieve answers a Retrieve within ctx.
func (s *Service) retrieve(ctx context.Context, table string, req *engine.Request) *engine.Reply {
	pk, rk := req.PartitionKey, req.RowKey
	if req.Entity != nil {
		pk, rk = req.Entity.PartitionKey, req.Entity.RowKey
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.TableTimeout)
	defer cancel()
	t, err := s.views.Read(ctx, table)
	if err != nil {
		return errReply(err)
	}
	shown := engine.ShownTable(t.Name())
	if t.Gathered() && s.cfg.Pages != nil {
		if req.AsOf != 0 && req.Position != 0 {
			_, err := s.snapshot(ctx, t, req.AsOf, req.Position) // the same refusal
			return errReply(err)
		}
		res, err := s.cfg.Pages.Read(ctx, t, pages.Query{Point: &pages.Keys{PK: pk, RK: rk}, Limit: 1, Position: req.Position, AsOf: req.AsOf})
		if err != nil {
			return errReply(err)
		}
		if len(res.Entities) == 0 {
			return errReply(engine.Errorf(engine.CodeResourceNotFound, "entity (%q, %q) does not exist in %s", pk, rk, shown))
		}
		e := res.Entities[0]
		return &engine.Reply{Entity: e, ETag: engine.ETag(t.Epoch(), e.Version), Timestamp: e.Timestamp, Seq: res.Seq}
	}
	snap, err := s.snapshot(ctx, t, req.AsOf, req.Position)
	if err != nil {
		return errReply(err)
	}
	e, ok := snap.Get(pk, rk)
	t.NoteRead(pk, 1)
	if !ok {
		return errReply(engine.Errorf(engine.CodeResourceNotFound, "entity (%q, %q) does not exist in %s", pk, rk, shown))
	}
	return &engine.Reply{Entity: e, ETag: engine.ETag(t.Epoch(), e.Version), Timestamp: e.Timestamp, Seq: snap.Seq}
}

// snapshot returns the snapshot a Retrieve or Query reads: as of the
// request's "asOf", or the view's once it has reached the request's
// "position" (mirroring the HTTP API's X-Cairn-As-Of and X-Cairn-Position).
func (s *Service) snapshot(ctx context.Context, t *projections.Table, asOf, position uint64) (*projections.Snapshot, error) {
	if asOf != 0 {
		if position != 0 {
			return nil, engine.Errorf(engine.CodeInvalidInput, "\"asOf\" and \"position\" contradict each other: send one (asOf reads the past, position waits for the present to reach a write)")
		}
		return s.views.AsOf(ctx, t, asOf)
	}
	return t.WaitPosition(ctx, position, s.cfg.PositionWait)
}

func (s *Service) handleTables(m *nats.Msg) {
	enc := wire.Detect(m.Data, m.Header.Get("Content-Type"))
	account, err := accountOf(strings.TrimPrefix(strings.TrimPrefix(m.Subject, TablesSubject(s.cfg.Prefix, "")), "."))
	if err != nil {
		respond(m, enc, errReply(err))
		return
	}
	req, err := wire.DecodeRequest(m.Data, enc)
	if err != nil {
		respond(m, enc, errReply(err))
		return
	}
	// Table commands wait on the catalog: keep the subscription free.
	go func() {
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.TableTimeout)
		defer cancel()
		r := s.tableCommand(ctx, account, req)
		if r.Error != nil && r.Error.Code == engine.CodeInternalError {
			s.log.Error("table command failed", "op", req.Op, "table", req.Table, "err", r.Error.Message)
		}
		respond(m, enc, r)
	}()
}

// tableCommand runs a table command of an account; the request names the
// table as the account sees it.
func (s *Service) tableCommand(ctx context.Context, account string, req *engine.Request) *engine.Reply {
	switch req.Op {
	case "CreateTable", "DeleteTable":
		if err := engine.ValidateTableName(req.Table); err != nil {
			return errReply(err)
		}
	}
	full := engine.FullTableName(account, req.Table)
	switch req.Op {
	case "CreateTable":
		info, err := s.c.CreateTable(ctx, full)
		if err != nil {
			return errReply(err)
		}
		info.Name = engine.ShownTable(info.Name)
		return &engine.Reply{Tables: []engine.TableInfo{info}, Seq: info.Epoch}
	case "DeleteTable":
		if err := s.c.DeleteTable(ctx, full); err != nil {
			return errReply(err)
		}
		return &engine.Reply{}
	case "ListTables":
		return &engine.Reply{Tables: s.views.TablesOf(account)}
	}
	return errReply(engine.Errorf(engine.CodeInvalidInput,
		"op %q is not a table command (%s); entity commands (%s) go to %s",
		req.Op, wire.TableOps(), wire.EntityOps(), CommandSubject(s.cfg.Prefix, engine.FullTableName(account, "<Table>"))))
}
