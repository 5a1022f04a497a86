package natsapi

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/pages"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/projections"
	"github.com/cairn-dev/cairn/projections/query"
)

// CodeInvalidContinuation refuses a Query's continuation that this
// protocol did not issue, or that belongs to another query (the HTTP API
// answers the same code).
const CodeInvalidContinuation engine.Code = "InvalidContinuationToken"

// handleQuery answers a Query on a goroutine of its own, as a Retrieve of
// the past: a page may walk for up to PageBudget or replay the journal,
// and must not hold up the subscription. A Query of a position the view
// has not reached first waits on the view, as a Retrieve's does (wait.go).
func (s *Service) handleQuery(m *nats.Msg, enc wire.Encoding, table string) {
	req, err := wire.DecodeQueryRequest(m.Data, enc)
	if err != nil {
		respondPage(m, enc, pageErr(err))
		return
	}
	answer := func(ctx context.Context) { respondPage(m, enc, s.query(ctx, table, req)) }
	fail := func(err error) { respondPage(m, enc, pageErr(err)) }
	// Only a valid query of the present waits (query refuses a position
	// with a continuation of the past, and a bad filter, at once); waits
	// stays true while the view to wait on is still to be looked up.
	waits := req.Position != 0 && req.AsOf == 0 && validQuery(req)
	if t, ok := s.views.Table(table); ok && waits {
		waits = false // looked up: no need to again
		if t.Err() == nil && s.waitPosition(t, req.Position, answer, fail) {
			return
		}
	}
	s.work(table, waits, req.Position, answer, fail)
}

// work answers a request that does work (a page, a read of the past) on a
// goroutine of its own, once it has a place among the requests that do
// (startWork; fail tells why not). With lookup, the table's view is
// looked up first (a projection, or a table this node finds only now)
// and the request waits on it for position as the waiting requests do.
// It ends when the subscriptions are drained, as the waits do.
func (s *Service) work(table string, lookup bool, position uint64, answer func(context.Context), fail func(error)) {
	if err := s.startWork(); err != nil {
		fail(err)
		return
	}
	go func() {
		defer s.doneWork()
		if lookup {
			ctx, cancel := context.WithTimeout(s.feedCtx, s.cfg.TableTimeout)
			t, err := s.views.Read(ctx, table)
			cancel()
			if err == nil && s.waitPosition(t, position, answer, fail) {
				return
			}
		}
		answer(s.feedCtx)
	}()
}

// validQuery reports whether query would get past its checks of req
// (continuation, $select, $filter) to the view, so that a request it
// refuses is refused before any wait.
func validQuery(req *wire.QueryRequest) bool {
	if req.Continuation != "" {
		if tok, err := parseToken(req.Continuation); err != nil || tok.asOf != 0 {
			return false
		}
	}
	if _, err := query.SelectNames(req.Select); err != nil {
		return false
	}
	if req.Filter != "" {
		if _, err := query.Parse(req.Filter); err != nil {
			return false
		}
	}
	return true
}

// respondPage sends a page, or the error that refused it: in JSON when the
// request was not msgpack a client sent (wire.ErrorEncoding), so that a
// person at a terminal can read it.
func respondPage(m *nats.Msg, enc wire.Encoding, p *pageReply) {
	if m.Reply == "" {
		return
	}
	_ = m.Respond(p.fit(enc, m))
}

// query reads one page of a table within ctx: the request's checks, the
// table (a declared projection too), the snapshot (held by the
// continuation's query, as of a position, or once the view reached one),
// then the plan.
func (s *Service) query(ctx context.Context, table string, req *wire.QueryRequest) *pageReply {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.TableTimeout)
	defer cancel()
	var filter query.Expr
	if req.Filter != "" {
		var err error
		if filter, err = query.Parse(req.Filter); err != nil {
			return pageErr(engine.Errorf(engine.CodeInvalidInput, "%v", err))
		}
	}
	sel, err := query.SelectNames(req.Select)
	if err != nil {
		return pageErr(engine.Errorf(engine.CodeInvalidInput, "%v", err))
	}
	var tok *token
	if req.Continuation != "" {
		t, err := parseToken(req.Continuation)
		if err != nil {
			return pageErr(err)
		}
		switch {
		case t.desc != req.Descending:
			return pageErr(badToken("belongs to a query in the other order"))
		case req.AsOf != 0 && t.asOf == 0:
			return pageErr(badToken("belongs to a query of the present, not as of position %d", req.AsOf))
		case req.AsOf != 0 && t.asOf != req.AsOf:
			return pageErr(badToken("belongs to a query as of position %d, not %d", t.asOf, req.AsOf))
		case t.asOf != 0 && req.Position != 0:
			return pageErr(engine.Errorf(engine.CodeInvalidInput, "the continuation belongs to a query as of position %d, which \"position\" contradicts", t.asOf))
		}
		tok = &t
	}
	asOf := req.AsOf
	if tok != nil && tok.asOf != 0 {
		asOf = tok.asOf
	}
	t, err := s.views.Read(ctx, table)
	if err != nil {
		return pageErr(err)
	}
	if t.Gathered() && s.cfg.Pages != nil {
		if asOf != 0 && req.Position != 0 {
			_, err := s.snapshot(ctx, t, asOf, req.Position) // the same refusal
			return pageErr(err)
		}
		q := pages.Query{Filter: req.Filter, Limit: req.Top, Descending: req.Descending, Position: req.Position, AsOf: asOf, Keep: true}
		if tok != nil {
			q.From, q.Hold = &tok.from, tok.hold
		}
		res, err := s.cfg.Pages.Read(ctx, t, q)
		if err != nil {
			return pageErr(err)
		}
		r := &pageReply{s: s, t: t, seq: res.Seq, gathered: &res, asOf: asOf, desc: req.Descending, sel: sel, entities: res.Entities}
		if res.More {
			r.next = &query.Continuation{PartitionKey: res.NextPartitionKey, RowKey: res.NextRowKey}
		}
		return r
	}
	var snap *projections.Snapshot
	var hold uint64
	if tok != nil {
		if h, ok := s.held.Get(tok.hold, t.Name(), t.Epoch()); ok && (asOf == 0 || h.Seq == asOf) && h.Seq >= req.Position {
			snap, hold = h, tok.hold
		}
	}
	if snap == nil {
		if snap, err = s.snapshot(ctx, t, asOf, req.Position); err != nil {
			return pageErr(err)
		}
	}
	o := query.Options{Limit: req.Top, Deadline: time.Now().Add(s.cfg.PageBudget), Descending: req.Descending}
	if tok != nil {
		o.From = &tok.from
	}
	pg := query.NewPlan(filter).Run(snap, o)
	r := &pageReply{s: s, t: t, snap: snap, seq: snap.Seq, hold: hold, asOf: asOf, desc: req.Descending, sel: sel, entities: pg.Entities}
	if pg.More {
		r.next = &query.Continuation{PartitionKey: pg.NextPartitionKey, RowKey: pg.NextRowKey}
	}
	return r
}

// noteReads counts the entities a page returns per partition (the hot
// partitions of /metrics), one call per run of a partition.
func noteReads(t *projections.Table, es []*engine.Entity) {
	lastPK, run := "", 0
	for _, e := range es {
		if e.PartitionKey != lastPK && run > 0 {
			t.NoteRead(lastPK, run)
			run = 0
		}
		lastPK = e.PartitionKey
		run++
	}
	if run > 0 {
		t.NoteRead(lastPK, run)
	}
}

// pageReply is a page read, or the error that refused it. Its
// continuation is made when it is sent (fit), once it is known how many
// of the entities fit into one message.
type pageReply struct {
	err      *engine.Error
	s        *Service
	t        *projections.Table
	snap     *projections.Snapshot // nil: a page gathered from the hosts (pages), held there
	seq      uint64                // the position read
	hold     uint64
	gathered *pages.Result // a page gathered from the hosts
	asOf     uint64
	desc     bool
	sel      query.Selection
	entities []*engine.Entity
	next     *query.Continuation // the first entity not read; nil when none is left
}

func pageErr(err error) *pageReply { return &pageReply{err: engine.AsError(err)} }

// reply encodes the first n entities, with the continuation of entity n
// (or of the page's end), holding the snapshot while a page follows.
func (p *pageReply) reply(n int) *wire.QueryReply {
	r := &wire.QueryReply{Seq: p.seq, Entities: make([]wire.QueryEntity, n)}
	for i, e := range p.entities[:n] {
		r.Entities[i] = wire.QueryEntity{Entity: p.sel.Project(e), ETag: engine.ETag(p.t.Epoch(), e.Version)}
	}
	next := p.next
	if n < len(p.entities) {
		next = &query.Continuation{PartitionKey: p.entities[n].PartitionKey, RowKey: p.entities[n].RowKey}
	}
	if next != nil {
		if p.snap != nil {
			p.hold = p.s.held.Put(p.hold, p.snap)
		} else if p.gathered != nil {
			p.hold = p.gathered.Hold
		}
		r.Continuation = token{hold: p.hold, desc: p.desc, asOf: p.asOf, from: *next}.format()
	} else if p.hold != 0 {
		p.s.held.Release(p.hold)
	}
	return r
}

// fit encodes the page, halving the entities until it fits into one
// message (the server's max payload: 8 MiB embedded, 1 MiB by default on
// an external server); a single entity too large for a message is
// refused. A page that fits costs one encoding; one that does not, one
// more per halving.
func (p *pageReply) fit(enc wire.Encoding, m *nats.Msg) []byte {
	if p.err != nil {
		enc = errorEncoding(m)
		return wire.EncodeQueryReply(&wire.QueryReply{Error: notARequest(m, enc, p.err)}, enc)
	}
	limit := int(p.s.nc.MaxPayload())
	n := len(p.entities)
	for {
		b := wire.EncodeQueryReply(p.reply(n), enc)
		if limit <= 0 || len(b) <= limit {
			// Counted once the page is known: the entities past n are
			// read again (and counted then) by the next page.
			noteReads(p.t, p.entities[:n])
			if p.gathered != nil && n == len(p.entities) && p.next == nil {
				p.s.cfg.Pages.Release(*p.gathered) // the last page: the hosts' holds go
			}
			return b
		}
		if n <= 1 {
			return wire.EncodeQueryReply(&wire.QueryReply{Error: engine.Errorf(engine.CodeInternalError,
				"the page's first entity takes %d bytes, more than a NATS message may hold (%d); ask in msgpack, or select fewer properties", len(b), limit)}, enc)
		}
		n /= 2
	}
}

// token is a Query's continuation, opaque to clients:
//
//	"q1!" + a|d + "!" + hold id + "!" + as-of position + "!" + base64url(PartitionKey) + "!" + base64url(RowKey)
//
// (hold id and position in base 36, position 0 for a query of the
// present). The keys are those of the first entity not yet returned; the
// hold names the snapshot the earlier pages were read from on the node
// that answered them. Another node (the queue group may pick any) does
// not hold it and resumes at the keys on its own snapshot, as the HTTP
// API does once a hold is released: no duplicates or gaps in key order,
// but writes made after the first page may show. For a page gathered
// from placed hosts, the hold is the query's id on all of them
// (pages.Query.Hold), and any node asking them for the next page reads
// the snapshots they held.
type token struct {
	hold uint64
	desc bool
	asOf uint64
	from query.Continuation
}

const tokenPrefix = "q1!"

var b64 = base64.RawURLEncoding

func (t token) format() string {
	dir := "a"
	if t.desc {
		dir = "d"
	}
	return tokenPrefix + dir + "!" + strconv.FormatUint(t.hold, 36) + "!" + strconv.FormatUint(t.asOf, 36) + "!" +
		b64.EncodeToString([]byte(t.from.PartitionKey)) + "!" + b64.EncodeToString([]byte(t.from.RowKey))
}

func badToken(format string, args ...any) error {
	return engine.Errorf(CodeInvalidContinuation, "the continuation "+format+": send back the \"continuation\" of the previous page unchanged", args...)
}

// parseToken reads a continuation a client sent back.
func parseToken(s string) (token, error) {
	var t token
	rest, ok := strings.CutPrefix(s, tokenPrefix)
	parts := strings.Split(rest, "!")
	if !ok || len(parts) != 5 || (parts[0] != "a" && parts[0] != "d") {
		return t, badToken("is not one this protocol issued")
	}
	t.desc = parts[0] == "d"
	var err1, err2, err3, err4 error
	t.hold, err1 = strconv.ParseUint(parts[1], 36, 64)
	t.asOf, err2 = strconv.ParseUint(parts[2], 36, 64)
	pk, err3 := b64.DecodeString(parts[3])
	rk, err4 := b64.DecodeString(parts[4])
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		return t, badToken("is damaged")
	}
	t.from = query.Continuation{PartitionKey: string(pk), RowKey: string(rk)}
	return t, nil
}
