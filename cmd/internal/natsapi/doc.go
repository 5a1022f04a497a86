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
// operator does not allow (Config.Outbox, -outbox-subjects); a table
// command that does not finish within 30 s is answered with InternalError
// naming the deadline (the table may still have been created or deleted:
// ListTables tells); a request published without a reply subject is
// executed but not answered. At shutdown the subscriptions drain: requests
// already received are answered (5 s at the most), new ones go to the
// other nodes of the queue group; then change feed requests still waiting
// for a change (long-polls) are answered with what they have, and Run
// returns once they are.
//
// What it costs: one decode, one submit and one encode per request; the
// subscriptions (GOMAXPROCS of them on the command subject) each deliver
// on their own goroutine, with a pending limit of 1 Mi messages / 1 GiB so
// that a slow node queues rather than drops. A change feed request costs
// a goroutine and a short-lived consumer on the table's stream while it
// runs; a Query, and a Retrieve that waits for a position or reads the
// past, a goroutine (at most 1,024 of these requests at once; beyond that
// ServerBusy). A Query page walks at most 5 s and 1,000 entities, and its
// snapshot stays held 30 s for the next page (4,096 at most; a held
// snapshot keeps the entities it saw alive). docs/PERFORMANCE.md has the
// figures (go run ./cmd/cairn-bench).
package natsapi
