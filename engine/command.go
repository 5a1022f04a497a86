package engine

import "fmt"

// Op is the kind of an entity write. The numeric values are written into the
// journal and onto the wire: they never change and are never reused.
type Op uint8

// The entity operations of SPEC §2.
const (
	OpInvalid         Op = 0
	OpInsert          Op = 1
	OpReplace         Op = 2 // "Update" in Azure's words
	OpMerge           Op = 3
	OpInsertOrReplace Op = 4
	OpInsertOrMerge   Op = 5
	OpDelete          Op = 6
)

var opNames = [...]string{
	OpInvalid:         "Invalid",
	OpInsert:          "Insert",
	OpReplace:         "Replace",
	OpMerge:           "Merge",
	OpInsertOrReplace: "InsertOrReplace",
	OpInsertOrMerge:   "InsertOrMerge",
	OpDelete:          "Delete",
}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// ParseOp maps an operation name to its Op. "Update" is accepted as a
// synonym of "Replace".
func ParseOp(name string) (Op, bool) {
	if name == "Update" {
		return OpReplace, true
	}
	for o := OpInsert; o <= OpDelete; o++ {
		if opNames[o] == name {
			return o, true
		}
	}
	return OpInvalid, false
}

// Operation is one entity write of a command.
type Operation struct {
	Op Op
	// Entity carries the keys and, except for Delete, the properties to
	// write. For Delete only the keys are read.
	Entity *Entity
	// IfMatch is the condition for Replace, Merge and Delete: "*" (or empty)
	// means "the entity must exist", anything else must equal the entity's
	// current ETag. It is ignored by Insert and the two upserts.
	IfMatch string
}

// Message is an outbox message: committed in the same journal record as the
// write that carries it and relayed to its destination after the commit.
// It has exactly one destination: a Cairn queue or a NATS subject.
type Message struct {
	// Queue is a Cairn queue (published to <prefix>.queue.<Queue>).
	Queue string
	// Subject is any NATS subject (core NATS, or a JetStream stream that
	// takes it): a literal subject, not one of the server's own ($…) or
	// an inbox (_…) (ValidateSubject). A node accepts only the subjects
	// its operator allows.
	Subject string
	// ID de-duplicates the message at its destination (Nats-Msg-Id).
	// Empty: derived from the journal position when relayed.
	ID   string
	Body []byte
}

// Command is the unit of a write to one partition of one table: a single
// operation, or an entity group transaction (Batch) of up to 100 operations
// that succeed or fail together.
type Command struct {
	// ID is the client's id of the command. A command retried with the same
	// id is applied once and answered with the first result. Empty: the host
	// assigns one (retries through the host are still de-duplicated).
	ID    string
	Table string
	Ops   []Operation
	// Batch marks an entity group transaction: errors name the failing
	// operation's index.
	Batch bool
	// Messages are committed with the write (the transactional outbox).
	Messages []Message

	size int // entity bytes by Azure's formula, set by ValidateCommand
}

// Size returns the command's entity bytes by Azure's formula (EntitySize
// summed over its operations), as computed by ValidateCommand.
func (c *Command) Size() int { return c.size }

// PartitionKey returns the partition the command writes to (that of its
// first operation; validation checks that all agree).
func (c *Command) PartitionKey() string {
	if len(c.Ops) == 0 || c.Ops[0].Entity == nil {
		return ""
	}
	return c.Ops[0].Entity.PartitionKey
}

// EventKind is the kind of a journal event.
type EventKind uint8

// Event kinds. The numeric values are part of the journal format.
const (
	EventPut    EventKind = 1 // the entity now has exactly these properties
	EventDelete EventKind = 2 // the entity no longer exists
)

// Event is one entity's change inside a journal record. A Put carries the
// whole entity as it is after the write (not the patch), so applying an event
// needs no earlier state and replay is a plain overwrite.
type Event struct {
	Kind       EventKind
	RowKey     string
	Properties []Property // EventPut only; sorted by name
	// Prev is the version the entity had before the event, in a record
	// that says (Record.HasPrev): nil when the entity did not exist; Seq 0
	// when an earlier event of the same record wrote it (Index is that
	// event's), since a record's own sequence is known only once it is
	// stored. Record.PrevVersion resolves it.
	Prev *Version
}

// Result is what a committed operation returns to its client.
type Result struct {
	ETag      string
	Timestamp int64 // ticks
}
