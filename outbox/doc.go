// Package outbox is the relay of the transactional outbox: it publishes
// every message stored in a committed journal record (engine.Record's
// Messages, written in the same record as the writes that caused them),
// after the commit, so that a write and its messages are never separated
// by a crash.
//
// # Guarantees
//
//   - At least once from the relay, exactly once as seen by a destination
//     that de-duplicates: each message carries a Nats-Msg-Id (MessageID:
//     derived from the command's id for it, or from its journal position:
//     table, epoch, record sequence, index; keyed with a secret the nodes
//     share, so that no client can forge one) and its position in the
//     Cairn-Outbox-Position header, so a consumer can de-duplicate beyond
//     JetStream's de-duplication window. The index counts the messages of
//     the whole record, across the commands a group commit put in it.
//     Messages to subjects of Config.Core are the exception: at most
//     once (below).
//   - Order per partition: a message of a partition is published only
//     after every earlier message of that partition was delivered. A
//     message that cannot be delivered (no stream for its subject, no
//     acknowledgement, a full stream, a refusal) blocks its partition,
//     retried with back-off up to 30 s, and shows up with its error, its
//     Reason, what to do and its age in Status, the bucket's blocked list
//     (Reports), /metrics and the log (one line per table every 10 s at
//     most); the other partitions go on. An operator may skip it (host
//     outbox skip) or retry at once (host outbox retry).
//   - Durable position: per table incarnation, the relay stores in the
//     key-value bucket <PREFIX>_OUTBOX the sequence up to which every
//     message was delivered (pos.<stream>), every checkpointMessages (128)
//     deliveries and every Config.CheckpointEvery, from a goroutine of its
//     own (position.go). After a crash the new holder starts after it:
//     the messages delivered since the last store, about 128 plus what one
//     store's round trip lets through (up to 255 measured), are published
//     again with the same ids.
//   - Shared work: the tables are hashed into Config.Shards shards, and
//     each shard is relayed by the one node holding its lease (a key of the
//     same bucket renewed every Config.Renew by compare-and-set, free once
//     not renewed for Config.LeaseTTL, as each node measures it on its own
//     clock from when it received the last renewal: never against the
//     server's timestamps, so that clocks that disagree cannot make a
//     live lease look free). Live nodes heartbeat there too, and
//     each takes at most its share of the shards, so a node that joins
//     gets work and a node that dies has its shards taken over. Two nodes
//     publish the same message only while a lease changes hands (a node
//     paused for longer than LeaseTTL): the ids make that harmless for
//     JetStream destinations.
//
// # Destinations
//
// A message names a Cairn queue (published on <prefix>.queue.<q>, a subject
// of the work-queue stream) or any NATS subject (engine.Message.Subject).
// Both are stream-backed: published through JetStream, delivered once a
// stream acknowledges it, and until then its partition waits. A failed
// attempt is explained (Relay.explain asks the server whether a stream
// captures the subject: the server answers a publish no stream takes
// with "no responders", or, when a core subscriber takes it, with
// nothing) and classified (reason.go). A subject matching Config.Core
// (-outbox-core) is published once on core NATS and is delivered once
// published: at most once, to whoever listens at that moment.
//
// # Cost
//
// The relay reads only the journals that carry messages. A table created
// with shards (journal format 4, engine.TableInfo.MarksMessages) is
// marked in the bucket (marked.<stream>, Marker) by the committer before
// the first record with messages is appended to it, and the relay starts
// reading it once the mark is there (its watch of the bucket, the next
// sync of its tables: within about 50 ms), from its stored position or
// the start. A table that never has a message is read once, by the views,
// instead of twice: one delivery and one decoding per record fewer, which
// raised single-entity inserts over many partitions by 1.15–1.25 times
// (cmd/cairn-bench, docs/PERFORMANCE.md). The pruner counts an unmarked table's
// records as relayed (Relayed). A table created without shards, as by a
// host of an earlier version, is read whole, as before.
//
// The holder of a marked table's shard reads its journal a second time (an
// ordered consumer, every record decoded) and publishes asynchronously,
// one message in flight per partition, so throughput grows with the number
// of partitions that have messages. At most Config.MaxPending messages per
// table wait in memory; past it the relay stops reading until they drain.
// Deleting a table drops its messages not yet delivered.
package outbox
