package projections

import (
	"context"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/commit"
)

// ForCommitter returns the views as the committer needs them
// (commit.Views): the write model states what it reads of the views as an
// interface of its own, and the read model implements it here.
func (v *Views) ForCommitter() commit.Views { return commitViews{v} }

// commitViews adapts the views to commit.Views.
type commitViews struct{ *Views }

func (v commitViews) Table(name string) (commit.Table, bool) {
	t, ok := v.Views.Table(name)
	if !ok {
		return nil, false
	}
	return commitTable{t, v.Views}, true
}

func (v commitViews) Lookup(ctx context.Context, name string) (commit.Table, bool, error) {
	t, ok, err := v.Views.Lookup(ctx, name)
	if !ok {
		if err == nil {
			err = v.readOnly(name)
		}
		return nil, false, err
	}
	return commitTable{t, v.Views}, true, nil
}

// Reserved answers ProjectionReadOnly for a declared projection's name.
func (v commitViews) Reserved(name string) error { return v.readOnly(name) }

// commitTable adapts a table's view to commit.Table.
type commitTable struct {
	*Table
	views *Views
}

func (t commitTable) Partition(pk string) commit.Partition {
	return commitPartition{s: t.Snapshot(), pk: pk, horizon: t.Horizon()}
}

func (t commitTable) SyncHistory(ctx context.Context) error {
	return t.views.SyncHistory(ctx, t.Table)
}

func (t commitTable) VisibleSeq() uint64 { return t.Snapshot().Seq }

func (t commitTable) WaitSeq(ctx context.Context, seq uint64) error {
	_, err := t.Table.WaitSeq(ctx, seq)
	return err
}

// commitPartition is one partition of a snapshot, as commit.Partition.
type commitPartition struct {
	s  *Snapshot
	pk string
	// horizon is where the table's journal starts, as the view knew
	// when the partition was taken.
	horizon uint64
}

func (p commitPartition) Entity(rk string) (*engine.Entity, bool) { return p.s.Get(p.pk, rk) }

// LastSeq is what the journal's check of an append expects: the
// partition's last record, or 0 when pruning removed every record it had
// (its last is below the horizon, and the snapshot, at the horizon or
// past it, would show any later one): JetStream then knows none.
func (p commitPartition) LastSeq() uint64 {
	last := p.s.Partition(p.pk).LastSeq
	if last != 0 && last < p.horizon && p.s.Seq+1 >= p.horizon {
		return 0
	}
	return last
}

func (p commitPartition) Command(id string) (commit.Committed, bool) {
	c, ok := p.s.Command(p.pk, id)
	return commit.Committed{Seq: c.Seq, First: c.First, Count: c.Count, Time: c.Time}, ok
}
