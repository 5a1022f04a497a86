package natsapi

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/journal"
)

// Journal is what the change feed needs of the journal: a page of a
// table's records. Package journal implements it.
type Journal interface {
	Read(ctx context.Context, table string, epoch uint64, r journal.ReadRange) (*journal.Page, error)
}

// maxFeedsInFlight bounds the requests that may wait a node serves at
// once, each on a goroutine of its own: change feed requests (long-polls
// included), Queries and Retrieves with "asOf" or "position"; beyond it a
// request is answered ServerBusy.
const maxFeedsInFlight = 1024

// ChangesSubject returns the subject of a table's change feed; table is
// its full name: <prefix>.changes.<Table> for the development account's
// tables (also <prefix>.changes.devstoreaccount1.<Table>),
// <prefix>.changes.<account>.<Table> for another account's.
func ChangesSubject(prefix, table string) string { return prefix + ".changes." + table }

// handleChanges answers a change feed request on its own goroutine, so
// that a long-poll does not hold up the subscription.
func (s *Service) handleChanges(m *nats.Msg) {
	enc := wire.Detect(m.Data, m.Header.Get("Content-Type"))
	if err := s.startWaiting(); err != nil {
		respondChanges(m, enc, feedErr(err))
		return
	}
	go func() {
		defer s.doneWaiting()
		epoch, page, rep := s.changes(m.Subject, m.Data, enc)
		if rep != nil {
			if rep.Error.Code == engine.CodeInternalError {
				s.log.Error("change feed request failed", "subject", m.Subject, "err", rep.Error.Message)
			}
			respondChanges(m, enc, rep)
			return
		}
		if m.Reply != "" {
			_ = m.Respond(s.encodePage(epoch, page, enc))
		}
	}()
}

// startWaiting takes a place for a request that may wait, to be served on
// a goroutine of its own (Run waits for them); doneWaiting gives it back.
// It refuses with ServerBusy when maxFeedsInFlight are served or the node
// is shutting down.
func (s *Service) startWaiting() error {
	select {
	case s.feeds <- struct{}{}:
	default:
		return engine.Errorf(engine.CodeServerBusy, "this node serves %d requests that wait (change feeds, queries, reads of a position) already; retry", maxFeedsInFlight)
	}
	s.feedMu.Lock()
	off := s.feedsOff
	if !off {
		s.feedWG.Add(1)
	}
	s.feedMu.Unlock()
	if off {
		<-s.feeds
		return engine.Errorf(engine.CodeServerBusy, "the node is shutting down; ask again")
	}
	return nil
}

func (s *Service) doneWaiting() { <-s.feeds; s.feedWG.Done() }

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

// changes reads one page of a table's change feed: the table's epoch and
// the page, or the reply that refuses the request.
func (s *Service) changes(subject string, data []byte, enc wire.Encoding) (uint64, *journal.Page, *wire.ChangesReply) {
	_, full, err := subjectTable(subject, s.cfg.Prefix+".changes.")
	if err != nil {
		return 0, nil, feedErr(err)
	}
	table := engine.ShownTable(full)
	if err := engine.ValidateTableName(table); err != nil {
		return 0, nil, feedErr(err)
	}
	req, err := wire.DecodeChangesRequest(data, enc)
	if err != nil {
		return 0, nil, feedErr(err)
	}
	ctx, cancel := context.WithTimeout(s.feedCtx, s.cfg.TableTimeout+req.Wait)
	defer cancel()
	t, ok, err := s.views.Lookup(ctx, full)
	if err != nil {
		return 0, nil, feedErr(err)
	}
	if !ok {
		return 0, nil, feedErr(engine.Errorf(engine.CodeTableNotFound, "table %s does not exist", table))
	}
	shown := engine.ShownTable(t.Name())
	if err := t.Err(); err != nil && engine.ErrorCode(err) != engine.CodeInternalError {
		return 0, nil, feedErr(err) // TableFaulted, or TableNotFound once dropped
	}
	maxBytes := 1 << 20
	if mp := s.nc.MaxPayload(); mp > 0 {
		maxBytes = int(mp) / 4 // entity JSON is larger than its record
	}
	page, err := s.journal.Read(ctx, t.Name(), t.Epoch(), journal.ReadRange{
		From: req.From, Max: req.Max, MaxBytes: maxBytes, Partitions: req.Partitions, Wait: req.Wait})
	switch {
	case err == nil:
	case errors.Is(err, engine.ErrTableGone):
		return 0, nil, feedErr(engine.Errorf(engine.CodeTableNotFound, "table %s does not exist", shown))
	case errors.Is(err, journal.ErrCorrupt):
		return 0, nil, feedErr(engine.Errorf(engine.CodeTableFaulted, "the journal of table %s holds a record that cannot be read: %v", shown, err))
	case s.feedCtx.Err() != nil:
		return 0, nil, feedErr(engine.Errorf(engine.CodeServerBusy, "the node is shutting down; ask again"))
	default:
		return 0, nil, feedErr(err)
	}
	return t.Epoch(), page, nil
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
