package projections

import (
	"errors"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// Fault is why a table's view stopped for good: its journal holds a record
// this host cannot apply (undecodable, invalid, or on a subject that is not
// its partition's) or lacks records the view needs (purged or deleted
// behind Cairn's back). The view keeps what it applied up to the record
// before Seq; reads and writes of the table are refused with TableFaulted.
// Operators see it in the table's load ($load) and in /metrics.
type Fault struct {
	Table string    `json:"table"`
	Epoch uint64    `json:"epoch"`
	Seq   uint64    `json:"seq"` // the journal position of the record that was not applied
	Error string    `json:"error"`
	Time  time.Time `json:"time"`
	// StreamMissing says the table's stream does not exist: deleted
	// behind Cairn's back, with the table's whole history (the node is
	// not ready while it is so: Views.Missing).
	StreamMissing bool `json:"streamMissing,omitempty"`
}

// faultError is a reason to fault a table, found by its applier, with the
// journal position it concerns; missing when the reason is the table's
// stream missing.
type faultError struct {
	seq     uint64
	err     error
	missing bool
	// gap: records the view was following are missing from the journal
	// (behindHorizon tells a prune from a removal behind Cairn's back).
	gap bool
}

func (e *faultError) Error() string { return fmt.Sprintf("record %d: %v", e.seq, e.err) }
func (e *faultError) Unwrap() error { return e.err }

// permanent reports whether err is one that retrying cannot cure: a record
// that cannot be applied or history that is missing.
func permanent(err error) bool {
	var fe *faultError
	return errors.Is(err, journal.ErrCorrupt) || errors.As(err, &fe)
}

// faultOf turns the error that stopped an applier into the table's Fault.
// seq is where the view stands when the error names no position.
func faultOf(t *Table, err error, next uint64) *Fault {
	f := &Fault{Table: t.name, Epoch: t.epoch, Seq: next, Error: err.Error(), Time: time.Now().UTC()}
	var ce *journal.CorruptError
	var fe *faultError
	switch {
	case errors.As(err, &ce):
		f.Seq = ce.Seq
	case errors.As(err, &fe):
		f.Seq, f.StreamMissing = fe.seq, fe.missing
	}
	return f
}

// fault stops the view for good with f: waiters and every later read or
// write of the table get TableFaulted. Applier goroutine only, once.
func (t *Table) fault(f *Fault) {
	err := engine.Errorf(engine.CodeTableFaulted,
		"table %s is faulted: its journal record %d cannot be applied (%s); the view stopped at %d", engine.ShownTable(f.Table), f.Seq, f.Error, t.Snapshot().Seq)
	for _, r := range t.readers() {
		r.fault(&Fault{Table: r.name, Epoch: f.Epoch, Seq: f.Seq, Time: f.Time,
			Error: fmt.Sprintf("its source table %s is faulted: %s", engine.ShownTable(t.name), f.Error)})
	}
	// Both under the view's lock: whoever sees one sees the other.
	t.mu.Lock()
	t.faulted.Store(f)
	t.failLocked(err)
	t.mu.Unlock()
	t.stopWaits()
}

// Fault returns why the view stopped for good, or nil if it did not.
func (t *Table) Fault() *Fault {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.faulted.Load()
}

// checkRecord is what the applier verifies of a record before it applies
// it: the next journal position (Cairn never removes a record, so a gap is
// history purged or deleted behind its back; a sparse view's records come
// with gaps, sparse.go, and the history check finds removals instead),
// and, unless this host wrote
// the record itself, the rules of the write model.
func (t *Table) checkRecord(seq uint64, rec *engine.Record) error {
	if seq != t.seq+1 && !t.sparse {
		return &faultError{seq: t.seq + 1, gap: true, err: fmt.Errorf("records %d to %d are missing from the journal (purged or deleted)", t.seq+1, seq-1)}
	}
	if rec == nil || t.appendedRecord(rec.Nonce) == rec {
		return nil // a record of a shard the view does not hold, or this host's
	}
	if err := engine.ValidateRecord(rec); err != nil {
		return &faultError{seq: seq, err: fmt.Errorf("invalid record: %w", err)}
	}
	return nil
}
