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
	return commitTable{t}, true
}

func (v commitViews) Lookup(ctx context.Context, name string) (commit.Table, bool, error) {
	t, ok, err := v.Views.Lookup(ctx, name)
	if !ok {
		if err == nil && v.IsProjection(name) {
			err = ErrReadOnly(name)
		}
		return nil, false, err
	}
	return commitTable{t}, true, nil
}

// Reserved answers ProjectionReadOnly for a declared projection's name.
func (v commitViews) Reserved(name string) error {
	if v.IsProjection(name) {
		return ErrReadOnly(name)
	}
	return nil
}

// commitTable adapts a table's view to commit.Table.
type commitTable struct{ *Table }

func (t commitTable) Partition(pk string) commit.Partition {
	return commitPartition{s: t.Snapshot(), pk: pk}
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
}

func (p commitPartition) Entity(rk string) (*engine.Entity, bool) { return p.s.Get(p.pk, rk) }

func (p commitPartition) LastSeq() uint64 { return p.s.Partition(p.pk).LastSeq }

func (p commitPartition) Command(id string) (commit.Committed, bool) {
	c, ok := p.s.Command(p.pk, id)
	return commit.Committed{Seq: c.Seq, First: c.First, Count: c.Count, Time: c.Time}, ok
}
