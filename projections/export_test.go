package projections

import (
	"bufio"
	"context"
	"errors"
	"os"
)

// AsOfCached returns the number of finished as-of views the node keeps.
func (v *Views) AsOfCached() int { return v.asOfCached() }

// KeptAtAck returns how many records applied at their acknowledgement
// the view keeps for their delivery.
func KeptAtAck(t *Table) int {
	t.acked.mu.Lock()
	defer t.acked.mu.Unlock()
	return len(t.acked.recs)
}

// CommandLog returns the command ids a snapshot remembers, in the order
// the view evicts them (an id committed twice in the window twice).
func CommandLog(s *Snapshot) []CommandRecord {
	out := make([]CommandRecord, len(s.expiry))
	for i, c := range s.expiry {
		out[i] = *c
	}
	return out
}

// CommandIDs returns the command ids a snapshot answers, in key order.
func CommandIDs(s *Snapshot) []CommandRecord {
	var out []CommandRecord
	s.ids.Scan(func(c *CommandRecord) bool {
		out = append(out, *c)
		return true
	})
	return out
}

// ForgeSnapshot writes to dst the snapshot file src as if it were of the
// table incarnation (name, epoch) at position seq (0: its own), with a
// valid checksum.
func ForgeSnapshot(src, dst, name string, epoch, seq uint64) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	h, dec, err := readSnapshotHeader(bufio.NewReader(f))
	if err != nil {
		return err
	}
	c, err := decodeSnapshotBody(dec, h, nil)
	if err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if seq == 0 {
		seq = h.Seq
	}
	s := &Snapshot{Table: name, Epoch: epoch, Seq: seq, rows: c.rows, parts: c.parts, ids: c.ids, expiry: c.expiry}
	if err := encodeSnapshot(out, s, h.At, nil); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// BehindHorizon reports whether a gap in the records t follows is the
// view falling behind its table's horizon (a restart from a snapshot), as
// the applier decides it.
func (v *Views) BehindHorizon(ctx context.Context, t *Table) bool {
	return v.behindHorizon(ctx, t, &faultError{seq: t.Seq() + 1, gap: true, err: errors.New("records missing")})
}

// SetSparseBehind sets, for the test, how far behind a sparse view's
// filtered consumer may be before the view reads the whole journal.
func SetSparseBehind(t interface{ Cleanup(func()) }, n uint64) {
	sparseBehindTest.Store(n)
	t.Cleanup(func() { sparseBehindTest.Store(0) })
}

// HoldApply stops t's applier before its next record until release.
func (t *Table) HoldApply() (release func()) {
	t.dmu.Lock()
	return t.dmu.Unlock
}
