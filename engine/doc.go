// Package engine is Cairn's write model: entities and their typed property
// values, the limits of the Azure Table data model, the commands that change
// tables, the coded errors they fail with, and the pure decider that turns a
// command plus the current state of one partition into journal events.
//
// The engine does no I/O. Time and ids are inputs, so every rule here is
// tested without a server. It imports neither NATS nor net/http; the journal
// (package journal) and the views (package projections) are at the edges.
// It also defines what crosses to the journal: the records it stores
// (record.go; their format belongs to package journal) and the errors of an
// append that every journal returns wrapped (ErrConflict, ErrTableGone,
// ErrNotSent: nothing was stored).
//
// A write goes through these steps (the committer in engine/commit drives
// them):
//
//  1. Validate the command without state (keys, names, sizes, batch rules).
//  2. Decide it against the partition's state: the committed view plus the
//     effects of commands already decided in the same group commit.
//  3. Append the resulting events, as one journal record, to the partition's
//     journal with the expected last sequence of the partition.
//  4. Wait until the host's view has applied the record, then reply.
package engine
