// Package httpapi serves the views over HTTP in the Azure Tables REST
// protocol, so that the official SDKs (Go aztables, JavaScript
// @azure/data-tables, .NET, Python) work against Cairn with nothing changed
// but the endpoint.
//
// Reads come from the views' snapshots and never take a writer's lock.
// Writes are a gateway: each request becomes the same engine.Command a NATS
// client would send and goes through the committer, so both front doors
// share ETags, conflicts, idempotency and the journal.
//
// A request is handled in these steps:
//
//  0. A request with an Origin header (a browser's) from an origin not in
//     Config.CORS is refused, and only those origins' preflights are
//     answered; without configured origins no Access-Control-* header is
//     ever sent (cmd/internal/cors).
//  1. The path names the account (path-style, like the Azure emulator:
//     /<account>/<resource>); the account's key verifies the SharedKey or
//     SharedKeyLite signature, or a shared access signature in the query.
//  2. The resource selects the operation: Tables, Tables('t'), $batch,
//     t or t() (query or insert), t(PartitionKey='p',RowKey='r').
//  3. A read waits, if the request names a journal position
//     (X-Cairn-Position), until the table's view has reached it, then reads
//     one snapshot; one that names an earlier position (X-Cairn-As-Of)
//     reads the view as of it, rebuilt by the views from the journal
//     (projections.Views.AsOf). A query holds its snapshot for the next pages: the
//     continuation token names it, so paging through a table that is being
//     written sees neither duplicates nor gaps.
//  4. A write is submitted to the committer and answered when it is
//     visible in this host's view; the reply carries its journal position.
//
// The extensions to the protocol (read-your-writes positions, reads as of
// an earlier position, descending
// order, outbox messages on writes with X-Cairn-Messages, load counters,
// /metrics) are described in docs/HTTP.md.
//
// What fails, and what the client sees: a bad signature or an expired or
// too narrow SAS is 403 AuthenticationFailed/AuthorizationFailure; a
// malformed body, key or filter is 400 with Azure's code and a message
// naming the fault; a write that cannot be committed in time (30 s) is 500
// OperationTimedOut, and its outcome is then found by retrying with the
// same x-ms-client-request-id; a read whose X-Cairn-Position the view does
// not reach within 10 s is 503 PositionNotReached; an X-Cairn-As-Of outside
// the journal, beyond the node's replay limit or whose history was purged
// is 400 InvalidAsOfPosition, 400 AsOfTooFar or 410 HistoryTruncated, and
// one that finds two replays running is 503 ServerBusy. A query page stops at
// 1,000 entities or after 5 s with a continuation token. A body that stops
// arriving (10 s without bytes, or slower than 16 KiB/s overall) is
// OperationTimedOut on a connection then closed; a body over 5 MiB, or
// announced so, is 413 RequestBodyTooLarge; a $filter over 16 KiB is 400
// InvalidInput. An X-Cairn-Messages header that is malformed, names a
// subject the node does not allow (Config.Outbox, -outbox-subjects), comes
// with a SAS or with a request that is not a write is refused (400, or 403
// for the SAS), one over 64 KiB is 431 RequestHeaderFieldsTooLarge.
// Nothing in a refused request is stored.
//
// What it costs: a read never leaves the host and never takes a lock (a
// snapshot is an O(1) copy-on-write of the B-trees); a held snapshot
// (30 s after each page, 4,096 at most) keeps the entities it saw alive
// until it is released, and a timer releases it when it expires; bodies
// are read whole, into a buffer that grows with the bytes that arrive. The measured
// figures, side by side with Azurite, are in docs/PERFORMANCE.md
// (go run ./cmd/cairn-bench http).
package httpapi
