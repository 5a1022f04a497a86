// Package functions is the function runner of a Cairn node: it runs user
// functions next to the data. Work that one command cannot do — archiving,
// secondary indexes in other partitions, denormalising — is written as a
// function, deployed without a restart, fed by a queue, a table's change
// feed, a timer or a direct request, and delivered at least once with a
// dequeue count, back-off between attempts and a poison queue. Its writes
// become commands with ids derived from the trigger, so a retried delivery
// applies each write once. docs/FUNCTIONS.md is the user's guide; this
// comment is the map of the code.
//
// # One delivery, step by step
//
//  1. A trigger takes a delivery: a message pulled from the queue stream
//     (trigger_queue.go; timer ticks are queue messages, trigger_timer.go),
//     a journal record of a table (trigger_table.go), or a NATS request
//     (trigger_direct.go). The pull loop shared by queues and tables is in
//     delivery.go.
//  2. retryOrPoison (retry.go), a pure function of the dequeue count and
//     the manifest's settings, decides whether it runs: a delivery whose
//     count is already past the maximum (its earlier deliveries never
//     finished: their node died) is moved to the poison queue without
//     running (poison.go).
//  3. The runner takes the function's current version and runs it on an
//     Invocation (invoke.go): reads see the views plus the invocation's own
//     pending writes; writes and messages are collected (invocation.go;
//     call.go answers a WebAssembly guest's runner calls).
//  4. If the function returned nil, the writes are committed, one command
//     per partition, then the messages published. A commit refused because
//     the data changed runs the function again, three times at most.
//  5. The delivery is settled: acknowledged; or, as retryOrPoison decides,
//     delivered again after a back-off, or moved to the poison queue at the
//     maximum dequeue count.
//
// The runner has one lifecycle: NewRunner starts nothing; Run opens what it
// needs, starts its goroutines, closes Ready once it serves, and when its
// context ends stops the triggers, lets the deliveries already taken
// finish and returns after every goroutine it started.
//
// The rest: runner.go (the Runner and its lifecycle), config.go,
// dependencies.go (the Committer and Views the runner needs of the node),
// handler.go (Handler, NativeFunc, Sandbox), function.go (a deployed
// function and its versions), deploy.go (loading what the registry
// announces), loadreport.go (what each node reports of each load),
// hoststatus.go (what each node runs, on request), registry.go and
// manifest.go (what is deployed), queues.go (the queue stream: opening
// it, its caps, publishing to it, one queue's length), poison.go (moving
// a failed delivery to its poison queue, and the headers it carries),
// fnlogs.go (each function's latest log lines), metrics.go (metrics_fn.go,
// each function's counters for /metrics and the API), archive.go (the
// built-in archive function), limits.go (a version's rates and queue
// backlog), settings.go, settings_seal.go and settingscache.go (the
// functions' settings and sealed secrets, and each runner's copy).
//
// # What is not here
//
// This package is the runtime: what runs functions and feeds them. The
// operators' side lives in two packages that import it, and it imports
// neither: functions/queueadmin (the queues' depths, peeking, purging,
// and the poison queues' listing, requeue and delete, one by one or in
// bulk) and functions/admin (the HTTP API under /$cairn/). The cut runs
// where the runtime stops needing a thing: the runner publishes to the
// queue stream and reads one queue's length, so the stream stays here;
// it writes poison messages but never reads them back, so reading them
// is queueadmin's. What the operators' side needs of the runtime is
// exported and documented (Queues.Stream, Publish, PurgeSubject, Prefix;
// Runner.Running, Loaded, Manifest, FunctionTotals, FunctionLogs). Since
// both packages import this one, the compiler keeps the direction: an
// import back would be a cycle. The load reports and host statuses stay
// here, their readers (SubscribeLoadReports, GatherHostStatus) included:
// the runner publishes them, and a reader is the other half of the same
// subject and format.
//
// # What fails, and what the user sees
//
//   - A function that returns an error, panics, traps, runs out of memory
//     or time, or whose commit fails: the attempt is logged with its dequeue
//     count, delivered again after backoffMin × 2^(n-1) (at most
//     backoffMax), and the attempt with dequeue count maxDequeueCount moves
//     the message to <queue>-poison with the error in its Cairn-Error
//     header. /metrics counts cairn_function_failures_total and
//     cairn_function_poisoned_total. A direct request is not retried: its
//     reply carries the error in Cairn-Error.
//   - A node that dies during a delivery: JetStream delivers the message
//     again, to any node, 5 s after the node last said it was working on
//     it (every 5/3 s, progress.go), and counts
//     the lost delivery; a message that keeps killing its node is poisoned
//     without running once its count is past the maximum.
//   - A change of a table that keeps failing: recorded in
//     <function>-changes-poison and skipped, so the feed does not wedge.
//   - A version that cannot be loaded (a bad manifest, a missing module, a
//     module the sandbox refuses, one over the node's memory budget):
//     logged as "function not loaded", kept as the runner's LoadFailure
//     (loadError in GET /$cairn/functions) and reported on
//     <prefix>.events.functions.<name> (loadreport.go), where the deploy
//     command waits for it; the version before it keeps running. A
//     version loaded is reported there too, and every runner answers
//     <prefix>.events.functions-status with what it runs (hoststatus.go),
//     so that deploy waits for every host.
//   - A function past its enqueueRate or writeRate: its invocations wait
//     for the bucket (ServerBusy if the token comes after the timeout),
//     counted in cairn_function_throttled_total and logged at most every
//     10 s. An Enqueue to a queue holding the function's queueBacklog
//     fails with QueueBacklogExceeded (cairn_function_backlog_refused_total).
//   - A queue that holds the node's cap (-queue-max-messages), or a queue
//     stream that holds its bound of bytes (-queue-max-bytes): the queue
//     stream refuses the message, whoever publishes it (queues.go). The
//     runner's publishes fail with QueueBacklogExceeded: an Enqueue of the
//     operators' API answers 503, a function's message fails its
//     invocation, a timer tick is logged (cairn_queue_full_total). A full
//     poison queue refuses a move: the message stays on its queue,
//     unacknowledged, and the move is tried again after backoffMax
//     (cairn_function_poison_refused_total); a table feed waits at the
//     record.
//   - A lost connection to NATS: the pull loops, the consumers and the
//     registry watch try again every few seconds and log a warning;
//     deliveries in flight are delivered again by JetStream.
//   - A registry that cannot be watched when the runner starts: Run
//     returns the watch's error without closing Ready, and the node does
//     not start.
//
// # What it costs
//
// Each function with a trigger has one durable consumer, shared by every
// node; each node watches the registry's KV bucket. A queue delivery costs
// a pull, the invocation, one command per partition written (each through
// the committer and the journal) and an acknowledgement that waits for the
// server (DoubleAck). A function runs at most `concurrency` invocations at
// once on each node, and a WebAssembly function keeps as many instances of
// memoryMB each, reserved against the node's sandbox budget. An Enqueue
// reads the destination queue's length from the server once per queue and
// invocation; a rate costs nothing until its bucket is empty. The cap of
// every queue is the server's per-subject count, checked as it stores a
// message. Each load of a version costs one plain NATS message (its
// report). A table feed has one record in flight, so it advances one
// invocation per record. A failed attempt costs its back-off; a conflict,
// a rerun after 20 ms, then 80 ms. What the sandbox costs per invocation
// is in functions/wasm.
package functions
