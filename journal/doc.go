// Package journal is Cairn's journal on NATS JetStream: the only source of
// truth, from which every view is rebuilt. It stores the write model's
// records (engine.Record, engine.CatalogRecord) with conditional appends,
// reads them back in order (Consume for the views, Read for pages of a
// table's change feed), and owns their format: the versioned msgpack
// codec and its golden files. It also starts the embedded server. The
// committer reaches it through its own small interface (commit.Journal),
// which *Journal satisfies.
//
// # Layout
//
// With the prefix "cairn" (the default; Config.Prefix, [a-z0-9_-]):
//
//   - The catalog stream CAIRN_CATALOG holds one subject per table name,
//     cairn.catalog.<lowercase name>, with table.created and table.deleted
//     records. Table names are case-insensitive, hence lower case in
//     subjects; the record keeps the name as its creator spelled it. The
//     sequence of a table.created record is the table's epoch. The record
//     also fixes the number of view shards the table's partitions are cut
//     into (engine.CatalogRecord.Shards; 0 for a table created before
//     shards).
//   - Each table incarnation has its own stream,
//     CAIRN_T_<lowercase name>_<epoch>, with subjects
//     cairn.j.<lowercase name>.<epoch>.>; a partition's journal is the
//     subject cairn.j.<lowercase name>.<epoch>.s<shard>.<token>
//     (PartitionSubject), where the shard is engine.Shard(PartitionKey,
//     shards) in decimal and the token is EncodePartition(PartitionKey):
//     "k" and the key in unpadded base64url, so that '.', '*', '>',
//     whitespace and the empty key are safe. A table without shards has
//     no "s<shard>" token. One shard's partitions are one filter subject,
//     cairn.j.<lowercase name>.<epoch>.s<shard>.* (ShardSubjects).
//     Deleting a table deletes its stream, at a cost independent of the
//     number of entities; a table created again under the same name gets a
//     new epoch and a new, empty stream.
//   - A table's name above is its full name (engine.FullTableName): the
//     development account's table Employees is "employees" (the layout of
//     every table made before accounts were namespaces), account acme's
//     is "acme.employees", two subject tokens: cairn.catalog.acme.employees,
//     cairn.j.acme.employees.<epoch>.<token>, and the stream
//     CAIRN_T_acme_employees_<epoch>. Neither can be mistaken for a
//     development account's table: its names hold no '.' or '_', and an
//     epoch token (digits) is never a table name (which starts with a
//     letter).
//
// Streams use file storage, limits retention without limits, discard old,
// a two-minute duplicate window, Replicas from Config; tables' streams
// allow direct get.
//
// # Concurrency check
//
// Every append carries the expected last sequence of its subject
// (jetstream.WithExpectLastSequencePerSubject; 0 for a subject without a
// message). If the partition has moved on, JetStream stores nothing and
// Append returns an error wrapping engine.ErrConflict: two writers can
// never both append on the same state. The catalog works the same way per
// table name, so of two hosts creating one table exactly one wins. Appends
// are published asynchronously over the connection's shared reply
// subscription, so many goroutines appending to different partitions do
// not wait for each other.
//
// # Records
//
// Records are msgpack maps with a format version "v" and a type "t"; the
// fields of each version are listed at FormatVersion. The codec is written
// by hand on msgpack's Encoder and Decoder (no reflection), since every
// record is decoded again on every replay. The versioning rule:
//
//   - Fields a version does not know are kept (engine.Record.Extra) and
//     written back when the record is encoded again.
//   - A record of a newer version than this code knows is an error
//     (ErrCorrupt), never skipped silently: a table's reader stops, the
//     catalog watcher reports it to its caller.
//   - The encoder refuses a record the decoder would refuse, so a journal
//     never holds a record its readers stop at.
//   - A record is written in the oldest version that can hold it (version
//     1 unless it names another account's table or has an outbox message
//     to a NATS subject), so an older host reads everything it can and
//     refuses only what it would misread.
//   - A field that only adds information, which a host that does not
//     know it keeps in Extra without misreading anything, is added to an
//     existing version rather than raising it ("prev", the previous
//     versions, in version 1), so that older hosts go on reading every
//     record.
//   - testdata/golden holds a record of every version ever written; a test
//     decodes them all. Golden files are only ever added (go test -run
//     Golden -golden-add writes the missing ones), never regenerated.
//
// # Durability
//
// An append returns once JetStream has stored the record. On a single
// server (R1) that means written to the operating system, which survives a
// crash of the process; JetStream fsyncs every two minutes unless the
// server runs with SyncAlways (EmbeddedConfig.SyncAlways: every write is
// fsynced before its acknowledgement, at a large cost in throughput), so a
// power loss can lose up to that interval. With replicas, an append
// returns once a majority of the servers has stored it.
//
// # Failures, and what the caller sees
//
// Errors name the operation and the table ("journal: append T/"p": …").
//
//   - Append: an error wrapping engine.ErrConflict (the partition moved
//     past the expected sequence), engine.ErrTableGone (the table's stream
//     does not exist) or engine.ErrNotSent (refused before it was sent: not
//     encodable, larger than the server's maximum payload, connection
//     closed) means nothing was stored. Any other error (no acknowledgement
//     within Config.AppendTimeout, 1 s, a new leader of the stream announced
//     while it waited, a lost connection, a cancelled context)
//     leaves the outcome unknown: the record may have been stored, or may
//     still be. The partition's first record after the expected sequence
//     settles it for good (NextRecord): the committer relies on that.
//   - AppendCatalog: engine.ErrConflict when another host took the name's
//     sequence first. An append left unanswered (Config.AppendTimeout, or
//     a new leader of the catalog announced) is sent again with the same
//     expected sequence, and a conflict then is settled by reading the
//     name's head: this record (success) or another's (ErrConflict); the
//     head still at the record this one follows means an earlier try is
//     in flight (a clustered leader refuses an append to a subject while
//     another to it is proposed and not yet stored), and it is sent
//     again. Only
//     after Config.CatalogTimeout, 10 s, of tries does it give up with an
//     error that leaves the outcome unknown, and the caller sees it.
//   - EnsureTableStream tries again, each try bounded, while the cluster
//     has no meta leader or does not answer (Transient), until its
//     context ends.
//   - LastSeq, LastStreamSeq, NextRecord, Read: engine.ErrTableGone when
//     the table's stream does not exist; LastCatalogSeq and WatchCatalog:
//     ErrCatalogGone when the catalog stream does not exist (deleted
//     behind Cairn's back: nothing brings its records back).
//   - Read: ErrReadsBusy when its context ends while it waits for one of
//     the reads of its table under way (below, Cost) to end.
//   - Consume, ConsumeKnown, WatchCatalog return nil when their context
//     ends. A record that cannot be decoded (damaged, or of a newer format
//     version) or that does not belong on its subject (a partition key or
//     table name the subject does not name: published there by something
//     other than Cairn) is a *CorruptError wrapping ErrCorrupt, with its
//     sequence: it stops Consume and ConsumeKnown rather than being
//     skipped, and WatchCatalog hands it to its callback, which decides.
//     A stream that does not exist is an error wrapping
//     engine.ErrTableGone; any other failure of the consumer is returned
//     (the views retry). A reader makes its consumers itself (ephemeral,
//     in memory, one replica, no acks: what the client's ordered consumer
//     makes, without its own resets, whose creation waits a fixed 10 s
//     that nothing cuts short). Deliveries lost on their way while the
//     connection moved to another server (a gap in the consumer's
//     delivery sequence, or, after a reconnect, records past the last
//     delivered) are read with direct gets from any replica, up to 4,096,
//     and the consumer goes on: making a new one needs the meta leader,
//     which may be the server that went. A consumer lost (two missed
//     heartbeats of 1 s) is made again after the last record delivered,
//     each creation bounded (250 ms at first after a loss, then longer, at
//     most 2 s, ten tries) and cut short by the stream's next leader
//     announcement; between two creations that failed (the meta leader,
//     which places consumers, being elected) the reader reads the
//     records there are with direct gets, so that it goes on meanwhile.
//     A lost consumer is logged at Warn, except one the server deleted
//     with its stream (a dropped table's) or whose reader is stopped
//     meanwhile: Debug (logLost looks on the side, up to 250 ms).
//     Probe asks the readers of a table to read up to a sequence from a
//     replica: the committer does when its view has not shown a record it
//     stored within 250 ms, and the reader acts once its consumer has
//     delivered nothing for 250 ms (one that delivers is only behind), so
//     that a consumer lost without a word costs that instead of two missed
//     heartbeats. A look past the last record that fails keeps the
//     consumer. When JetStream announces a new
//     leader of the stream (LeaderElectedSubject) and the reader's
//     consumer does not answer within 250 ms, the reader makes it again
//     too: it was lost with the old leader's server without a word.
//
// # Cost
//
// An append is one encode (by hand, into a pooled buffer sized up front)
// and one asynchronous publish; up to 16,384 appends can be in flight on
// one connection. NextRecord is one request (a direct get that any
// replica may answer, leader or not); LastSeq two (the stream's info,
// then one message by subject, a direct get too); LastStreamSeq and
// LastCatalogSeq one. A reader is
// one consumer per stream pulling batches of up to 1,024 messages,
// and one core NATS subscription to the stream's leader announcements;
// every record is decoded, except those ConsumeKnown gets from memory by
// their nonce (PeekNonce reads only the first fields). Read is one
// request (the stream's info) when nothing is there to read, otherwise
// four, through a short-lived consumer of its own; it never waits for
// records, since a wait would hold that consumer, and a stream's
// consumers are limited (nats-server's default, 1,000 per stream,
// applies: the streams set none): at most 8 Reads of one table hold a
// consumer at once on a node, the others queue for them. Deleting a
// table is one request whatever the table holds. The journal starts no
// goroutines of its own beyond a call: readers run in their caller's
// (with a helper that ends with them).
package journal
