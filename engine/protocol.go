package engine

// Request is one message of the NATS command protocol (docs/PROTOCOL.md),
// sent as msgpack or JSON. Entity requests go to <prefix>.cmd.<Table>, table
// requests to <prefix>.tables.
type Request struct {
	// Op is one of Insert, Replace (or Update), Merge, InsertOrReplace,
	// InsertOrMerge, Delete, Batch, Retrieve, CreateTable, DeleteTable,
	// ListTables.
	Op string
	// ID is the client's command id (optional): a retry with the same id is
	// applied once and gets the first result.
	ID string
	// IfMatch is an ETag or "*"; see Operation.IfMatch.
	IfMatch string
	// Entity is the entity to write (Insert, Replace, Merge, upserts).
	Entity *Entity
	// PartitionKey and RowKey name the entity of Delete and Retrieve (an
	// Entity's keys are accepted too).
	PartitionKey string
	RowKey       string
	// Ops are the operations of a Batch, each with Op, Entity or keys, and
	// IfMatch.
	Ops []Request
	// Table names the table of CreateTable and DeleteTable.
	Table string
	// Messages are outbox messages committed with the write.
	Messages []Message
	// AsOf, on a Retrieve, reads the entity as it was at that journal
	// position of the table (0: as it is now).
	AsOf uint64
	// Position, on a Retrieve, is a journal position (a write's Reply.Seq)
	// the view must have reached before it answers: read your writes on
	// another node (0: none).
	Position uint64
}

// Reply answers a Request. Exactly one of Error or the success fields is set.
type Reply struct {
	Error *Error
	// ETag and Timestamp of the written or retrieved entity.
	ETag      string
	Timestamp int64
	// Seq is the journal position of the commit: the sequence of the
	// record in the table's journal (for Retrieve, the view's position).
	Seq uint64
	// Results holds one result per operation of a Batch.
	Results []Result
	// Entity is the retrieved entity (Retrieve).
	Entity *Entity
	// Tables lists tables (ListTables) or the created table (CreateTable).
	Tables []TableInfo
	// Duplicate is true when the reply was answered from the record of an
	// earlier command with the same id.
	Duplicate bool
}

// TableInfo describes a table.
type TableInfo struct {
	Name string
	// Epoch is the table's incarnation: the catalog position of its
	// creation. A table deleted and created again has a new epoch.
	Epoch uint64
	// Created is the creation time in ticks.
	Created int64
	// Shards is the number of view shards the table's partitions are cut
	// into (CatalogRecord.Shards; 0: none, a table of the layout before
	// shards).
	Shards uint32
	// MarksMessages is CatalogRecord.MarksMessages: writers mark the
	// table before its first outbox message.
	MarksMessages bool
}
