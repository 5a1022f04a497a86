package query

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tLiteral
	tLParen
	tRParen
	tError
)

type token struct {
	kind tokKind
	pos  int
	text string
	val  engine.Value
	err  string
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tLParen:
		return `"("`
	case tRParen:
		return `")"`
	}
	return strconv.Quote(t.text)
}

type lexer struct {
	s   string
	pos int
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || c >= '0' && c <= '9' }

// quoted reads a quoted literal starting at i (the opening quote), with
// two quotes standing for one.
func (l *lexer) quoted(i int) (string, int, bool) {
	var b strings.Builder
	for j := i + 1; j < len(l.s); j++ {
		if l.s[j] == '\'' {
			if j+1 < len(l.s) && l.s[j+1] == '\'' {
				b.WriteByte('\'')
				j++
				continue
			}
			return b.String(), j + 1, true
		}
		b.WriteByte(l.s[j])
	}
	return "", len(l.s), false
}

func (l *lexer) next() token {
	for l.pos < len(l.s) && (l.s[l.pos] == ' ' || l.s[l.pos] == '\t' || l.s[l.pos] == '\n' || l.s[l.pos] == '\r') {
		l.pos++
	}
	start := l.pos
	if l.pos >= len(l.s) {
		return token{kind: tEOF, pos: start}
	}
	c := l.s[l.pos]
	fail := func(format string, args ...any) token {
		l.pos = len(l.s)
		return token{kind: tError, pos: start, err: fmt.Sprintf(format, args...)}
	}
	switch {
	case c == '(':
		l.pos++
		return token{kind: tLParen, pos: start, text: "("}
	case c == ')':
		l.pos++
		return token{kind: tRParen, pos: start, text: ")"}
	case c == '\'':
		s, end, ok := l.quoted(l.pos)
		if !ok {
			return fail("string literal is not closed")
		}
		l.pos = end
		return token{kind: tLiteral, pos: start, text: l.s[start:end], val: engine.String(s)}
	case c == '-' || c >= '0' && c <= '9':
		return l.number(start)
	case isIdentStart(c):
		j := l.pos
		for j < len(l.s) && isIdentChar(l.s[j]) {
			j++
		}
		word := l.s[l.pos:j]
		if j < len(l.s) && l.s[j] == '\'' {
			return l.prefixed(start, word, j)
		}
		l.pos = j
		switch word {
		case "true", "false":
			return token{kind: tLiteral, pos: start, text: word, val: engine.Bool(word == "true")}
		}
		return token{kind: tIdent, pos: start, text: word}
	}
	return fail("unexpected character %q", c)
}

// prefixed reads datetime'…', guid'…', X'…' and binary'…'.
func (l *lexer) prefixed(start int, word string, q int) token {
	s, end, ok := l.quoted(q)
	l.pos = end
	text := l.s[start:end]
	bad := func(format string, args ...any) token {
		return token{kind: tError, pos: start, err: fmt.Sprintf(format, args...)}
	}
	if !ok {
		return bad("literal %s is not closed", word)
	}
	switch strings.ToLower(word) {
	case "datetime":
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return bad("datetime'%s' is not an RFC 3339 time such as datetime'2014-08-22T00:50:32Z'", s)
		}
		return token{kind: tLiteral, pos: start, text: text, val: engine.DateTime(t)}
	case "guid":
		g, err := engine.ParseGuid(s)
		if err != nil {
			return bad("guid'%s' is not a GUID", s)
		}
		return token{kind: tLiteral, pos: start, text: text, val: engine.Guid(g)}
	case "x", "binary":
		b, err := hex.DecodeString(s)
		if err != nil {
			if b, err = base64.StdEncoding.DecodeString(s); err != nil || word != "binary" {
				return bad("%s'%s' is not hexadecimal", word, s)
			}
		}
		return token{kind: tLiteral, pos: start, text: text, val: engine.Binary(b)}
	}
	return bad("unknown literal type %q (datetime, guid, X and binary are)", word)
}

func (l *lexer) number(start int) token {
	j := l.pos
	if l.s[j] == '-' {
		j++
	}
	digits := j
	for j < len(l.s) && l.s[j] >= '0' && l.s[j] <= '9' {
		j++
	}
	if j == digits {
		l.pos = len(l.s)
		return token{kind: tError, pos: start, err: "a number needs digits"}
	}
	float := false
	if j < len(l.s) && l.s[j] == '.' {
		float = true
		j++
		for j < len(l.s) && l.s[j] >= '0' && l.s[j] <= '9' {
			j++
		}
	}
	if j < len(l.s) && (l.s[j] == 'e' || l.s[j] == 'E') {
		float = true
		j++
		if j < len(l.s) && (l.s[j] == '+' || l.s[j] == '-') {
			j++
		}
		for j < len(l.s) && l.s[j] >= '0' && l.s[j] <= '9' {
			j++
		}
	}
	num := l.s[start:j]
	suffix := byte(0)
	if j < len(l.s) && strings.IndexByte("LlDdFfMm", l.s[j]) >= 0 {
		suffix = l.s[j] | 0x20
		j++
	}
	l.pos = j
	text := l.s[start:j]
	bad := func(format string, args ...any) token {
		return token{kind: tError, pos: start, err: fmt.Sprintf(format, args...)}
	}
	if j < len(l.s) && isIdentChar(l.s[j]) {
		return bad("number %s runs into %q", text, l.s[j])
	}
	switch {
	case suffix == 'l':
		if float {
			return bad("%s: an Int64 literal has no fraction", text)
		}
		i, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return bad("%s does not fit Edm.Int64", text)
		}
		return token{kind: tLiteral, pos: start, text: text, val: engine.Int64(i)}
	case float || suffix == 'd' || suffix == 'f' || suffix == 'm':
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || math.IsInf(f, 0) {
			return bad("%s is not a finite Edm.Double", text)
		}
		return token{kind: tLiteral, pos: start, text: text, val: engine.Double(f)}
	}
	i, err := strconv.ParseInt(num, 10, 32)
	if err != nil {
		return bad("%s does not fit Edm.Int32; write %sL for an Edm.Int64", text, num)
	}
	return token{kind: tLiteral, pos: start, text: text, val: engine.Int32(int32(i))}
}
