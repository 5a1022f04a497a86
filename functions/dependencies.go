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
