// Package pages answers reads of a table whose shards are spread over
// hosts (docs/SCALE.md, C): a read of one partition goes to its shard's
// first holder, a query across partitions asks every shard's first
// holder for its share and merges their pages in key order
// (query.Merge). Each host answers from its view with the same plan, so
// the pages are what one view holding every shard would answer. The
// front doors call Read whenever the table's view here holds only some
// shards; a host holding a table whole never calls it.
//
// Hosts ask each other on <prefix>.node.<host>.page, a subject only
// nodes may publish on, with a msgpack request; a host that is gone does
// not answer (no responders, at once), one that no longer holds a shard
// says so, and the next holder is asked.
package pages

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/projections"
	"github.com/cairn-dev/cairn/projections/query"
)

// Query is a read of one page of a table: a filter, the page's bounds and
// the position to read at.
type Query struct {
	// Filter is the $filter as the client sent it ("": every entity).
	Filter string
	// FromPK and ToPK bound the partition keys read, inclusive (a shared
	// access signature's range; "": no bound).
	FromPK, ToPK string
	// Point, when set, reads the one entity with these keys; Partition,
	// when set, reads that partition only.
	Point     *Keys
	Partition *string
	// Limit is the most entities in the page (query.MaxPage at most).
	Limit int
	// From resumes an earlier page.
	From *query.Continuation
	// Descending walks the keys from the highest down.
	Descending bool
	// Position is a journal position every view read must have reached
	// (0: none); AsOf reads the table as of that position (0: now).
	Position, AsOf uint64
	// Keep makes the hosts hold the snapshots they read for the query's
	// next pages (holds.go), under the id Result.Hold; Hold, from an
	// earlier page's Result, makes them read those snapshots again. Not
	// for as-of reads (their snapshot is the past already) nor an
	// aggregate's folded groups. Read leaves Hold set only when the
	// query keeps: the hosts asked hold when it is not 0.
	Keep bool
	Hold uint64
}

// Keys name one entity.
type Keys struct{ PK, RK string }

// plan is the query's plan: its filter, narrowed by the bounds and the
// point.
func (q *Query) plan() (*query.Plan, error) {
	var f query.Expr
	if q.Filter != "" {
		var err error
		if f, err = query.Parse(q.Filter); err != nil {
			return nil, engine.Errorf(engine.CodeInvalidInput, "%v", err)
		}
	}
	and := func(c *query.Compare) {
		if f == nil {
			f = c
		} else {
			f = &query.And{L: c, R: f}
		}
	}
	if q.FromPK != "" {
		and(&query.Compare{Property: "PartitionKey", Op: query.Ge, Value: engine.String(q.FromPK)})
	}
	if q.ToPK != "" {
		and(&query.Compare{Property: "PartitionKey", Op: query.Le, Value: engine.String(q.ToPK)})
	}
	if q.Partition != nil {
		and(&query.Compare{Property: "PartitionKey", Op: query.Eq, Value: engine.String(*q.Partition)})
	}
	if q.Point != nil {
		and(&query.Compare{Property: "RowKey", Op: query.Eq, Value: engine.String(q.Point.RK)})
		and(&query.Compare{Property: "PartitionKey", Op: query.Eq, Value: engine.String(q.Point.PK)})
	}
	return query.NewPlan(f), nil
}

// Placement names the holders of a shard, most preferred first.
type Placement func(table string, epoch uint64, shards, shard uint32) []string

// Service reads pages from the hosts holding a table's shards, and
// answers the other hosts' requests for pages of this one's view.
type Service struct {
	nc        *nats.Conn // the node user's
	prefix    string
	self      string // this host's key
	views     *projections.Views
	placement Placement
	budget    time.Duration // of one host's page (Azure's 5 s)
	wait      time.Duration // for a position (PositionWait)
	timeout   time.Duration // of one request to another host
	log       *slog.Logger

	holds *query.Holds // this host's snapshots held for gathered queries, by the query's id

	ready chan struct{}
}

// Config configures a Service.
type Config struct {
	Prefix    string
	Self      string // this host's key among the members
	Placement Placement
	// PageBudget bounds the walk of one host's page; PositionWait the
	// wait for a position.
	PageBudget, PositionWait time.Duration
	// HoldSnapshot is how long a gathered query's snapshots stay held
	// for its next page (30 s), HeldSnapshots how many at most (4,096).
	HoldSnapshot  time.Duration
	HeldSnapshots int
	Log           *slog.Logger
}

// New returns a Service; Run serves the other hosts.
func New(nc *nats.Conn, views *projections.Views, cfg Config) *Service {
	ttl, max := cmp.Or(cfg.HoldSnapshot, 30*time.Second), cmp.Or(cfg.HeldSnapshots, 4096)
	return &Service{nc: nc, prefix: cfg.Prefix, self: cfg.Self, views: views, placement: cfg.Placement,
		budget: cfg.PageBudget, wait: cfg.PositionWait, timeout: cfg.PageBudget + cfg.PositionWait + 5*time.Second,
		holds: query.NewHolds(ttl, max),
		log:   cfg.Log, ready: make(chan struct{})}
}

// Subject is where a host takes the others' requests for pages.
func Subject(prefix, host string) string { return prefix + ".node." + host + ".page" }

// Result is a page and the journal position it was read at: the lowest
// of the views that answered.
type Result struct {
	query.Page
	Seq uint64
	// Hold names the hosts' held snapshots for the next page (Query.Keep),
	// 0 for none; Release lets them go.
	Hold uint64

	hosts []string // the hosts that answered
}

// Read reads one page of t, whose reads are gathered (Table.Gathered): a
// plan reading one partition of a table from its shard's first holder,
// any other from every shard's first holder, merged. The first holder
// decides the shard's commands (the router) and answers once a write is
// visible in its view, so a read there sees every write answered, as on
// one host; a holder that is gone or no longer holds the shard is passed
// over for the next.
//
// A declared projection is read from every shard of its source, each
// host answering for the entries derived from its shards; an
// aggregate's groups, kept per shard, are folded by each host and again
// here, and its filter is applied to the folded groups (fold).
func (s *Service) Read(ctx context.Context, t *projections.Table, q Query) (Result, error) {
	plan, err := q.plan()
	if err != nil {
		return Result{}, err
	}
	src := t.Placed()
	shards := src.Shards()
	def, folding := t.Folding()
	switch {
	case !q.Keep || q.AsOf != 0 || folding:
		q.Hold = 0
	case q.Hold == 0:
		q.Hold = newHold() // the query's first page
	}
	if pk, ok := plan.Partition(); ok && src == t {
		r, err := s.shard(ctx, t, plan, q, uint32(engine.Shard(pk, int(shards))), nil, true)
		r.Hold = q.Hold
		return r, err
	}
	filter := plan.Filter
	if folding {
		// The hosts fold their shards' entities of each group; the
		// filter is for the folded groups, here.
		q = q.forFolding()
		if plan, err = q.plan(); err != nil {
			return Result{}, err
		}
	}
	// Every shard from its first holder.
	byHost := map[string][]uint32{}
	for sh := range shards {
		hosts := s.placement(src.Name(), src.Epoch(), shards, sh)
		if len(hosts) == 0 {
			return Result{}, notHeld(src, sh)
		}
		byHost[hosts[0]] = append(byHost[hosts[0]], sh)
	}
	results := make([]Result, 0, len(byHost))
	errs := make([]error, 0, len(byHost))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for host, list := range byHost {
		wg.Go(func() {
			ask := func(ctx context.Context) (Result, error) {
				if host != s.self {
					return s.remote(ctx, t, q, host, list)
				}
				if !holdsAll(src, list) {
					return Result{}, errNotHeld
				}
				return s.local(ctx, t, plan, q, list)
			}
			// The shards' next holders, if their first does not answer
			// for them, or not soon.
			next := func(ctx context.Context) (Result, error) { return s.fallback(ctx, t, plan, q, host, list) }
			// A page may take its whole budget: the next holders are
			// asked only once that has passed.
			r, err := first(ctx, s.budget+hedgeAfter, ask, next)
			mu.Lock()
			defer mu.Unlock()
			results, errs = append(results, r), append(errs, err)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Result{}, firstCoded(errs)
	}
	if folding {
		return folded(results, q, def, filter), nil
	}
	r := merged(results, q)
	r.Hold = q.Hold
	return r, nil
}

// Release lets go of the snapshots the hosts that answered r hold for
// its query's next page: r is its last page. Hosts that answered only
// earlier pages let theirs go by their time.
func (s *Service) Release(r Result) {
	if r.Hold == 0 {
		return
	}
	for _, host := range r.hosts {
		if host == s.self {
			s.holds.Release(r.Hold)
			continue
		}
		data, err := msgpack.Marshal(&request{Release: r.Hold})
		if err == nil {
			err = s.nc.Publish(Subject(s.prefix, host), data)
		}
		if err != nil {
			s.log.Debug("pages: release a host's snapshot", "host", host, "err", err)
		}
	}
}

// holdsAll reports whether t's view holds every shard of list.
func holdsAll(t *projections.Table, list []uint32) bool {
	for _, sh := range list {
		if !t.HoldsShard(sh) {
			return false
		}
	}
	return true
}

// merged merges the hosts' pages of one query; its position is the
// lowest they were read at.
func merged(results []Result, q Query) Result {
	pages, seq := split(results)
	var hosts []string
	for _, r := range results {
		hosts = append(hosts, r.hosts...)
	}
	return Result{Page: query.Merge(pages, q.Limit, q.Descending), Seq: seq, hosts: hosts}
}

// split returns the results' pages and the lowest position they were
// read at.
func split(results []Result) ([]query.Page, uint64) {
	pages := make([]query.Page, len(results))
	seq := uint64(0)
	for i, r := range results {
		pages[i] = r.Page
		if i == 0 || r.Seq < seq {
			seq = r.Seq
		}
	}
	return pages, seq
}

// errNotHeld: the host asked does not answer for the shards (gone, or no
// longer holding one of them); the next holder is to be asked.
var errNotHeld = errors.New("not held there")

// shard reads a page of one shard from its holders in turn (first),
// passing over skip; whole reads this host's view whole (the plan reads
// one partition, of that shard), else only the shard's partitions.
func (s *Service) shard(ctx context.Context, t *projections.Table, plan *query.Plan, q Query, sh uint32, skip []string, whole bool) (Result, error) {
	src := t.Placed()
	var tries []func(context.Context) (Result, error)
	for _, host := range s.placement(src.Name(), src.Epoch(), src.Shards(), sh) {
		switch {
		case slices.Contains(skip, host):
		case host == s.self && src.HoldsShard(sh):
			var only []uint32
			if !whole {
				only = []uint32{sh}
			}
			tries = append(tries, func(ctx context.Context) (Result, error) { return s.local(ctx, t, plan, q, only) })
		case host != s.self:
			tries = append(tries, func(ctx context.Context) (Result, error) { return s.remote(ctx, t, q, host, []uint32{sh}) })
		}
	}
	r, err := first(ctx, hedgeAfter, tries...)
	if errors.Is(err, errNotHeld) {
		return Result{}, notHeld(src, sh)
	}
	return r, err
}

// hedgeAfter is how long a host asked for a page may take before the
// next holder is asked as well: a host killed after it took a request
// never answers it, and no one says so until its heartbeats have lapsed.
const hedgeAfter = time.Second

// first makes the tries in turn, each once the one before failed with
// errNotHeld or took longer than after, and returns the first
// answer, or the first error that is the reader's (a coded one: a
// position not reached, a bad filter). Reads are idempotent: a late
// answer is dropped.
func first(ctx context.Context, after time.Duration, tries ...func(context.Context) (Result, error)) (Result, error) {
	if len(tries) == 0 {
		return Result{}, errNotHeld
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		r   Result
		err error
	}
	answers := make(chan answer, len(tries))
	started, pending := 0, 0
	start := func() {
		try := tries[started]
		started, pending = started+1, pending+1
		go func() { r, err := try(ctx); answers <- answer{r, err} }()
	}
	start()
	hedge := time.NewTimer(after)
	defer hedge.Stop()
	err := errNotHeld
	for pending > 0 {
		select {
		case a := <-answers:
			pending--
			if a.err == nil || !errors.Is(a.err, errNotHeld) && engine.ErrorCode(a.err) != engine.CodeOperationTimedOut {
				return a.r, a.err
			}
			err = a.err
			if started < len(tries) {
				start()
			}
		case <-hedge.C:
			if started < len(tries) {
				start()
				hedge.Reset(after)
			}
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
	return Result{}, err
}

// fallback asks, for each shard first sent to a host that did not answer
// for it, its next holders.
func (s *Service) fallback(ctx context.Context, t *projections.Table, plan *query.Plan, q Query, failed string, list []uint32) (Result, error) {
	results := make([]Result, 0, len(list))
	for _, sh := range list {
		r, err := s.shard(ctx, t, plan, q, sh, []string{failed}, false)
		if err != nil {
			return Result{}, err
		}
		results = append(results, r)
	}
	if def, ok := t.Folding(); ok {
		return folded(results, q, def, nil), nil // each host's share, as the host itself answers it
	}
	return merged(results, q), nil
}

func notHeld(t *projections.Table, shard uint32) error {
	return engine.Errorf(engine.CodeServerBusy, "no host holding shard %d of table %s answered (the hosts are changing); retry", shard, engine.ShownTable(t.Name()))
}

// firstCoded returns the first error with a code other than
// InternalError, else the first.
func firstCoded(errs []error) error {
	for _, err := range errs {
		if err != nil && engine.ErrorCode(err) != engine.CodeInternalError {
			return err
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// local reads a page of this host's view, of the shards given (nil: all
// it holds), at the query's position.
func (s *Service) local(ctx context.Context, t *projections.Table, plan *query.Plan, q Query, shards []uint32) (Result, error) {
	var snap *projections.Snapshot
	var err error
	keep := q.Hold != 0 && q.AsOf == 0
	if keep {
		if h, ok := s.holds.Get(q.Hold, t.Name(), t.Epoch()); ok && h.Seq >= q.Position {
			snap = h
		}
	}
	switch {
	case snap != nil:
	case q.AsOf != 0:
		snap, err = s.views.AsOf(ctx, t, q.AsOf)
	case q.Position != 0:
		snap, err = t.WaitPosition(ctx, q.Position, s.wait)
	default:
		snap = t.Snapshot()
	}
	if err != nil {
		return Result{}, err
	}
	o := query.Options{Limit: q.Limit, From: q.From, Descending: q.Descending}
	if s.budget > 0 {
		o.Deadline = time.Now().Add(s.budget)
	}
	if shards != nil {
		o.Keep = t.KeepShards(shards)
	}
	if def, ok := t.Folding(); ok {
		return Result{Page: foldLocal(snap, plan, o, def), Seq: snap.Seq}, nil
	}
	if keep {
		s.holds.PutAt(q.Hold, snap) // the one held again, or a new one in its place
	}
	return Result{Page: plan.Run(snap, o), Seq: snap.Seq, hosts: []string{s.self}}, nil
}

// request is what one host asks another: a page of the shards listed.
type request struct {
	Table      string   `msgpack:"table"`
	Epoch      uint64   `msgpack:"epoch"`
	Projection string   `msgpack:"projection,omitempty"` // a projection of Table, read instead
	Shards     []uint32 `msgpack:"shards"`
	Filter     string   `msgpack:"filter,omitempty"`
	FromPK     string   `msgpack:"fromPK,omitempty"`
	ToPK       string   `msgpack:"toPK,omitempty"`
	Point      *Keys    `msgpack:"point,omitempty"`
	Partition  *string  `msgpack:"partition,omitempty"`
	Limit      int      `msgpack:"limit"`
	From       *[2]string
	Descending bool   `msgpack:"desc,omitempty"`
	Position   uint64 `msgpack:"position,omitempty"`
	AsOf       uint64 `msgpack:"asOf,omitempty"`
	Hold       uint64 `msgpack:"hold,omitempty"`    // the query's id: read the snapshot held under it, or hold the one read
	Release    uint64 `msgpack:"release,omitempty"` // alone, sent without a reply: let this hold go
}

// reply is a page, or why there is none (NotHeld: the host does not hold
// a shard asked for).
type reply struct {
	Error    *engine.Error `msgpack:"error,omitempty"`
	NotHeld  bool          `msgpack:"notHeld,omitempty"`
	Entities []byte        `msgpack:"entities"` // entities (wire.EncodeEntity) and versions
	Count    int           `msgpack:"count"`
	More     bool          `msgpack:"more,omitempty"`
	NextPK   string        `msgpack:"nextPK,omitempty"`
	NextRK   string        `msgpack:"nextRK,omitempty"`
	Examined int           `msgpack:"examined"`
	Seq      uint64        `msgpack:"seq"`
}

// remote asks host for a page of the shards; errNotHeld when it does not
// answer for them.
func (s *Service) remote(ctx context.Context, t *projections.Table, q Query, host string, shards []uint32) (Result, error) {
	src := t.Placed()
	req := request{Table: src.Name(), Epoch: src.Epoch(), Shards: shards, Filter: q.Filter, FromPK: q.FromPK, ToPK: q.ToPK, Point: q.Point, Partition: q.Partition,
		Limit: q.Limit, Descending: q.Descending, Position: q.Position, AsOf: q.AsOf, Hold: q.Hold}
	if src != t {
		req.Projection = t.Name()
	}
	if q.From != nil {
		req.From = &[2]string{q.From.PartitionKey, q.From.RowKey}
	}
	data, err := msgpack.Marshal(&req)
	if err != nil {
		return Result{}, err
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	m, err := s.nc.RequestWithContext(rctx, Subject(s.prefix, host), data)
	cancel()
	if errors.Is(err, nats.ErrNoResponders) {
		return Result{}, errNotHeld // gone: its subscription went with its connection
	}
	if err != nil {
		return Result{}, engine.Errorf(engine.CodeOperationTimedOut, "the host holding some shards of table %s did not answer: %v", engine.ShownTable(t.Name()), err)
	}
	var rep reply
	if err := msgpack.Unmarshal(m.Data, &rep); err != nil {
		return Result{}, fmt.Errorf("pages: a host's answer: %w", err)
	}
	switch {
	case rep.NotHeld:
		return Result{}, errNotHeld
	case rep.Error != nil:
		return Result{}, rep.Error
	}
	ents, err := decodeEntities(rep.Entities, rep.Count)
	if err != nil {
		return Result{}, fmt.Errorf("pages: a host's answer: %w", err)
	}
	return Result{Page: query.Page{Entities: ents, More: rep.More, NextPartitionKey: rep.NextPK, NextRowKey: rep.NextRK, Examined: rep.Examined}, Seq: rep.Seq, hosts: []string{host}}, nil
}

// Ready is closed once the service takes the other hosts' requests.
func (s *Service) Ready() <-chan struct{} { return s.ready }

// Run answers the other hosts' requests until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	// A request the subscription hands over while Run stops is dropped:
	// the answers are counted only while Run has not begun to wait for
	// them (the subscription's goroutine may still run after
	// Unsubscribe).
	var answers sync.WaitGroup
	var mu sync.Mutex
	stopping := false
	sub, err := s.nc.Subscribe(Subject(s.prefix, s.self), func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if !stopping {
			answers.Go(func() { s.serve(ctx, m) })
		}
	})
	if err != nil {
		return fmt.Errorf("pages: %w", err)
	}
	if err := s.nc.FlushTimeout(5 * time.Second); err != nil && ctx.Err() == nil {
		return fmt.Errorf("pages: %w", err)
	}
	close(s.ready)
	<-ctx.Done()
	_ = sub.Unsubscribe()
	mu.Lock()
	stopping = true
	mu.Unlock()
	answers.Wait()
	return nil
}

// serve answers another host's request for a page of its view.
func (s *Service) serve(ctx context.Context, m *nats.Msg) {
	if m.Reply == "" {
		// A hold let go of (Release): the only request sent without a
		// reply subject.
		var req request
		if msgpack.Unmarshal(m.Data, &req) == nil && req.Release != 0 {
			s.holds.Release(req.Release)
		}
		return
	}
	if !wire.ReplyAllowed(m.Reply) {
		return // hosts ask from their inboxes
	}
	answer := func(rep *reply) {
		data, err := msgpack.Marshal(rep)
		if err == nil {
			err = m.Respond(data)
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("pages: answer a host", "err", err)
		}
	}
	var req request
	if err := msgpack.Unmarshal(m.Data, &req); err != nil {
		answer(&reply{Error: engine.Errorf(engine.CodeInvalidInput, "a page request: %v", err)})
		return
	}
	t, ok := s.views.Table(req.Table)
	if !ok || t.Epoch() != req.Epoch {
		// Deleted (and perhaps created again) since the asker's view of
		// the catalog: the asker's table is gone. Not known yet: another
		// holder may be further on.
		if seq, _, _ := s.views.CatalogEntry(req.Table); seq > req.Epoch {
			answer(&reply{Error: engine.Errorf(engine.CodeTableNotFound, "table %s does not exist", engine.ShownTable(req.Table))})
			return
		}
		answer(&reply{NotHeld: true})
		return
	}
	slices.Sort(req.Shards)
	for _, sh := range req.Shards {
		if !t.HoldsShard(sh) {
			answer(&reply{NotHeld: true})
			return
		}
	}
	if req.Projection != "" {
		// A projection of the table: its entries derived from the shards.
		r, ok, err := s.views.Readable(ctx, req.Projection)
		switch {
		case err != nil:
			answer(&reply{Error: engine.AsError(err)})
			return
		case !ok || r.Placed() != t:
			answer(&reply{NotHeld: true}) // the view was replaced meanwhile
			return
		}
		t = r
	}
	q := Query{Filter: req.Filter, FromPK: req.FromPK, ToPK: req.ToPK, Point: req.Point, Partition: req.Partition, Limit: req.Limit,
		Descending: req.Descending, Position: req.Position, AsOf: req.AsOf, Hold: req.Hold}
	if req.From != nil {
		q.From = &query.Continuation{PartitionKey: req.From[0], RowKey: req.From[1]}
	}
	plan, err := q.plan()
	if err != nil {
		answer(&reply{Error: engine.AsError(err)})
		return
	}
	r, err := s.local(ctx, t, plan, q, req.Shards)
	if err != nil {
		answer(&reply{Error: engine.AsError(err)})
		return
	}
	data, err := encodeEntities(r.Entities)
	if err != nil {
		answer(&reply{Error: engine.AsError(err)})
		return
	}
	answer(&reply{Entities: data, Count: len(r.Entities), More: r.More, NextPK: r.NextPartitionKey, NextRK: r.NextRowKey, Examined: r.Examined, Seq: r.Seq})
}

// encodeEntities writes each entity (wire.EncodeEntity) and its version.
func encodeEntities(ents []*engine.Entity) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	for _, e := range ents {
		if err := wire.EncodeEntity(enc, e); err != nil {
			return nil, err
		}
		if err := errors.Join(enc.EncodeUint(e.Version.Seq), enc.EncodeUint(uint64(e.Version.Index))); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// decodeEntities reads what encodeEntities wrote.
func decodeEntities(data []byte, n int) ([]*engine.Entity, error) {
	if n < 0 || n > query.MaxPage {
		return nil, fmt.Errorf("%d entities in a page", n)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(data))
	out := make([]*engine.Entity, 0, n)
	for range n {
		e, err := wire.DecodeEntity(dec)
		if err != nil {
			return nil, err
		}
		seq, err := dec.DecodeUint64()
		if err != nil {
			return nil, err
		}
		ix, err := dec.DecodeUint32()
		if err != nil {
			return nil, err
		}
		e.Version = engine.Version{Seq: seq, Index: ix}
		out = append(out, e)
	}
	return out, nil
}
