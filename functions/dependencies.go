package functions

import (
	"context"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections"
)

// What the runner needs of the rest of a node, declared here, at the
// consumer, so that the runner depends on two small interfaces instead of
// the committer's and the views' concrete types.

// Committer commits the invocations' writes: engine/commit's Committer, the
// same write path as clients' commands.
type Committer interface {
	// Submit queues a command; done receives its reply exactly once, once
	// the command is committed and visible in this node's views, or failed.
	// done must not block.
	Submit(cmd *engine.Command, done func(*engine.Reply))
}

// Views finds the views of live tables (projections.Views): invocations
// read them, and table triggers follow their incarnations.
// Remote reads the partitions of a table whose view on this node holds
// only some shards (the others' holders answer: docs/SCALE.md); nil when
// every view is whole.
type Remote interface {
	// Get reads one entity of a partition this node's view does not
	// hold (nil: none), from a view at least as fresh as this node's and
	// that has reached the journal position at (0: no more).
	Get(ctx context.Context, t *projections.Table, pk, rk string, at uint64) (*engine.Entity, error)
	// Query reads, in RowKey order, at most top entities of such a
	// partition that match filter ("": all).
	Query(ctx context.Context, t *projections.Table, pk, filter string, top int) ([]*engine.Entity, error)
}

type Views interface {
	// Table returns the view of a live table this node knows.
	Table(name string) (*projections.Table, bool)
	// Lookup is Table, but catches up with the catalog first when the name
	// is unknown, so that a table just created through another node is
	// found.
	Lookup(ctx context.Context, name string) (*projections.Table, bool, error)
	// Readable is Lookup, and also finds a declared projection's read
	// table (reads only: writes to it are ProjectionReadOnly).
	Readable(ctx context.Context, name string) (*projections.Table, bool, error)
}
