package projections

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// A table's history: how much of its journal it keeps (its Retention),
// and its horizon, the first journal position it still has. Below the
// horizon the records were pruned (Pruner): what the table was there is
// only in the snapshots, and a change feed, an as-of read or an outbox
// skip asking for it is refused with HistoryTruncated.

// Retention is how much of a table's journal is kept: everything (the
// zero value), the records of the last Age, or the last Records records.
// Records newer than the command-id window, not yet relayed by the outbox
// or after the newest shared snapshot are kept whatever it says (Pruner).
type Retention struct {
	Age     time.Duration
	Records uint64
}

// Bounds of a retention: shorter or fewer would prune what the command-id
// window and a node's restart need anyway, so they are refused rather
// than silently lengthened.
const (
	MinRetentionAge     = 10 * time.Minute
	MinRetentionRecords = 1000
)

// ParseRetention reads a retention: "" or "all" (keep everything), a
// duration ("7d", "36h", "90m"; d is 24 hours), or a number of records
// ("1000000"). It refuses anything else, and ages and counts below
// MinRetentionAge and MinRetentionRecords.
func ParseRetention(s string) (Retention, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "" || s == "all":
		return Retention{}, nil
	case strings.Trim(s, "0123456789") == "":
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n < MinRetentionRecords {
			return Retention{}, fmt.Errorf("retention %q: a number of records must be at least %d", s, MinRetentionRecords)
		}
		return Retention{Records: n}, nil
	}
	d, err := parseAge(s)
	if err != nil {
		return Retention{}, fmt.Errorf("retention %q: want all, a duration (7d, 36h, 90m) or a number of records (1000000)", s)
	}
	if d < MinRetentionAge {
		return Retention{}, fmt.Errorf("retention %q: a duration must be at least %v", s, MinRetentionAge)
	}
	return Retention{Age: d}, nil
}

// parseAge reads a duration with days ("7d", "1d12h") besides Go's units.
func parseAge(s string) (time.Duration, error) {
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseUint(s[:i], 10, 32)
		if err != nil {
			return 0, err
		}
		days, s = time.Duration(n)*24*time.Hour, s[i+1:]
		if s == "" {
			return days, nil
		}
	}
	if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("a sign inside a duration")
	}
	d, err := time.ParseDuration(s)
	return days + d, err
}

// All reports whether the retention keeps everything.
func (r Retention) All() bool { return r.Age == 0 && r.Records == 0 }

// String writes the retention as ParseRetention reads it.
func (r Retention) String() string {
	switch {
	case r.Records > 0:
		return strconv.FormatUint(r.Records, 10)
	case r.Age%(24*time.Hour) == 0 && r.Age > 0:
		return strconv.FormatInt(int64(r.Age/(24*time.Hour)), 10) + "d"
	case r.Age > 0:
		return r.Age.String()
	}
	return "all"
}

// noteHistory records what the applier learnt of the stream's history.
// The horizon never moves back: a stale look does not undo a newer one.
func (t *Table) noteHistory(h journal.History) {
	for {
		old := t.hist.Load()
		if old != nil && old.Horizon > h.Horizon {
			h.Horizon = old.Horizon
		}
		if t.hist.CompareAndSwap(old, &h) {
			return
		}
	}
}

// History returns what the view last learnt of its stream's history (the
// zero value before the applier's first look: a horizon of 1).
func (t *Table) History() journal.History {
	if h := t.hist.Load(); h != nil {
		return *h
	}
	return journal.History{Horizon: 1}
}

// PruneCut returns the first record the table's retention, the grace and
// the outbox keep, as this node's pruner last worked it out (0: not known,
// or the retention keeps everything): the shared snapshots' collection
// keeps the newest base at or before it, where the next prune cuts.
func (t *Table) PruneCut() uint64 { return t.pruneCut.Load() }

// Horizon returns the first journal position the table's stream still
// has, as far as the view knows (1: nothing pruned).
func (t *Table) Horizon() uint64 { return max(t.History().Horizon, 1) }

// SyncHistory reads the stream's history now (one request) and records it:
// what a writer does when the journal and the view disagree about a
// partition that pruning may have emptied.
func (v *Views) SyncHistory(ctx context.Context, t *Table) error {
	h, err := v.j.History(ctx, t.Name(), t.Epoch())
	if err != nil {
		return err
	}
	t.noteHistory(h)
	return nil
}

// behindHorizon reports whether err, which stopped t's applier, is a view
// that fell behind its table's horizon: the records it missed were pruned
// by Cairn (a node cut off for longer than the table's retention), not
// removed behind its back. One stream information request.
func (v *Views) behindHorizon(ctx context.Context, t *Table, err error) bool {
	var fe *faultError
	if !errors.As(err, &fe) || !fe.gap {
		return false
	}
	removed, h, herr := v.j.RemovedRecords(ctx, t.Name(), t.Epoch())
	if herr != nil || removed || h.Horizon <= t.Seq()+1 {
		return false
	}
	t.noteHistory(h)
	return true
}

// restartView starts a table's view again from the newest snapshot, as a
// node's start does, when it fell behind the table's horizon: a new view
// of the same incarnation replaces it (the declared projections attached
// again), and whoever holds the old one is told to retry.
func (v *Views) restartView(ctx context.Context, e *entry, t *Table) {
	v.log.Warn("table view fell behind the journal's horizon (the records it missed were pruned): starting it again from the newest snapshot",
		"table", t.Name(), "seq", t.Seq(), "horizon", t.Horizon())
	v.mu.Lock()
	defer v.mu.Unlock()
	if e.table != t || !e.live {
		return // dropped, or replaced, meanwhile
	}
	t.Fail(engine.Errorf(engine.CodeServerBusy, "the view of table %s starts again from a snapshot: its journal was pruned past it; retry", engine.ShownTable(t.Name())))
	e.table = NewTable(t.name, t.epoch, v.cfg.DedupWindow)
	e.table.layoutOf(t)
	v.attachDeclaredLocked(e.table)
	e.started, e.ready = false, false
	v.startLocked(ctx, e)
	v.broadcastLocked()
}

// sharedBasesSpread is how many bases the shared store keeps spread
// between where the journal may be cut next and the newest chains, for a
// table with a retention: as the cut moves on it reaches one of them
// every quarter of the way, so the journal holds its retention plus at
// most about a quarter more, and the store a handful of bases.
const sharedBasesSpread = 4

// sharedKept decides which of a table incarnation's shared bases the
// store keeps (keep, by position) and after which position it keeps the
// deltas (those of the newest two chains), given the stream's first
// sequence and where the pruner may cut the journal next (cut; 0: it may
// not, the retention keeps everything or is not known yet):
//
//   - the newest two bases, and the deltas after the older of them: a
//     start loads the newest chain, or the one before when it fails;
//   - the horizon base, the newest before first (when the journal was
//     pruned): where the journal starts, for as-of reads;
//   - with a cut, the newest base before it (where the next prune cuts;
//     none before it: the oldest, which the cut reaches first) and bases
//     spread sharedBasesSpread ways between it and the newest chains
//     (where the following prunes cut).
//
// ok is false when there is nothing to decide (fewer than two bases).
func sharedKept(bases []uint64, first, cut uint64) (keep map[uint64]bool, deltasAfter uint64, ok bool) {
	if len(bases) < 2 {
		return nil, 0, false
	}
	bases = append([]uint64(nil), bases...)
	slices.Sort(bases)
	n := len(bases)
	keep = map[uint64]bool{bases[n-1]: true, bases[n-2]: true}
	deltasAfter = bases[n-2]
	newestBefore := func(pos uint64) (uint64, bool) {
		for i := n - 1; i >= 0; i-- {
			if bases[i] < pos {
				return bases[i], true
			}
		}
		return 0, false
	}
	if first > 1 {
		if b, ok := newestBefore(first); ok {
			keep[b] = true
		}
	}
	if cut == 0 {
		return keep, deltasAfter, true
	}
	start := bases[0] // none before the cut: the oldest comes closest
	if b, ok := newestBefore(cut); ok {
		start = b
	}
	keep[start] = true
	step := (bases[n-2] - start) / sharedBasesSpread
	last := start
	for _, b := range bases[:n-2] {
		if b > start && b-last >= max(step, 1) {
			keep[b], last = true, b
		}
	}
	return keep, deltasAfter, true
}
