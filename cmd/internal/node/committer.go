package node

import (
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/commit"
)

// runnerCommitter hands the function runner's commands to the committer.
// The runner takes the reply callback as a plain func(*engine.Reply); the
// committer's Submit names its type (commit.Done), so its method does not
// satisfy functions.Committer as it is. Once Submit takes a plain func,
// the committer can be passed directly and this adapter removed.
type runnerCommitter struct{ c *commit.Committer }

func (a runnerCommitter) Submit(cmd *engine.Command, done func(*engine.Reply)) { a.c.Submit(cmd, done) }
