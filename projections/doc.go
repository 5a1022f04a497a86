// Package projections is Cairn's read model: views materialised from the
// journal. Every host keeps one; it is a cache that replay rebuilds, never
// a source of truth.
//
// # Parts
//
//   - Table (table.go) is the view of one table incarnation: copy-on-write
//     B-trees of entities by (PartitionKey, RowKey), of partitions (the
//     last sequence, the expected one for the next append, and the load)
//     and of recent command ids. One goroutine, its applier, writes it
//     (Apply, Publish, Fail).
//   - Snapshot (snapshot.go) is what readers use: an immutable view at one
//     journal position, safe for any number of goroutines without locks.
//     Table.Snapshot is an atomic load; Table.WaitSeq waits for a position
//     on a goroutine; Table.Await (await.go) registers a callback that
//     the publish reaching a position, or applying a record of given
//     partitions at or after it, calls: what the front doors' waiting
//     requests use, so that a wait holds no goroutine and no consumer.
//   - Views (views.go) owns the lifecycle. NewViews starts nothing; Run
//     follows the catalog (catalog.go), starts one applier per live table
//     (applier.go), and returns once all of them have stopped; Ready
//     (ready.go) is closed when every view first caught up with the
//     journal as it was at the start. Table, Lookup, CatalogEntry and
//     Tables find views by name, case-insensitively.
//   - Placed views (placed.go; docs/SCALE.md): with Config.Placement a
//     view of a table with shards may hold only some of them (Holds,
//     Partial). It reads its shards alone, on a filtered consumer
//     (journal.ConsumeShards), and learns where it stands between their
//     records (sparse.go), so its positions mean what a whole view's do;
//     it starts, shard by shard, from the newest of the
//     table's whole snapshots and the shard bases holding that shard,
//     and writes shard bases of its own (snapshards.go). When the hosts
//     change, Replace
//     starts a view holding the new shards beside the current one, which
//     takes its place once caught up (swapLocked; a wait for a position
//     goes on on the successor). Reads of such a table, and of the
//     projections declared over any placed table, are gathered from the
//     hosts (gathered.go: Gathered, KeepShards, and Fold for aggregates,
//     which keep a group per source shard there).
//   - Declared projections (declared.go, derive.go, derived.go,
//     declared_views.go, declarations.go; docs/PROJECTIONS.md): an index
//     or aggregate Definition is attached to its source table's view and
//     maintained by the source's applier in Apply, from each change and
//     the entity it replaces, and published with the source at the same
//     position, so a projection is never behind its source. Its readers
//     get a read-only Table (Views.Readable; the committer's lookup
//     answers ProjectionReadOnly). A new version is built beside the
//     active one from an O(1) copy of the source, catches up with the
//     changes kept meanwhile, is checked against the source's counts, and
//     swapped under the source's dmu. Declarations follows the bucket
//     CAIRN_PROJECTIONS, hands the set to Views.Declare before the views
//     replay, reports the node's state every 2 s while anything is
//     declared, and serves /$cairn/projections.
//   - Snapshot files (snapfile.go: the base format, SnapshotFormat 2,
//     its entities in blocks that snapblocks.go decodes on every core;
//     snapdelta.go: the delta format, DeltaFormat 2; golden files of both
//     in testdata/; snapshotter.go: when and which kind; snapstore.go:
//     writing, loading, removing; snapchain.go: choosing and loading a
//     chain): with Config.SnapshotDir set, a view's snapshots are a chain,
//     a full base and deltas after it, each delta holding the entities
//     and partitions written since the snapshot it follows (the applier
//     notes their keys as it applies records; the writer reads their
//     state from the published Snapshot) and the command ids added. A
//     snapshot is due once the tail, the records applied since the last
//     one, holds Config.SnapshotEvery records (50,000) or
//     Config.SnapshotBytes (32 MiB), whatever the time, or once the last
//     is Config.SnapshotInterval old (5 minutes) with a smaller tail, and
//     once more when the views stop cleanly (checked as records are
//     applied). It is a delta when it can follow the chain, a base
//     otherwise; a chain that would load more than Config.SnapshotCompact
//     (0.5) times the view's entities beyond the view (rewrites and
//     deletions: a chain that only grew the table is not compacted for
//     it), that holds 256 deltas, or whose base is
//     Config.SnapshotBaseAge old (1 hour), gets a new base, written beside
//     the deltas after a delta at its position (one base and one delta
//     at a time per table). Each file is written to a temporary name,
//     fsynced and renamed; once a base is written the deltas before it and
//     the bases but the one before it are removed. On start each applier
//     loads the chain that reaches furthest into its view before it
//     replays, then replays from the next position; the declared
//     projections attached to the table are derived from the loaded view
//     under dmu in the same step, so they are ready with it.
//   - Shared snapshots (snapshare.go): with Config.SnapshotStore set, the
//     goroutine that wrote a file also puts it in that JetStream object
//     store (OpenSnapshotStore: <PREFIX>_SNAPSHOTS), a base or a delta as
//     an object of its own (<lowercase name>.<epoch>.<seq>.base or
//     .delta) with its position, kind and the position a delta follows
//     in its metadata; a delta only when the store holds what it follows.
//     On start the store's objects are candidates of the chain beside the
//     files, downloaded into the table's directory (temporary name, fsync,
//     rename) when their turn comes. After a base is put, the store keeps
//     the newest two bases with the deltas after the older, the horizon
//     base (the newest before the stream's first sequence, read then),
//     and with a retention the newest base before the pruner's next cut
//     and a few spread towards the newest (sharedKept); it removes the
//     rest. SharedBases lists the bases, where the journal's pruning may
//     cut. A dropped table's objects go
//     with its files; on start the objects of incarnations the catalog no
//     longer holds are removed. The single object per incarnation that
//     earlier versions shared (SharedSnapshotName) is read as a base.
//   - AsOf (asof.go) returns a table's view as it was at an earlier
//     journal position: a view of its own, loaded from the newest chain at
//     or before the position (the node's files, else the store's) and
//     replayed from the journal after it (from its first record without
//     one) with the applier's checks, within limits (records replayed per
//     read, replays at once), and kept for a while so that the pages of an
//     as-of query replay once.
//
// # Applying
//
// An applier reads its table's stream with an ordered consumer and applies
// records strictly in journal order; a record delivered twice is ignored.
// Records this host is appending itself (Table.NoteAppending) are taken
// from memory by their nonce instead of being decoded again. The applier
// publishes a snapshot when the consumer has nothing pending, otherwise
// every Config.PublishEvery records (256); long replays log a progress
// line every Config.Progress (2 s).
//
// # Failures
//
//   - A table whose journal holds what its view cannot apply is faulted
//     (fault.go): a record that cannot be decoded (damaged, or written by
//     a newer version of Cairn), that is invalid by the write model's rules
//     (engine.ValidateRecord: keys, property names and values, sizes; not
//     checked again for records this host appended itself), or whose
//     partition key is not its subject's; or missing records (a sequence
//     gap, or a stream whose first record is beyond the view: purged or
//     deleted behind Cairn's back; while the view follows, each applier
//     also checks its stream every Config.HistoryCheck, 30 s, so a purge
//     of records it had already applied faults the table then). History
//     is never skipped: the view
//     stops at the last good record and nothing of the bad one is applied.
//     Table.Fault says which record, why and when (also in Table.Load, so
//     the $load endpoint shows it); Table.Err, WaitSeq, WaitTableReady and
//     Lookup answer TableFaulted, so the committer refuses the table's
//     commands at once and the front doors its reads; the log says "table
//     faulted" with the table, the sequence and the error. Ready does not
//     wait for a faulted table: the others serve.
//   - A snapshot file is never trusted: one that is damaged or truncated
//     (CRC-32C), of a newer format, of another table or incarnation (its
//     header's name and epoch), beyond the stream's last record or before
//     records that were purged, or (a delta) that does not follow the
//     position its name says or does not fit the view it is applied to
//     (the command ids it keeps, the entities it leaves) is passed over
//     with a warning "snapshot ignored" naming the file and why; a delta
//     is applied to a copy (O(1) B-tree copies), so the view stays at the
//     previous point and another delta from there, another base, then the
//     whole journal are tried. A file that cannot be written is logged
//     ("snapshot not written", counted in /metrics); the chain is then
//     begun again with a base, and the view goes on. No file is used for
//     a stream that lost records (a purge or a deleted message): the
//     full replay faults the table at once, as without snapshots.
//     Temporary files a crash left, and the directories of tables no
//     longer in the catalog, are removed when the catalog is loaded; a
//     crash during a write leaves the chain as it was before it.
//   - A shared snapshot is never trusted either: an object whose metadata
//     has no usable position or kind, or one beyond the stream's last
//     record or (a base) before purged records, is not downloaded; one
//     that fails a check of a file once downloaded (or whose header's
//     position is not its metadata's) has its file removed; either way a
//     warning "shared snapshot ignored" names the object and why, and the
//     other candidates, then the journal, are used. A store that cannot
//     be read or written is logged ("shared snapshots not read",
//     "snapshot not shared", "shared snapshots not collected") and the
//     views go on with their own files.
//   - A catalog record that cannot be used (undecodable, on another name's
//     subject, a bad table name, an unknown kind, a creation of a live
//     table or a deletion of a missing one) is skipped with an error log
//     line naming its sequence and counted (CatalogSkipped); the catalog's
//     later records still apply and Run goes on.
//   - JetStream errors that pass (a timeout, a leader election, a lost
//     connection) are retried with back-off from 50 ms to 2 s, each logged
//     as "retrying"; an applier resumes after the last record it applied.
//   - A table's stream missing (deleted behind Cairn's back) faults it
//     with Fault.StreamMissing; a catalog stream missing makes the catalog
//     follower retry, one request a try, until it is there again.
//     Views.Missing reports both from the views' state, for the node's
//     readiness: neither comes back by itself, the records are gone.
//   - A dropped table's view fails its waiters with TableNotFound; when the
//     drop arrives while Run runs, Run deletes the table's stream too, in
//     case the host that dropped it crashed first. A table's stream that
//     does not appear within 5 s is created if the table's catalog record
//     is younger than Config.StreamGrace (1 minute: its creator crashed
//     in between); an older table without its stream is faulted.
//
// # Costs
//
// Figures from docs/PERFORMANCE.md (go run ./cmd/cairn-bench, 2 cores) and
// from this package's benchmarks (go test ./projections/ -run x -bench .),
// on a shared two-core machine where figures move by ±30 % or more:
//
//   - Memory: about 1,058 bytes per entity of ten properties holding about
//     1 KB of values (1.06× the entity in msgpack with its keys;
//     PERFORMANCE.md). A view holds each entity packed (engine.Packed):
//     one string with no pointers inside, so the collector has one object
//     to mark per entity, not two dozen. Readers pay a decode, which
//     allocates the entity and its property slice and shares the strings
//     with the packed form (engine.BenchmarkPacked); a filtered query
//     reads the properties its filter names in place
//     (engine.PackedFields) and decodes only the entities it returns:
//     about 50 ns per entity examined against 25–29 ns when views held
//     decoded entities (BenchmarkScan in query). Each remembered command id holds
//     about 140 bytes with a 36-character id (BenchmarkCommandIDMemory,
//     -benchtime 100000x) for Config.DedupWindow of journal time (2
//     minutes). Read counters are kept for at most 100,000 partitions per
//     table.
//   - Waits (Await): 80 bytes a wait for a position, 130 for one
//     partition (BenchmarkAwait); a publish wakes only the waits it
//     satisfies, O(log n) each, so waits far ahead cost it nothing
//     (BenchmarkPublishWithWaits: 1.5 µs per record published without
//     waits, 1.9 µs with 10,000 waiting for a position, 2.9 µs with
//     10,000 waiting for another partition, which makes the applier
//     note the partitions it applies).
//   - Snapshots: Publish is O(1), three B-tree Copy calls and an atomic
//     store. The price is paid by the writer: the first write after a
//     publish copies the B-tree nodes on its path, O(log n). Applying one
//     single-entity record and publishing after it took 1.4–5.8 µs at 1,000
//     entities and 4.0–11.7 µs at 100,000; publishing every 256 records,
//     0.55–0.87 µs and 1.1–1.3 µs (BenchmarkApplyPublish). A held
//     snapshot keeps alive the nodes that later writes replaced, so a
//     long-held one costs memory in proportion to the writes after it.
//   - Checks: every record this host did not append itself is validated
//     before it is applied (engine.ValidateRecord): 1.4–3.7 µs for a
//     record of one entity with ten 100-byte strings on the shared
//     two-core machine (BenchmarkValidateRecord in engine), against 6–12
//     µs per record of the whole replay below; the sequence and subject
//     checks are a comparison and one base64 encoding of the partition key.
//   - Replay: 117,658 records/s (80–173k across runs) of records holding
//     one ~1 KB entity each, 0.32–0.62 of reading the same stream with a
//     raw ordered consumer; with every record validated, 188,362 records/s,
//     0.50 of the raw consumer in the same run (PERFORMANCE.md; go run
//     ./cmd/cairn-bench); tables replay in parallel. With snapshot
//     files a view replays only the records after its newest file.
//   - Snapshot files (docs/PERFORMANCE.md; go run ./cmd/cairn-bench
//     start, start -kill, snapshots; BenchmarkSnapshotKinds): a start
//     costs the chain (its base and its deltas' entities, at about the
//     same 2.7–4.1 µs per 1 KB entity for either kind) plus the tail,
//     at most SnapshotEvery records or SnapshotBytes bytes and what the
//     write in progress at the crash let through. Writing costs the same
//     per entity (2.7–4.3 µs), and a chain of rewrites writes each entity
//     its deltas hold about 1 + 1/SnapshotCompact times (3 at the
//     default) counting the bases it makes; a chain of inserts, once and
//     the hourly base. Writing reads only the published snapshot:
//     what it costs the applier is one Publish and a set insert per
//     entity written (the note of touched keys, at most
//     max(SnapshotCompact × the view's entities, SnapshotEvery) of them,
//     each its keys' bytes plus 10 to 20: keyset.go), plus the memory
//     that the writes made meanwhile keep alive (during a base's write,
//     every node the writes replace). Loading reads each file twice (the checksum, then the
//     decoding). The command ids' eviction list is shared with published
//     snapshots (never modified in place), so evicted ids stay reachable
//     until the list is next moved. Sharing reads each file once more and
//     sends it to the store (one or two metadata reads first, a listing
//     and a stream-info request after a base), in the goroutine that
//     wrote it: that kind's next file waits for the upload, the applier
//     does not; a start from the store first downloads the chain's
//     objects whole; the upload of the snapshot written at a clean stop
//     holds the stop for at most 10 s.
//   - As-of reads (AsOf): the load of the newest chain at or before the
//     position (as a start's, a shared base downloaded first), then a
//     replay of the records after it into a view of its own, every record
//     decoded and validated: 58,000–188,000 records/s (median about
//     95,000 over eight runs) for records of one ~1 KB entity, about
//     0.1–0.35 s for 20,000 records (BenchmarkAsOf, -benchtime 10x, run
//     eight times); the view's own position costs nothing, a kept view a
//     map lookup. Bounds: Config.AsOfMaxRecords records replayed per read
//     after its snapshot (1,000,000: some 5–17 s at those rates), Config.AsOfReplays at
//     once (2, others refused with ServerBusy), Config.AsOfTimeout per
//     replay (2 minutes). Memory: each as-of view is a full view of the
//     table as it was (the figure per entity above, shared with nothing),
//     for Config.AsOfCacheTTL after its last use (30 s) or while a query
//     holds it; at most Config.AsOfCache kept (4) plus those replaying,
//     so at the defaults up to six views of up to a million entities each.
//   - Declared projections (PERFORMANCE.md, go run ./cmd/cairn-bench
//     projections): an index costs the applier 1–2 µs per record when it
//     publishes once per burst, 1.5–4 µs when it publishes after every
//     record in quiet runs (the copy-on-write of the index's B-tree path,
//     as for the source; BenchmarkApplyWithIndexes); inserts with 1 and 3
//     indexes ran at 0.89–1.06 and 0.62–0.95 of the rate without (medians
//     of rounds on a noisy machine). A projection is published with its
//     source, so a second node shows it as soon as its source (p99
//     2.1–6.4 ms at half load in four runs: the source's own lag, bound
//     by the journal's delivery, p99 6.8 ms to a raw consumer). A
//     build of an index runs at 0.8–1.37 M source entities/s on a million
//     (BenchmarkBuildIndex 0.45–1.0 M/s); an aggregate's writes each group
//     once, after its scan.
package projections
