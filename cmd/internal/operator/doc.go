// Package operator guards a node's operators' endpoints — the functions and
// queues API under /$cairn/ and /metrics — with the operator token.
//
// The token is a random secret a node creates in its data directory on
// first start (<data>/operator.token, mode 0600, kept across restarts), or
// one the operator passes (-operator-token / CAIRN_OPERATOR_TOKEN; nodes
// sharing a NATS system can then share it). A request must carry
// "Authorization: Bearer <token>"; the comparison is in constant time.
// Anything else is refused before the endpoint runs: 401
// OperatorAuthenticationFailed without or with a wrong token, 403
// OriginNotAllowed when the request has an Origin header that is not
// configured by name (cmd/internal/cors) nor the node's own origin (its
// pages, the console at /$cairn/console/, still need the token), so that no web page a user opens
// can enqueue, requeue or delete messages or read the metrics. A browser
// cannot send the Authorization header cross-origin without a preflight,
// and the preflight is answered only for configured origins.
//
// What fails: a data directory that cannot be written, or a token file
// that is empty, stops the node at start. A token file readable by others
// is used, with a warning. The cost per request is one SHA-256 of the
// presented token.
package operator
