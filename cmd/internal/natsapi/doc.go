// Package natsapi is the NATS front door: it answers Cairn's command
// protocol (docs/PROTOCOL.md): entity commands, batches, point reads and
// queries (query.go: pages of a table's entities with the HTTP API's
// filter, planner and snapshot holds) on <prefix>.cmd.<Table>, table
// commands on <prefix>.tables, pages of a table's change feed on
// <prefix>.changes.<Table> (read from the journal, not the view, so they
// hold every change since the table was created). Every node subscribes
// in one queue group, so a request is handled by exactly one node; bodies
// are msgpack or JSON and the reply uses the request's encoding, except
// that an error answering a body that is not msgpack (text typed at a
// terminal) is JSON. Writes go to the committer (the same path as the HTTP
// API's); reads and queries are answered from this node's view.
//
// It answers on the connection it is given, the node's serving user's,
// which may publish nothing but replies; a request whose reply subject is
// not an inbox (wire.ReplyAllowed) is dropped before it is decoded,
// counted and logged (Config.Replies), so a request naming the JetStream
// API, a bucket or a journal as its reply makes the node do nothing.
//
// What fails, and what the client sees: an undecodable or invalid request
// is answered with a coded error (InvalidInput and the like) and nothing is
// stored, and so is a command with an outbox message to a NATS subject the
// operator does not allow (Config.Outbox, -outbox-subjects), or with a
// reference to a large value that names no value of its entity in the
// store (Config.Values, values.Check: one store request per reference,
// made on the subscription's goroutine, as the HTTP door makes it); a table
// command that does not finish within 30 s is answered with InternalError
// naming the deadline (the table may still have been created or deleted:
// ListTables tells); a request published without a reply subject is
// executed but not answered. At shutdown the subscriptions drain: requests
// already received are answered (5 s at the most), new ones go to the
// other nodes of the queue group; then requests still waiting for a
// change are answered at once, from the view (a change feed long-poll
// with what it has, a read of a position with ServerBusy), and Run
// returns once every request it took is answered.
//
// Waiting and working are bounded apart (wait.go), so that a flood of one
// cannot refuse the other. A request that waits for a table's view to
// move (a change feed long-poll with nothing to read yet, a Retrieve or
// Query of a position the view has not reached) registers on this node's
// view (projections.Table.Await) and holds no goroutine and no JetStream
// consumer: at most 65,536 wait at once, and beyond that a waiting request
// is refused with ServerBusy. When the view moves, up to 16 wake workers
// serve the woken requests, one journal read for all the feed requests
// alike (table, position, size, partitions); when a wait's time runs
// out, one goroutine answers it from the view. A request that works (a
// feed page to read now, a Query, a Retrieve of the past or of a
// position) runs on a goroutine of its own, at most 1,024 at once,
// beyond that ServerBusy. Every refusal is a coded ServerBusy, counted
// by reason (WriteMetrics: cairn_nats_requests_refused_total) and logged
// at most once every 10 s.
//
// What it costs: one decode, one submit and one encode per request; the
// subscriptions (GOMAXPROCS of them on the command subject) each deliver
// on their own goroutine, with a pending limit of 1 Mi messages / 1 GiB so
// that a slow node queues rather than drops. A waiting request holds
// 520-600 bytes (its message, the decoded request, the registration;
// BenchmarkWaitingRequests in cmd/internal/node) and costs the view's
// publishes nothing until its position comes. A change feed page read
// from the journal costs a short-lived consumer on the table's stream (at
// most 8 per table at once on a node: journal.Read), a Query, and a
// Retrieve of the past, a goroutine. A Query page walks at most 5 s and
// 1,000 entities, and its snapshot stays held 30 s for the next page
// (4,096 at most; a held snapshot keeps the entities it saw alive).
// docs/PERFORMANCE.md has the figures (go run ./cmd/cairn-bench).
package natsapi
