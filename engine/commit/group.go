package commit

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nuid"

	"github.com/cairn-dev/cairn/engine"
)

// outcome is what became of one command of a group.
type outcome struct {
	p      *pending
	ref    int // index into the record's Commands, or -1
	sameAs int // index into the record's Commands of an earlier command with the same id, or -1
	err    *engine.Error
	dup    *Committed // committed earlier, found in the view
}

// commitGroup decides, appends and answers one group of commands of one
// partition. Commands that do not fit into one record are carried into the
// next round. An append refused because another writer appended to the
// partition first is followed by catching the view up with the journal and
// deciding again: commands that did land earlier are then found by their
// id and answered from it, so nothing is applied twice. An append of
// unknown outcome is settled before anything is decided again
// (appendRecord).
func (c *Committer) commitGroup(key partKey, group []*pending) {
	ctx := c.ctx
	attempt := 0
	for len(group) > 0 {
		if ctx.Err() != nil {
			failAll(group, engine.Errorf(engine.CodeServerBusy, "the host shut down before the command was committed"))
			return
		}
		tbl, ok, err := c.lookup(key.table)
		if err != nil {
			failAll(group, err)
			return
		}
		if !ok {
			failAll(group, engine.Errorf(engine.CodeTableNotFound, "table %s does not exist", engine.ShownTable(group[0].cmd.Table)))
			return
		}
		if err := tbl.Err(); err != nil {
			failAll(group, stopped(tbl, err))
			return
		}
		if !tbl.Holds(key.pk) {
			// Its view is not here: deciding on an empty one would
			// refuse writes the journal's check would catch only after
			// a round trip, and answer reads wrongly.
			failAll(group, engine.Errorf(engine.CodeServerBusy, "this host does not hold the shard of partition %q of table %s; another host does: retry", key.pk, engine.ShownTable(tbl.Name())))
			return
		}
		group = c.dropExpired(group)
		if len(group) == 0 {
			return
		}
		part := tbl.Partition(key.pk)
		expect := part.LastSeq()
		rec, outs, rest := c.decide(tbl.Epoch(), part, key.pk, group)
		if len(rec.Commands) == 0 {
			answer(tbl.Epoch(), 0, rec, outs)
			group = rest
			continue
		}
		deadline := latestDeadline(group[:len(outs)])
		err = c.markMessages(tbl, rec, deadline)
		var seq uint64
		if err == nil {
			tbl.NoteAppending(rec)
			if seq, err = c.appendRecord(tbl, rec, expect, deadline); err != nil {
				tbl.ForgetAppending(rec)
			}
		}
		if err != nil {
			switch {
			case errors.Is(err, engine.ErrTableGone):
				failAll(group, engine.Errorf(engine.CodeTableNotFound, "table %s does not exist", engine.ShownTable(tbl.Name())))
				return
			case errors.Is(err, errOutcomeUnknown):
				c.log.Error("append of unknown outcome", "table", tbl.Name(), "err", err)
				answerUnknown(tbl.Epoch(), outs, err)
				group, attempt = rest, 0
				continue
			}
			// Not stored, and it never will be.
			attempt++
			if attempt >= c.cfg.MaxAttempts {
				c.log.Error("append failed", "table", tbl.Name(), "attempts", attempt, "err", err)
				failAll(group, engine.Errorf(engine.CodeServerBusy, "could not commit to %s after %d attempts: %v", tbl.Name(), attempt, err))
				return
			}
			c.catchUp(tbl, key.pk)
			backoff(ctx, attempt)
			continue // decide the whole group again on the newer view
		}
		c.stats.records.Add(1)
		c.stats.commands.Add(uint64(len(rec.Commands)))
		tbl.Appended(seq, rec)
		werr := c.waitVisible(tbl, seq)
		tbl.ForgetAppending(rec)
		if werr != nil {
			c.log.Error("committed record not visible", "table", tbl.Name(), "seq", seq, "err", werr)
			failAll(group[:len(outs)], engine.Errorf(engine.CodeInternalError,
				"committed at journal position %d, but this host's view did not reach it: %v", seq, werr))
		} else {
			answer(tbl.Epoch(), seq, rec, outs)
		}
		group, attempt = rest, 0
	}
}

// markMessages marks a table that marks its messages
// (engine.TableInfo.MarksMessages) before its record's outbox messages are
// appended (Config.MarkMessages), by the round's deadline.
func (c *Committer) markMessages(tbl Table, rec *engine.Record, deadline time.Time) error {
	if len(rec.Messages) == 0 || c.cfg.MarkMessages == nil {
		return nil
	}
	if _, info, live := c.views.CatalogEntry(tbl.Name()); live && info.Epoch == tbl.Epoch() && !info.MarksMessages {
		return nil // relayed whole, mark or not
	}
	ctx, cancel := context.WithDeadline(c.ctx, deadline)
	defer cancel()
	return c.cfg.MarkMessages(ctx, tbl.Name(), tbl.Epoch())
}

// stopped is the answer for a table whose view stopped with err: its code
// when it has one (TableFaulted: the journal holds what the view cannot
// apply; TableNotFound: dropped), InternalError otherwise.
func stopped(tbl Table, err error) *engine.Error {
	if engine.ErrorCode(err) != engine.CodeInternalError {
		return engine.AsError(err)
	}
	return engine.Errorf(engine.CodeInternalError, "the view of table %s has stopped: %v", engine.ShownTable(tbl.Name()), err)
}

// latestDeadline is the last deadline of the commands of a round: they
// share their record's fate, so its outcome is sought that long.
func latestDeadline(group []*pending) time.Time {
	var d time.Time
	for _, p := range group {
		if p.deadline.After(d) {
			d = p.deadline
		}
	}
	return d
}

// waitVisible waits until the view shows seq. A record stored that the
// view does not show within probeAfter is asked of a replica (Probe): the
// view's consumer may have been lost with its server without a word, which
// its heartbeats would tell only after two of them.
func (c *Committer) waitVisible(tbl Table, seq uint64) error {
	if tbl.VisibleSeq() >= seq {
		return nil // no timer when the view is there already (the usual case)
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.Timeout)
	defer cancel()
	probe := time.AfterFunc(probeAfter, func() { c.j.Probe(tbl.Name(), tbl.Epoch(), seq) })
	defer probe.Stop()
	return tbl.WaitSeq(ctx, seq)
}

// probeAfter is how long a committed record may stay unseen by the view
// before the view's reader is asked to read it from a replica.
const probeAfter = 250 * time.Millisecond

// lookup finds a table's view, catching up with the catalog when this host
// does not know the table yet.
func (c *Committer) lookup(table string) (Table, bool, error) {
	if t, ok := c.views.Table(table); ok {
		return t, true, nil // no timer for a table this host knows
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.Timeout)
	defer cancel()
	return c.views.Lookup(ctx, table)
}

// decide builds the record of one round: every command of the group that
// fits, decided in order against the partition plus the effects of those
// before it.
func (c *Committer) decide(epoch uint64, part Partition, pk string, group []*pending) (*engine.Record, []outcome, []*pending) {
	now := c.cfg.Now()
	ts := engine.TimeToTicks(now)
	claims := engine.Claims{Now: now, Window: c.cfg.ClaimWindow}
	rec := &engine.Record{Time: ts, PartitionKey: pk, Nonce: nuid.Next(), HasPrev: true}
	ov := engine.NewOverlay(part)
	var written map[string]int // row key → its last event in rec
	outs := make([]outcome, 0, len(group))
	var seen map[string]int // ids decided in this round; only groups of several need it
	if len(group) > 1 {
		seen = make(map[string]int, len(group))
	}
	size := 0
	for i, p := range group {
		o := outcome{p: p, ref: -1, sameAs: -1}
		id := p.cmd.ID
		if !p.hostID {
			if cr, ok := part.Command(id); ok {
				o.dup = &cr
				outs = append(outs, o)
				continue
			}
		}
		if k, ok := seen[id]; ok {
			o.sameAs = k
			outs = append(outs, o)
			continue
		}
		n := p.cmd.Size()
		if size > 0 && size+n > c.cfg.MaxRecordBytes {
			return rec, outs, group[i:]
		}
		events, err := engine.Decide(ov, epoch, p.cmd, claims)
		if err != nil {
			o.err = engine.AsError(err)
			outs = append(outs, o)
			continue
		}
		ov.Apply(events, ts)
		written = setPrev(rec, part, events, written)
		o.ref = len(rec.Commands)
		ref := engine.CommandRef{First: uint32(len(rec.Events)), Count: uint32(len(events))}
		if !p.hostID {
			ref.ID = id
		}
		rec.Commands = append(rec.Commands, ref)
		rec.Events = append(rec.Events, events...)
		rec.Messages = append(rec.Messages, p.cmd.Messages...)
		if seen != nil {
			seen[id] = o.ref
		}
		size += n
		outs = append(outs, o)
	}
	return rec, outs, nil
}

// setPrev sets the previous version of each of events, which are about
// to be appended to rec: the event of rec that last wrote the row (a
// reference into the record itself, Seq 0), or else the entity as part
// holds it (committed, so with its journal position), or nil when the row
// does not exist. written maps row keys to their last event in rec; it is
// returned updated.
func setPrev(rec *engine.Record, part Partition, events []engine.Event, written map[string]int) map[string]int {
	if written == nil {
		written = make(map[string]int, len(events))
	}
	vs := make([]engine.Version, len(events)) // one allocation for the round's command
	for k := range events {
		ev := &events[k]
		if j, ok := written[ev.RowKey]; ok {
			// j is an event of an earlier command, or of this one (which
			// only a batch has, and a batch writes a row once).
			before := events[max(j-len(rec.Events), 0)].Kind
			if j < len(rec.Events) {
				before = rec.Events[j].Kind
			}
			if before == engine.EventPut {
				vs[k] = engine.Version{Index: uint32(j)}
				ev.Prev = &vs[k]
			}
		} else if e, ok := part.Entity(ev.RowKey); ok {
			vs[k] = e.Version
			ev.Prev = &vs[k]
		}
		written[ev.RowKey] = len(rec.Events) + k
	}
	return written
}

// dropExpired answers the commands whose time is up before they were tried.
func (c *Committer) dropExpired(group []*pending) []*pending {
	now := c.cfg.Now()
	keep := group[:0:0]
	for _, p := range group {
		if now.After(p.deadline) {
			reply(p, &engine.Reply{Error: engine.Errorf(engine.CodeOperationTimedOut, "the command was not committed within %v", c.cfg.Timeout)})
			continue
		}
		keep = append(keep, p)
	}
	return keep
}

func backoff(ctx context.Context, attempt int) {
	d := time.Duration(1<<min(attempt, 8)) * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// answer replies to every command of a round once its record is visible
// (seq is its journal position; 0 when the round appended nothing).
func answer(epoch, seq uint64, rec *engine.Record, outs []outcome) {
	for _, o := range outs {
		switch {
		case o.err != nil:
			reply(o.p, &engine.Reply{Error: o.err})
		case o.dup != nil:
			r := results(epoch, o.dup.Seq, o.dup.First, o.dup.Count, o.dup.Time, o.p.cmd)
			r.Duplicate = true
			reply(o.p, r)
		case o.sameAs >= 0:
			ref := rec.Commands[o.sameAs]
			r := results(epoch, seq, ref.First, ref.Count, rec.Time, o.p.cmd)
			r.Duplicate = true
			reply(o.p, r)
		default:
			ref := rec.Commands[o.ref]
			reply(o.p, results(epoch, seq, ref.First, ref.Count, rec.Time, o.p.cmd))
		}
	}
}

// answerUnknown answers the commands of a round whose record's outcome is
// unknown: those in the record may have been applied, and their answer
// says so; those refused by the decider or committed earlier are answered
// as decided.
func answerUnknown(epoch uint64, outs []outcome, err error) {
	for _, o := range outs {
		switch {
		case o.err != nil:
			reply(o.p, &engine.Reply{Error: o.err})
		case o.dup != nil:
			answer(epoch, 0, nil, []outcome{o})
		default:
			reply(o.p, &engine.Reply{Error: engine.Errorf(engine.CodeOperationTimedOut,
				"the command may or may not have been applied: %v; retry it with a command id to be answered from its record if it was", err)})
		}
	}
}

// results builds the reply of a committed command from its place in the
// journal: the ETag of each write is derived from (seq, index).
func results(epoch, seq uint64, first, count uint32, ts int64, cmd *engine.Command) *engine.Reply {
	r := &engine.Reply{Seq: seq, Timestamp: ts}
	rs := make([]engine.Result, count)
	for k := range rs {
		rs[k].Timestamp = ts
		if k < len(cmd.Ops) && cmd.Ops[k].Op == engine.OpDelete {
			continue
		}
		rs[k].ETag = engine.ETag(epoch, engine.Version{Seq: seq, Index: first + uint32(k)})
	}
	if cmd.Batch {
		r.Results = rs
	} else if len(rs) > 0 {
		r.ETag = rs[0].ETag
	}
	return r
}

// IsHostID reports whether a command id was made up by the host.
func IsHostID(id string) bool { return strings.HasPrefix(id, hostIDPrefix) }
