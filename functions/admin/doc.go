// Package admin is the operators' HTTP API of functions and queues, under
// /$cairn/ (Prefix lists the routes; docs/FUNCTIONS.md is the user's
// reference): the functions deployed and the built-ins, their history,
// rollback, test invocation, latest log lines, settings and secrets
// (settings.go: secrets by name only), the runner's counters,
// and the queues' depths, messages and poison queues.
//
// It is the edge of the functions, and imports runs one way: admin
// imports the runtime (package functions: the Runner, its registry and
// queue stream, the Manifest) and the queues' administration
// (functions/queueadmin); neither imports admin, nor anything of
// net/http for it. What the API shows of a runner, it asks through the
// runner's exported methods (Running, Loaded, Manifest, FunctionTotals,
// FunctionLogs, LoadFailure, Stats), which the node's other parts may use
// as well; what it does to queues goes through queueadmin.
//
// # What fails, and what the caller sees
//
// Every answer is JSON. A failure is {"code", "error"} with a status: 400
// InvalidInput for a bad name, sequence, filter or body; 404
// ResourceNotFound for a function that is not deployed or a poison
// message that does not exist; 413 RequestBodyTooLarge for a setting's
// value past its bound; 503 QueueBacklogExceeded when a queue, or
// the queue stream, is full (counted in the runner's QueueFull); 504
// OperationTimedOut when a test invocation got no reply in time; 500
// InternalError when the registry or the queue stream failed, except in
// the poison verbs, peek, history and rollback, which answer any failure
// but a missing one 400 (status in ServeHTTP; codedStatus is the mapping
// the others use).
//
// # What it costs
//
// Nothing between requests: a Handler holds no goroutine and no state of
// its own. Each request costs what its verb costs (queueadmin says so per
// verb); GET /$cairn/queues reads the stream's information and the
// registry's manifests.
package admin
