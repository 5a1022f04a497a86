package commit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// An append is sent with the partition's expected last sequence E. When its
// acknowledgement is lost (a timeout, a broken connection), the record may
// be stored, may still be on its way, or may be lost. JetStream stores a
// message with expected last subject sequence E only while E is the last
// sequence of the subject, and the journal never removes a record from a
// partition, so once any record follows E, no append made with E can be
// stored any more. The first record of the partition after E therefore
// settles the append for good:
//
//   - it is ours (same nonce): committed, answer from it;
//   - it is another writer's: ours is not stored and never will be, decide
//     again;
//   - there is none yet: still unknown. Send the identical append again
//     (same record, same nonce, same E): of the two copies at most one is
//     stored, since each carries E, and whichever it is, it is ours. Then
//     look again.
//
// A conflict after an unknown outcome proves nothing (the record in the
// way may be our own first copy), so it is settled the same way. Only
// when the commands' deadline passes, or the host abandons them, does the
// outcome stay unknown, and the commands are answered saying so.

// fate is what an append's result says about its record.
type fate uint8

const (
	fateStored  fate = iota // stored (Append returned its sequence)
	fateRefused             // not stored and never will be: decide again
	fateGone                // the table's journal is gone
	fateUnknown             // not known: look at the first record after E
)

// fateOf interprets the error of one try of an append; settling is true
// when an earlier try of the same record had an unknown outcome, which a
// refusal now does not settle.
func fateOf(err error, settling bool) fate {
	switch {
	case err == nil:
		return fateStored
	case errors.Is(err, engine.ErrTableGone):
		return fateGone
	case errors.Is(err, engine.ErrConflict), errors.Is(err, engine.ErrNotSent):
		if settling {
			return fateUnknown
		}
		return fateRefused
	default:
		return fateUnknown
	}
}

// settle decides an unknown append from the partition's first record after
// the append's expected sequence (next 0: there is none yet) and its nonce.
func settle(next uint64, nonce, ours string) fate {
	switch {
	case next == 0:
		return fateUnknown
	case nonce == ours:
		return fateStored
	default:
		return fateRefused
	}
}

// errOutcomeUnknown marks an append whose outcome is still unknown.
var errOutcomeUnknown = errors.New("outcome unknown")

// appendRecord appends rec to its partition with the expected last sequence
// expect and returns its sequence, settling unknown outcomes as described
// above until deadline. Its error wraps engine.ErrConflict or
// engine.ErrNotSent when rec is not stored and never will be,
// engine.ErrTableGone when the table's journal is gone, and
// errOutcomeUnknown when the outcome is still unknown at deadline or when
// the committer abandons its work.
func (c *Committer) appendRecord(tbl Table, rec *engine.Record, expect uint64, deadline time.Time) (uint64, error) {
	settling := false
	for try := 1; ; try++ {
		seq, err := c.j.Append(c.ctx, tbl.Name(), tbl.Epoch(), tbl.Shards(), rec, expect)
		f := fateOf(err, settling)
		switch f {
		case fateStored:
			return seq, nil
		case fateGone:
			return 0, err
		case fateRefused:
			if errors.Is(err, engine.ErrConflict) {
				c.stats.conflicts.Add(1)
			}
			return 0, err
		}
		if !errors.Is(err, engine.ErrConflict) {
			c.stats.unknown.Add(1)
		}
		settling = true
		next, nonce, rerr := c.nextRecord(tbl, rec.PartitionKey, expect)
		if rerr != nil {
			if errors.Is(rerr, engine.ErrTableGone) {
				return 0, rerr
			}
			if c.ctx.Err() == nil {
				c.log.Warn("cannot read the journal to settle an append", "table", tbl.Name(), "append_err", err, "err", rerr)
			}
		} else {
			switch settle(next, nonce, rec.Nonce) {
			case fateStored:
				return next, nil
			case fateRefused:
				c.stats.conflicts.Add(1)
				return 0, fmt.Errorf("commit: append to %s after %d: %w (another writer's record at %d)", tbl.Name(), expect, engine.ErrConflict, next)
			}
		}
		if c.ctx.Err() != nil || !c.cfg.Now().Before(deadline) {
			return 0, fmt.Errorf("commit: append to %s after %d: %w after %d tries: %v", tbl.Name(), expect, errOutcomeUnknown, try, err)
		}
		backoff(c.ctx, try)
	}
}

// nextRecord reads the partition's first record after sequence after.
func (c *Committer) nextRecord(tbl Table, pk string, after uint64) (uint64, string, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SettleTimeout)
	defer cancel()
	return c.j.NextRecord(ctx, tbl.Name(), tbl.Epoch(), tbl.Shards(), pk, after)
}

// catchUp lets the view reach the partition's last record in the journal,
// so that the next round decides on the state that refused this one.
func (c *Committer) catchUp(tbl Table, pk string) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.Timeout)
	defer cancel()
	last, err := c.j.LastSeq(ctx, tbl.Name(), tbl.Epoch(), tbl.Shards(), pk)
	if err != nil {
		c.log.Warn("cannot read the partition's last sequence", "table", tbl.Name(), "err", err)
		return
	}
	if last == 0 && tbl.Partition(pk).LastSeq() != 0 {
		// The journal holds none of the partition's records, the view
		// knows some: they were pruned, and the view learns it.
		if err := tbl.SyncHistory(ctx); err != nil {
			c.log.Warn("cannot read the table's history", "table", tbl.Name(), "err", err)
		}
		return
	}
	_ = tbl.WaitSeq(ctx, last) // if it fails, the next round conflicts again
}
