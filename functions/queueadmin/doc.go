// Package queueadmin is the operators' side of the queue stream: what the
// queues hold and what an operator does to them. Depths lists every queue
// holding messages with its oldest message's age (and WriteMetrics puts
// them on /metrics); Peek shows a queue's messages without taking them;
// Purge empties a queue; Poison, PoisonMessage, Requeue and Delete read
// and act on a poison queue's messages, BulkPoison on those a
// PoisonFilter selects. The HTTP API under /$cairn/ (functions/admin) and
// the command line (host poison) call it.
//
// # Where the cut runs, and why
//
// The stream itself is the runtime's (package functions, queues.go):
// the runner opens it, publishes the functions' messages and timer ticks
// to it, reads one queue's length for a function's queueBacklog, and
// moves failed messages to poison queues, writing the headers a poison
// message carries (functions.HeaderError and the others). This package
// only reads what the runtime wrote and acts on it, so it imports the
// runtime and the runtime never imports it: the runner and its triggers
// do not know that operators exist.
//
// What it needs of the stream goes through four exported methods of
// functions.Queues, each documented there: Stream (the handle, to read
// and delete messages and ask the stream's information), Prefix (the
// subjects and the stream's name), Publish (a requeue is sent exactly as
// the runner sends a message, with an id so that it is sent once, and a
// full queue refuses it with QueueBacklogExceeded) and PurgeSubject (the
// runtime purges the subjects that name no queue with it when it opens
// the stream). HeaderRequeued is the one header this package writes, so
// it is declared here.
//
// # What fails, and what the caller sees
//
//   - A bad queue name is an error that says what is wrong (InvalidInput
//     from Purge and BulkPoison), and nothing is read or changed.
//   - A poison message that does not exist, or is on another queue, is
//     ErrNoMessage.
//   - A requeue to a full queue, or into a full stream, is
//     QueueBacklogExceeded, and the message stays in the poison queue. A
//     requeue repeated after a crash does not send the message twice:
//     its id is derived from its poison sequence.
//   - A bulk action that fails midway returns what it did and the error;
//     what it did stays done.
//   - Anything else is the stream's failure, returned as it is.
//
// # What it costs
//
// An Admin holds no goroutine. Reading a message is one direct get (Peek,
// Poison and BulkPoison walk the queue one message at a time); Depths is
// one stream information request with the subjects and one direct get per
// queue (the maxAgedQueues deepest); WriteMetrics reads Depths at most
// every depthEvery and keeps up to maxKnownQueues drained queues at 0;
// Purge is one JetStream API request.
package queueadmin
