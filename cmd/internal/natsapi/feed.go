package natsapi

import (
	"context"
	"errors"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/projections"
)

// The records' bytes a page reads: a quarter of the largest message the
// server takes (pageJSONGrowth: an entity's JSON, with its annotations and
// escapes, can be several times its record's msgpack; encodePage halves a
// page that still does not fit), or pageBytes when the server states no
// largest message.
const (
	pageJSONGrowth = 4
	pageBytes      = 1 << 20
)

// Journal is what the change feed needs of the journal: a page of a
// table's records. Package journal implements it.
type Journal interface {
	Read(ctx context.Context, table string, epoch uint64, shards uint32, r journal.ReadRange) (*journal.Page, error)
}

// ChangesSubject returns the subject of a table's change feed; table is
// its full name: <prefix>.changes.<Table> for the development account's
// tables (also <prefix>.changes.devstoreaccount1.<Table>),
// <prefix>.changes.<account>.<Table> for another account's.
func ChangesSubject(prefix, table string) string { return prefix + ".changes." + table }

// handleChanges answers a change feed request. One that must wait for
// the table's next change waits on this node's view of the table (no
// goroutine, no consumer: wait.go) when the views know the table; the
// others read their page from the journal on a goroutine of their own,
// so that nothing holds up the subscription.
func (s *Service) handleChanges(m *nats.Msg) {
	enc := wire.Detect(m.Data, m.Header.Get("Content-Type"))
	full, req, rep := s.changesRequest(m.Subject, m.Data, enc)
	if rep != nil {
		respondChanges(m, enc, rep)
		return
	}
	t, known := s.views.Table(full)
	if known {
		if rep := feedTableErr(t); rep != nil {
			respondChanges(m, enc, rep)
			return
		}
		if s.feedWaits(m, enc, t, req) {
			return
		}
	}
	if err := s.startWork(); err != nil {
		respondChanges(m, enc, feedErr(err))
		return
	}
	go func() {
		defer s.doneWork()
		ctx, cancel := context.WithTimeout(s.feedCtx, s.cfg.TableTimeout)
		defer cancel()
		if !known {
			// Catches up with the catalog first: a table created
			// through another node is then found.
			var ok bool
			var err error
			t, ok, err = s.views.Lookup(ctx, full)
			switch {
			case err != nil:
				s.respondFeedPage(m, enc, 0, nil, feedErr(err))
				return
			case !ok:
				respondChanges(m, enc, feedErr(engine.Errorf(engine.CodeTableNotFound, "table %s does not exist", engine.ShownTable(full))))
				return
			}
			if rep := feedTableErr(t); rep != nil {
				respondChanges(m, enc, rep)
				return
			}
			if s.feedWaits(m, enc, t, req) {
				return
			}
		}
		page, rep := s.readPage(ctx, t, req, max(req.From, 1))
		s.respondFeedPage(m, enc, t.Epoch(), page, rep)
	}()
}

// feedWaits makes a request with "wait" wait for t's view to move to its
// first position (a record of its partitions, when it names any),
// req.Wait at the most, if it has not (await). It reports whether the
// request waits or was answered (refused); false: read the page now.
func (s *Service) feedWaits(m *nats.Msg, enc wire.Encoding, t *projections.Table, req *wire.ChangesRequest) bool {
	if req.Wait <= 0 {
		return false
	}
	from := max(req.From, 1)
	key := feedKey{t: t, from: from, max: req.Max, parts: strings.Join(req.Partitions, "\x00")}
	waits, err := s.await(t, from, req.Partitions, req.Wait, &feedWait{s: s, m: m, enc: enc, key: key, req: req})
	if err != nil {
		respondChanges(m, enc, feedErr(err))
		return true
	}
	return waits
}

// feedKey names the waiting feed requests one read answers alike: of one
// table incarnation, from one position, of one size, of the same
// partitions (in the same order).
type feedKey struct {
	t     *projections.Table
	from  uint64
	max   int
	parts string
}

// feedWait is a change feed request waiting for its table's next change.
type feedWait struct {
	s   *Service
	m   *nats.Msg
	enc wire.Encoding
	key feedKey
	req *wire.ChangesRequest
}

func (f *feedWait) group() any { return f.key }

// serve reads the page of f and of the requests like it once, and
// answers each in its encoding.
func (f *feedWait) serve(ctx context.Context, others []waitJob) {
	ctx, cancel := context.WithTimeout(ctx, f.s.cfg.TableTimeout)
	defer cancel()
	t := f.key.t
	page, rep := f.s.readPage(ctx, t, f.req, f.key.from)
	if rep != nil {
		f.s.logFailure(f.m, rep)
	}
	encoded := map[wire.Encoding][]byte{}
	for _, j := range append([]waitJob{f}, others...) {
		o := j.(*feedWait)
		if rep != nil {
			respondChanges(o.m, o.enc, rep)
			continue
		}
		b, ok := encoded[o.enc]
		if !ok {
			p := *page // encodePage may shorten it
			b = f.s.encodePage(t.Epoch(), &p, o.enc)
			encoded[o.enc] = b
		}
		if o.m.Reply != "" {
			_ = o.m.Respond(b)
		}
	}
}

// expire answers a request whose wait ended without a change: nothing,
// next where the view says to ask from (past the records of other
// partitions it applied), head the view's position.
func (f *feedWait) expire(bool) {
	t, from := f.key.t, f.key.from
	snap := t.Snapshot()
	next := max(from, snap.Seq+1)
	for _, pk := range f.req.Partitions {
		if snap.Partition(pk).LastSeq >= from || !t.Holds(pk) && snap.Seq >= from {
			// A record of its partitions came as it ended, or may have
			// (this view does not hold that one): ask again.
			next = from
		}
	}
	if len(f.req.Partitions) == 0 && snap.Seq >= from {
		next = from
	}
	f.s.respondFeedPage(f.m, f.enc, t.Epoch(), &journal.Page{Next: next, Head: snap.Seq}, nil)
}

// respondFeedPage answers a feed page read, or the reply that refuses it.
func (s *Service) respondFeedPage(m *nats.Msg, enc wire.Encoding, epoch uint64, page *journal.Page, rep *wire.ChangesReply) {
	if rep != nil {
		s.logFailure(m, rep)
		respondChanges(m, enc, rep)
		return
	}
	if m.Reply != "" {
		_ = m.Respond(s.encodePage(epoch, page, enc))
	}
}

// logFailure logs a refusal that has no code of its own (InternalError).
func (s *Service) logFailure(m *nats.Msg, rep *wire.ChangesReply) {
	if rep.Error.Code == engine.CodeInternalError {
		s.log.Error("change feed request failed", "subject", m.Subject, "err", rep.Error.Message)
	}
}

func respondChanges(m *nats.Msg, enc wire.Encoding, r *wire.ChangesReply) {
	if m.Reply == "" {
		return
	}
	if r.Error != nil {
		enc = errorEncoding(m)
		r = &wire.ChangesReply{Error: notARequest(m, enc, r.Error)}
	}
	_ = m.Respond(wire.EncodeChangesReply(r, enc))
}

// encodePage encodes a page, with fewer records if it does not fit into
// one message (Read bounds the records' bytes, but an entity's JSON can be
// several times its record's size): next then names the first record
// left out. A single record too large for a message is refused.
func (s *Service) encodePage(epoch uint64, page *journal.Page, enc wire.Encoding) []byte {
	limit := int(s.nc.MaxPayload())
	for {
		b := wire.EncodeChangesReply(ChangesOf(epoch, page), enc)
		n := len(page.Records)
		if limit <= 0 || len(b) <= limit {
			return b
		}
		if n <= 1 {
			seq := uint64(0)
			if n == 1 {
				seq = page.Records[0].Seq
			}
			return wire.EncodeChangesReply(feedErr(engine.Errorf(engine.CodeInternalError,
				"the changes of record %d take %d bytes, more than a NATS message may hold (%d); ask in msgpack", seq, len(b), limit)), enc)
		}
		page.Records = page.Records[:n/2]
		page.Next = page.Records[len(page.Records)-1].Seq + 1
	}
}

func feedErr(err error) *wire.ChangesReply { return &wire.ChangesReply{Error: engine.AsError(err)} }

// changesRequest reads a change feed request: the table's full name and
// the request, or the reply that refuses it.
func (s *Service) changesRequest(subject string, data []byte, enc wire.Encoding) (string, *wire.ChangesRequest, *wire.ChangesReply) {
	_, full, err := subjectTable(subject, s.cfg.Prefix+".changes.")
	if err != nil {
		return "", nil, feedErr(err)
	}
	if err := engine.ValidateTableName(engine.ShownTable(full)); err != nil {
		return "", nil, feedErr(err)
	}
	req, err := wire.DecodeChangesRequest(data, enc)
	if err != nil {
		return "", nil, feedErr(err)
	}
	return full, req, nil
}

// feedTableErr is the reply that refuses the feed of a view that stopped
// with a coded error (TableFaulted, or TableNotFound once dropped); nil
// otherwise.
func feedTableErr(t *projections.Table) *wire.ChangesReply {
	if err := t.Err(); err != nil && engine.ErrorCode(err) != engine.CodeInternalError {
		return feedErr(err)
	}
	return nil
}

// readPage reads one page of t's change feed from position from, without
// waiting: the page, or the reply that refuses it.
func (s *Service) readPage(ctx context.Context, t *projections.Table, req *wire.ChangesRequest, from uint64) (*journal.Page, *wire.ChangesReply) {
	if rep := feedTableErr(t); rep != nil {
		return nil, rep // stopped while the request waited
	}
	shown := engine.ShownTable(t.Name())
	maxBytes := pageBytes
	if mp := s.nc.MaxPayload(); mp > 0 {
		maxBytes = int(mp) / pageJSONGrowth
	}
	page, err := s.journal.Read(ctx, t.Name(), t.Epoch(), t.Shards(), journal.ReadRange{
		From: from, Max: req.Max, MaxBytes: maxBytes, Partitions: req.Partitions})
	switch {
	case err == nil:
		return page, nil
	case errors.Is(err, engine.ErrTableGone):
		return nil, feedErr(engine.Errorf(engine.CodeTableNotFound, "table %s does not exist", shown))
	case errors.Is(err, journal.ErrCorrupt):
		return nil, feedErr(engine.Errorf(engine.CodeTableFaulted, "the journal of table %s holds a record that cannot be read: %v", shown, err))
	case s.feedCtx.Err() != nil:
		return nil, feedErr(s.refuse(refusedStopping, errStopping))
	case errors.Is(err, journal.ErrReadsBusy):
		return nil, feedErr(s.refuse(refusedJournal, engine.Errorf(engine.CodeServerBusy,
			"the journal of table %s is being read by as many requests as this node allows at once, for longer than this request may wait; retry", shown)))
	default:
		return nil, feedErr(err)
	}
}

// ChangesOf turns a page of records into a page of changes: one per
// event, with the ETags of the entity after and before it.
func ChangesOf(epoch uint64, page *journal.Page) *wire.ChangesReply {
	r := &wire.ChangesReply{Next: page.Next, Head: page.Head}
	for _, st := range page.Records {
		rec := st.Record
		for i := range rec.Events {
			ev := &rec.Events[i]
			v := engine.Version{Seq: st.Seq, Index: uint32(i)}
			c := wire.Change{Seq: st.Seq, Index: uint32(i), PartitionKey: rec.PartitionKey, RowKey: ev.RowKey,
				Deleted: ev.Kind == engine.EventDelete, Timestamp: rec.Time}
			if !c.Deleted {
				c.ETag = engine.ETag(epoch, v)
				c.Entity = &engine.Entity{PartitionKey: rec.PartitionKey, RowKey: ev.RowKey, Timestamp: rec.Time, Version: v, Properties: ev.Properties}
			}
			prev, exists, known := rec.PrevVersion(st.Seq, i)
			c.PrevUnknown = !known
			if exists {
				c.PrevETag = engine.ETag(epoch, prev)
			}
			r.Changes = append(r.Changes, c)
		}
	}
	return r
}
