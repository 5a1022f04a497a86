package engine

import "github.com/vmihailenco/msgpack/v5"

// The records below are what the write model stores: the committer builds
// them, the journal encodes and stores them (its codec and its format,
// with golden files of every version, live in package journal), and the
// views apply them. They are pure data.

// CommandRef is a committed command inside a record: its client id (empty
// for commands sent without one) and which of the record's events are its
// own (Events[First:First+Count]).
type CommandRef struct {
	ID           string
	First, Count uint32
}

// Record is a commit to one partition: one or more commands decided
// together (an entity group transaction, or a group commit), as one journal
// message.
type Record struct {
	// Time is the commit's server time in ticks: the Timestamp of every
	// entity the record writes.
	Time         int64
	PartitionKey string
	// Nonce identifies the record, so that an append whose acknowledgement
	// was lost can be recognised in the journal.
	Nonce    string
	Commands []CommandRef
	// Events are the entity changes, in order. A Delete's Properties are
	// not written.
	Events []Event
	// Messages are outbox messages committed with the writes (SPEC §6).
	Messages []Message
	// Extra holds fields this version does not know, as raw msgpack; they
	// are written back unchanged when the record is encoded again.
	Extra map[string]msgpack.RawMessage
}

// CatalogKind is the kind of a catalog record.
type CatalogKind uint8

// Catalog record kinds.
const (
	CatalogTableCreated CatalogKind = 1
	CatalogTableDeleted CatalogKind = 2
)

// CatalogRecord creates or deletes a table.
type CatalogRecord struct {
	Kind CatalogKind
	// Name is the table's full name (FullTableName: the account and the
	// table), the table part as its creator spelled it.
	Name  string
	Time  int64 // ticks
	Extra map[string]msgpack.RawMessage
}
