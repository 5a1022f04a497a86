package engine

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxSubjectLen is the longest NATS subject an outbox message may name, in
// bytes.
const MaxSubjectLen = 255

// ValidateSubject checks the NATS subject of an outbox message: a literal
// subject (tokens separated by dots, none empty, no wildcard `*` or `>`
// anywhere, no whitespace or control character, valid UTF-8, at most
// MaxSubjectLen bytes) that does not start with `$` or `_`. Those are the
// server's own (the JetStream API, key-value and object stores, the system
// account) and the inboxes of replies: the outbox relay publishes with
// the node's rights, so no command may name them, whatever an operator
// allows.
func ValidateSubject(s string) error {
	if err := validSubject(s, false); err != nil {
		return Errorf(CodeInvalidInput, "subject %q %s", s, err)
	}
	if s[0] == '$' || s[0] == '_' {
		return Errorf(CodeInvalidInput, "subject %q is reserved: subjects starting with $ (the JetStream API, key-value and object stores, the system account) or _ (reply inboxes) cannot be an outbox message's destination", s)
	}
	return nil
}

// ValidateSubjectPattern checks a subject pattern (an operator's list of
// the subjects messages may name): as ValidateSubject's literal subjects,
// except that a token may be the wildcard `*` (one token) and the last
// token may be `>` (one or more tokens).
func ValidateSubjectPattern(p string) error {
	if err := validSubject(p, true); err != nil {
		return Errorf(CodeInvalidInput, "subject pattern %q %s", p, err)
	}
	return nil
}

type subjectError string

func (e subjectError) Error() string { return string(e) }

// validSubject checks the syntax of a subject, or of a pattern when
// wildcards are allowed.
func validSubject(s string, wildcards bool) error {
	switch {
	case s == "":
		return subjectError("is empty")
	case len(s) > MaxSubjectLen:
		return subjectError("is longer than 255 bytes")
	case !utf8.ValidString(s):
		return subjectError("is not valid UTF-8")
	}
	tokens := strings.Split(s, ".")
	for i, token := range tokens {
		if token == "" {
			return subjectError("has an empty token (a dot at the start or end, or two dots)")
		}
		for _, r := range token {
			if r <= ' ' || r == 0x7f || r >= 0x80 && r <= 0x9f || r == 0xa0 || r == 0x2028 || r == 0x2029 {
				return subjectError("contains whitespace or a control character")
			}
		}
		if !strings.ContainsAny(token, "*>") {
			continue
		}
		switch {
		case !wildcards:
			return subjectError("contains a wildcard (* or >): a message goes to one subject")
		case token == "*", token == ">" && i == len(tokens)-1:
		default:
			return subjectError("has a wildcard that is not a whole token (* anywhere, > only last)")
		}
	}
	return nil
}

// SubjectMatch reports whether the literal subject matches the pattern,
// token by token: `*` matches any one token, a final `>` one or more.
// Both are assumed valid (ValidateSubject, ValidateSubjectPattern).
func SubjectMatch(pattern, subject string) bool {
	for {
		p, prest, pmore := strings.Cut(pattern, ".")
		if p == ">" {
			return subject != ""
		}
		s, srest, smore := strings.Cut(subject, ".")
		if subject == "" || p != "*" && p != s {
			return false
		}
		if !pmore || !smore {
			return pmore == smore
		}
		pattern, subject = prest, srest
	}
}

// SubjectMatchAny reports whether subject matches one of patterns
// (SubjectMatch).
func SubjectMatchAny(patterns []string, subject string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return SubjectMatch(p, subject) })
}
