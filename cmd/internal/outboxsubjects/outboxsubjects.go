// Package outboxsubjects is the operator's allowlist of the NATS subjects
// that outbox messages may name (-outbox-subjects), shared by the front
// doors so that NATS and HTTP accept exactly the same commands.
//
// The relay publishes a committed message with the node's rights, so a
// subject is accepted only when it is a valid literal subject that is not
// the server's or an inbox (engine.ValidateSubject: nothing under $ or _),
// is not under the node's own prefix (the journal, the catalog, commands
// and queues: a Cairn queue is named with "queue"), and matches one of the
// operator's patterns. With no patterns (the default) only Cairn queues
// are accepted. A refusal is InvalidInput naming the flag, before
// anything is submitted, so nothing is stored.
//
// What it costs: one token-wise comparison per message and pattern, only
// for commands that carry messages to subjects.
package outboxsubjects

import (
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/engine"
)

// Flag is the command-line flag that sets the allowlist, named in refusals.
const Flag = "-outbox-subjects"

// Allowlist is a set of subject patterns. The nil *Allowlist allows no
// subject (Cairn queues only).
type Allowlist struct {
	prefix   string
	patterns []string
}

// New checks patterns (NATS subject patterns: `*` one token, a final `>`
// the rest) and returns the allowlist of a node whose subjects start with
// prefix. A pattern that is not a valid pattern, that starts with $ or _,
// or that is under the prefix (it could allow nothing) is an error naming
// it.
func New(prefix string, patterns []string) (*Allowlist, error) {
	a := &Allowlist{prefix: prefix}
	for _, p := range patterns {
		if err := engine.ValidateSubjectPattern(p); err != nil {
			return nil, fmt.Errorf("%s: %s", Flag, engine.AsError(err).Message)
		}
		if p[0] == '$' || p[0] == '_' {
			return nil, fmt.Errorf("%s: subject pattern %q names the server's own subjects ($) or inboxes (_), which outbox messages can never reach", Flag, p)
		}
		if first, _, _ := strings.Cut(p, "."); first == prefix {
			return nil, fmt.Errorf("%s: subject pattern %q is under the node's prefix %q, which outbox messages can never reach (name a Cairn queue with \"queue\")", Flag, p, prefix)
		}
		a.patterns = append(a.patterns, p)
	}
	return a, nil
}

// Patterns returns the allowed patterns.
func (a *Allowlist) Patterns() []string {
	if a == nil {
		return nil
	}
	return a.patterns
}

// Check refuses, with InvalidInput naming the message, the first message
// of a command of account that this node does not take: one to a subject
// it does not allow, or one to a Cairn queue from an account other than
// the development account. Queues are one namespace, the operator's: the
// functions that take them act on the development account's tables (and
// on any other a function names), so a message from another account
// could make them act for it; another account sends to the subjects the
// operator allows. Messages with a queue (even with a subject too) are
// otherwise left to engine.ValidateCommand, which the committer runs on
// every command.
func (a *Allowlist) Check(account string, msgs []engine.Message) error {
	for i := range msgs {
		if msgs[i].Queue != "" && account != "" && account != engine.DevAccount {
			return engine.Errorf(engine.CodeInvalidInput, "message %d: Cairn queues take messages of the development account's writes only (the functions behind them act on its tables); account %s sends to NATS subjects its operator allows with %s", i, account, Flag)
		}
		s := msgs[i].Subject
		if s == "" || msgs[i].Queue != "" {
			continue
		}
		if err := engine.ValidateSubject(s); err != nil {
			return engine.Errorf(engine.CodeInvalidInput, "message %d: %s", i, engine.AsError(err).Message)
		}
		if a == nil || len(a.patterns) == 0 {
			return engine.Errorf(engine.CodeInvalidInput, "message %d: subject %q is not allowed: this node accepts messages to Cairn queues only (its operator allows NATS subjects with %s)", i, s, Flag)
		}
		if first, _, _ := strings.Cut(s, "."); first == a.prefix {
			return engine.Errorf(engine.CodeInvalidInput, "message %d: subject %q is under the node's own prefix %q (journal, catalog, commands, queues): name a Cairn queue with \"queue\"", i, s, a.prefix)
		}
		if !a.allows(s) {
			return engine.Errorf(engine.CodeInvalidInput, "message %d: subject %q is not allowed on this node: %s allows %s", i, s, Flag, strings.Join(a.patterns, ","))
		}
	}
	return nil
}

func (a *Allowlist) allows(subject string) bool { return engine.SubjectMatchAny(a.patterns, subject) }
