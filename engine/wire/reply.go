package wire

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
)

// NodeInboxPrefix is the first token of the reply subjects of the node
// user's connections (the node's own requests to JetStream, the operators'
// CLI).
const NodeInboxPrefix = "_CAIRN_INBOX"

// ReplyAllowed reports whether a node answers a request on reply: a reply
// subject must be an inbox, nothing else. Allowed are the subjects the
// server makes for a request that crossed an account import (_R_.…), the
// NATS clients' inboxes (_INBOX.…, and _INBOX_<user>.… of a service user
// with an inbox prefix of its own), and the node user's (NodeInboxPrefix).
// Each needs a token after the first, and every token is letters, digits,
// '-' and '_' (what inboxes are made of; so no wildcard). Anything else —
// the JetStream API, a bucket, the journal, the catalog, a queue — is
// refused: answering there would publish for the requester what it may
// not publish itself.
func ReplyAllowed(reply string) bool {
	first, rest, ok := strings.Cut(reply, ".")
	if !ok || rest == "" || !inboxToken(first) {
		return false
	}
	switch {
	case first == "_R_", first == "_INBOX", first == NodeInboxPrefix:
	case strings.HasPrefix(first, "_INBOX_") && len(first) > len("_INBOX_"):
	default:
		return false
	}
	for tok := range strings.SplitSeq(rest, ".") {
		if !inboxToken(tok) {
			return false
		}
	}
	return true
}

// inboxToken reports whether tok is a token an inbox is made of: one or
// more letters, digits, '-' and '_'.
func inboxToken(tok string) bool {
	if tok == "" {
		return false
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ReplyGuard drops the requests whose reply subject is not allowed
// (ReplyAllowed) before anything is done for them: it counts them and logs
// one line a second at most, so that a flood of them costs the log
// nothing. The zero value logs nowhere; it is safe for concurrent use.
type ReplyGuard struct {
	Log     *slog.Logger
	dropped atomic.Uint64
	// logged is when the last line was written (Unix nanoseconds), and
	// unlogged how many drops happened since.
	logged   atomic.Int64
	unlogged atomic.Uint64
}

// replyLogEvery is the least time between two of the guard's log lines.
const replyLogEvery = time.Second

// Allow reports whether a request on subject with reply may be served;
// when not, it counts and may log the drop. A request without a reply
// subject is allowed: it is served and not answered.
func (g *ReplyGuard) Allow(subject, reply string) bool {
	if reply == "" || ReplyAllowed(reply) {
		return true
	}
	g.dropped.Add(1)
	n := g.unlogged.Add(1)
	now := time.Now().UnixNano()
	last := g.logged.Load()
	if g.Log != nil && now-last >= int64(replyLogEvery) && g.logged.CompareAndSwap(last, now) {
		g.unlogged.Add(-n)
		g.Log.Warn("NATS request dropped: its reply subject is not an inbox (the node answers only on _INBOX.…, _INBOX_<user>.…, _R_.… and its own inbox)",
			"subject", subject, "reply", truncate(reply, 128), "dropped", n)
	}
	return false
}

// Dropped returns how many requests the guard dropped.
func (g *ReplyGuard) Dropped() uint64 { return g.dropped.Load() }

// WriteMetrics writes the guard's counter in the Prometheus text format.
func (g *ReplyGuard) WriteMetrics(w io.Writer) {
	fmt.Fprintf(w, "# HELP cairn_nats_requests_dropped_total NATS requests dropped unserved, by reason.\n# TYPE cairn_nats_requests_dropped_total counter\n")
	fmt.Fprintf(w, "cairn_nats_requests_dropped_total{reason=\"reply_subject\"} %d\n", g.Dropped())
}

// truncate cuts s to at most n bytes for a log line.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
