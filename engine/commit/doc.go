// Package commit is the committer: it turns validated commands into journal
// records, one partition at a time, and answers each command once its
// record is stored and visible in this host's view. It is the only writer
// of table journals in a host; both front doors and the function host
// submit to it.
//
// It depends on two small interfaces of its own, Journal and Views, which
// say exactly what it needs; it imports neither package journal nor
// package projections nor NATS. The composition root wires the real ones.
//
// # Steps
//
// Commands queue per partition; a goroutine per busy partition takes what
// is queued (at most Config.MaxGroup commands or Config.MaxRecordBytes of
// entities) and, for that group:
//
//  1. Takes the partition as the view shows it now (Table.Partition) and
//     its last sequence E.
//  2. Decides the commands in order with engine.Decide against that state
//     plus an engine.Overlay of the effects decided before them; commands
//     whose client id the view already holds are answered from the record
//     that committed them. Each event is given the version its entity had
//     before it (Event.Prev): the view's, or an earlier event of the same
//     record for an entity written twice in one group. The round's clock
//     (Config.Now) is the decision's time for the large values' references
//     (engine.Claims, with Config.ClaimWindow).
//  3. Appends one record with the expected last sequence E.
//  4. Stored: waits until the view has applied the record, then answers
//     each command with its own result (ETags from the record's position).
//     Refused because another writer appended first: lets the view catch
//     up and decides again. Unknown outcome: settles it by the partition's
//     first record after E before deciding anything again (append.go).
//
// Table creation and deletion go through the catalog (tables.go).
//
// # Lifecycle
//
// New starts nothing. Run takes commands until its context ends; then it
// refuses new ones, answers those already taken and returns once its
// goroutines have exited, abandoning commands still in flight after
// Config.DrainTimeout.
//
// # Failures, and what the caller sees
//
//   - An invalid command: its coded error (InvalidInput, EntityTooLarge, …)
//     at once, from the caller's goroutine.
//   - Before Run, once Run's context has ended, or abandoned by Run before
//     its append: ServerBusy; nothing was applied.
//   - The decider's refusal (EntityAlreadyExists, UpdateConditionNotSatisfied,
//     ResourceNotFound, …): that error, after the group's append.
//   - The table does not exist or was deleted under the command:
//     TableNotFound. The table is faulted (its journal holds a record the
//     view cannot apply, see package projections): TableFaulted at once,
//     before any append. A view stopped for another reason: InternalError.
//   - Appends refused Config.MaxAttempts times in a row (a partition
//     contended by other hosts): ServerBusy; nothing was applied.
//   - A command that waited past Config.Timeout before it was tried:
//     OperationTimedOut; nothing was applied.
//   - An append whose outcome is still unknown at the commands' deadline,
//     or when Run abandons it: OperationTimedOut, which says that the
//     command may or may not have been applied (as Azure's does). No
//     command whose record was stored is answered with any other error,
//     except a record stored whose visibility this host's view could not
//     reach in time: InternalError naming its journal position.
//
// # Cost
//
// One journal append (one JetStream round trip) per group, however many
// commands it holds: under load a partition's commands share appends. A
// partition takes one append at a time (JetStream allows one conditional
// write per subject in flight), so one partition's rate is bounded by the
// round trip; partitions run in parallel, one goroutine each while busy
// (a worker, which then waits up to a second to run the next partition
// that becomes busy).
// Every command also waits for this host's view to apply its record (the
// price of read-your-writes on the replying host). A command without an id
// gets a host-made one (nuid, not stored). An append of unknown outcome
// costs two journal requests per look (stream info, direct get) and an
// identical append per retry, with backoff from 2 ms to 256 ms; it is rare
// (a lost acknowledgement).
package commit
