package journal

// FormatVersion is the newest record format this code writes and reads.
// Every version ever written stays decodable (golden files in
// testdata/golden); a record of a newer version is refused, never skipped.
//
// Format version 1. Every record is a msgpack map with short string keys:
//
//	"v"    uint    format version (1); the writer puts it first
//	"t"    string  record type: "commit", "table.created", "table.deleted"
//
// A commit record (subject of a partition) adds
//
//	"ts"   int     commit time in ticks (Timestamp of every entity written)
//	"pk"   string  partition key
//	"n"    string  nonce identifying the record (optional on read)
//	"cmds" array   of [id string, first uint, count uint]: each committed
//	               command and the events that are its own
//	"ev"   array   of [kind uint, rowKey string, properties]: properties in
//	               the form of engine.EncodeProperties; a Delete has []
//	"out"  array   of [queue string, id string, body bin] (optional: only
//	               written when there are outbox messages; queue not empty)
//
// and a catalog record (subject of a table name)
//
//	"name" string  the table's name as its creator spelled it
//	"ts"   int     time in ticks
//
// Keys this code does not know are kept raw in Extra and written back by
// the encoder: a field added by a newer writer survives a rewrite by an
// older one. A change that an older reader must not misread raises the
// version instead.
//
// Added to version 1 without a new version, by that rule, commit records
// have
//
//	"prev" array   one entry per event of "ev", in order: the version the
//	               event's entity had before it, nil when it did not
//	               exist, or [seq uint, index uint]; seq 0 names an
//	               earlier event of the same record (index < the event's,
//	               writing the same row, a put), since a record's own
//	               sequence is known only once it is stored
//
// The field only adds information: a host that does not know it keeps it
// in Extra, applies the events exactly as before and writes it back
// unchanged, so no reader of any version misreads a record that has it,
// and a version bump (which would make every older host refuse every new
// record) would buy nothing. Records written before it have no "prev":
// their previous versions are unknown (engine.Record.HasPrev is false),
// which the change feed and the functions' change trigger report as
// such. A "prev" of the wrong length or shape, or one that names a later
// event, another row or a delete, is refused like any malformed field.
//
// Format version 2 adds to catalog records
//
//	"acct" string  the account that owns the table (engine.FullTableName);
//	               "name" is then the table's name within that account
//
// and to the "out" entries of commit records a second shape, a message
// to a NATS subject rather than a Cairn queue:
//
//	"out"  array   of entries, each either
//	               [queue string, id string, body bin]       a queue, or
//	               ["", id string, body bin, subject string] a subject
//	               (exactly one of queue and subject is non-empty)
//
// A catalog record of an account other than the development account, and
// a commit record with at least one message to a subject, is written as
// version 2; every other record is still written as version 1 (byte for
// byte as before), which hosts that know only version 1 read as before. A
// version 1 host refuses a version 2 record rather than take another
// account's table for one of the development account, or a subject's
// message for a queue's; a version 1 record with "acct" or with an "out"
// entry of four elements is refused too (no version 1 writer ever wrote
// one). A host that knew version 2 before subjects refuses a four-element
// entry as well (it reads exactly three), so no host misreads one.
//
// Format version 3 adds to the catalog record of a created table
//
//	"shards" uint  the number of view shards the table's partitions are
//	               cut into (engine.Shard), 1 to engine.MaxShards
//
// A table with shards has every partition's records on a subject naming
// its shard (PartitionSubject): a host that does not know shards would
// read and write them on subjects of its own, so the record is version 3
// and every older host refuses it. A table created without shards (a
// node run with -table-shards 0, as on a cluster not yet upgraded
// throughout) is written as before.
//
// Format version 4 adds to the catalog record of a created table
//
//	"marks" bool   true: every writer of the table marks it in the
//	               outbox's bucket before it appends the table's first
//	               record with outbox messages, and the relay reads
//	               only a marked table's journal (docs/INTERNALS.md,
//	               The outbox)
//
// A host that does not know marks would append messages to such a table
// without marking it, and a relay that waits for the mark would never
// send them (and the pruner would remove them): the record is version 4
// and every older host refuses the table. Tables without the field are
// relayed whole, as before. A node that creates tables without shards
// creates them without marks too.
const FormatVersion = 4

// Record versions this code writes.
const (
	version1 = 1
	// versionAccounts is the first version with accounts as namespaces.
	versionAccounts = 2
	// versionSubjects is the first version with outbox messages to NATS
	// subjects.
	versionSubjects = 2
	// versionShards is the first version with tables cut into shards.
	versionShards = 3
	// versionMarks is the first version with tables whose writers mark
	// them before their first outbox message.
	versionMarks = 4
)

// Record types, written as the envelope's "t" field.
const (
	typeCommit       = "commit"
	typeTableCreated = "table.created"
	typeTableDeleted = "table.deleted"
)

// The fields of format version 1, by record kind: an Extra key must not be
// one of them (it would be written twice).
var (
	commitFields  = map[string]bool{"v": true, "t": true, "ts": true, "pk": true, "n": true, "cmds": true, "ev": true, "out": true, "prev": true}
	catalogFields = map[string]bool{"v": true, "t": true, "name": true, "ts": true, "acct": true, "shards": true, "marks": true}
)
