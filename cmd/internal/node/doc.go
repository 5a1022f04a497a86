// Package node is the composition root: it assembles one Cairn node, the
// process that cmd/host runs, from the embedded NATS server (or a
// connection to an existing one), the journal, the views, the committer,
// the NATS and HTTP front doors and the function runner. cmd/host reads
// flags into a Config and calls Run; tests start nodes in-process the same
// way (nodetest.Start), or in a child process they can kill (nodetest.
// StartChild). Nothing below cmd/ imports it.
//
// Every long-running component has one lifecycle: its constructor starts
// nothing, Run(ctx) runs it until ctx ends and returns once everything it
// started has stopped, and Ready, where it has one, says when it serves. A
// group starts the components in the order of the data flow, each once the
// one before serves, and stops them in the reverse order, so that the
// front doors stop taking requests first, the committer answers the
// commands it has taken, and the views and the journal go last. The HTTP
// server runs from the moment the node listens until it stops, answering
// /healthz and /readyz throughout (health.go); the APIs behind it answer
// 503 until the components have started and once they stop.
//
// What fails: a configuration error or a busy port is returned before
// anything starts, and so is a users file (NATSUsers) that is bad or that
// others may read; a data directory locked by another node is refused.
// NATS servers not up yet, or a cluster still electing its leaders, are
// waited for as long as Run's context lasts (a "waiting for JetStream"
// line every 5 s), while a refused password or a server without JetStream
// stops the node at once (jswait.go). A component that stops on its own
// (the views on a catalog record they cannot decode), or the HTTP server
// failing, stops the whole node, and Run returns why. A SIGKILL loses
// nothing acknowledged: the journal is the state, and the next start
// replays it.
//
// What it costs: the start time is the views' replay of the journal (the
// figures are in docs/PERFORMANCE.md); a clean stop waits for the HTTP API
// requests in flight (10 s at most), the NATS subscriptions (5 s at most),
// the function invocations in hand (each bounded by its function's
// timeout) and the committer (10 s at most), one after the other, and at
// the end for the HTTP server (a request still running after the first
// 10 s gets 10 s more before its connection is closed). /readyz reads
// state the node keeps (one JetStream request every 2 s), no NATS round
// trip.
package node
