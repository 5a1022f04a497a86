package engine

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

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
	// HasPrev says that the events carry the versions their entities had
	// before them (Event.Prev). Records written before Cairn recorded
	// them do not: their previous versions are unknown.
	HasPrev bool
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
	Name string
	Time int64 // ticks
	// Shards is the number of view shards a created table's partitions
	// are cut into (Shard), 1 to MaxShards; 0 for a table created before
	// shards, or in their absence, whose journal subjects name no shard.
	Shards uint32
	// MarksMessages is true for a table whose writers mark it before its
	// first outbox message (the outbox relays only a marked table's
	// journal); false for a table created before marks, whose journal the
	// relay always reads.
	MarksMessages bool
	Extra         map[string]msgpack.RawMessage
}

// PrevVersion returns the version the entity of event i had before the
// event, the record being stored at sequence seq: exists is false when
// the entity did not exist, known is false when the record does not say
// (written before previous versions were recorded).
func (r *Record) PrevVersion(seq uint64, i int) (v Version, exists, known bool) {
	if !r.HasPrev || i < 0 || i >= len(r.Events) {
		return Version{}, false, false
	}
	p := r.Events[i].Prev
	if p == nil {
		return Version{}, false, true
	}
	v = *p
	if v.Seq == 0 {
		v.Seq = seq
	}
	return v, true, true
}

// CheckPrev checks the previous versions of a record that has them: an
// earlier event of the same record named as a previous version must come
// before the event, write the same row and be a put (a deleted entity is
// no previous version).
func (r *Record) CheckPrev() error {
	if !r.HasPrev {
		return nil
	}
	for i := range r.Events {
		p := r.Events[i].Prev
		if p == nil || p.Seq != 0 {
			continue
		}
		j := int(p.Index)
		if uint64(p.Index) >= uint64(i) {
			return fmt.Errorf("event %d: previous version at event %d of the same record, not before it", i, p.Index)
		}
		if r.Events[j].RowKey != r.Events[i].RowKey || r.Events[j].Kind != EventPut {
			return fmt.Errorf("event %d: previous version at event %d of the same record, which does not put row %q", i, j, r.Events[i].RowKey)
		}
	}
	return nil
}
