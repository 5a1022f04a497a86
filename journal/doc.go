// Package journal is Cairn's journal on NATS JetStream: the only source of
// truth, from which every view is rebuilt.
//
// Layout (prefix "cairn" by default):
//
//   - The catalog stream CAIRN_CATALOG, one subject per table name,
//     cairn.catalog.<lowercase name>, with table.created and table.deleted
//     records. The sequence of a table.created record is the table's epoch.
//   - One stream per table incarnation, CAIRN_T_<lowercase name>_<epoch>,
//     one subject per partition: cairn.j.<lowercase name>.<epoch>.<token>,
//     where the token is EncodePartition(PartitionKey).
//
// Every append carries the expected last sequence of its subject
// (Nats-Expected-Last-Subject-Sequence; 0 for a subject with no message).
// If the partition has moved on, JetStream stores nothing and Append returns
// ErrConflict; two writers can never both append on the same state.
//
// Records are msgpack maps with a format version "v" and a type "t" (see
// record.go). Fields a version does not know are kept and written back. A
// record of a newer version than this code knows is an error, never
// skipped. testdata/golden holds a record of every version ever written;
// the test decodes them all, and golden files are only ever added.
//
// Durability: an append returns once JetStream has stored the record. On a
// single server (R1) that means written to the operating system, which
// survives a crash of the process; JetStream fsyncs every two minutes unless
// the server runs with SyncAlways, so a power loss can lose up to that
// interval. With replicas, a majority of servers has stored it.
package journal
