// Package query evaluates the Azure Table service's queries on a view
// snapshot: the OData $filter subset (eq ne gt ge lt le, and or not,
// parentheses, typed literals), a planner that turns key conditions into a
// B-tree range so that point queries, RowKey ranges and partition scans
// read only what they must, and paging with continuation keys.
package query

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// Op is a comparison operator.
type Op int

// The comparison operators of the Table service's $filter.
const (
	Eq Op = iota
	Ne
	Gt
	Ge
	Lt
	Le
)

var opNames = map[string]Op{"eq": Eq, "ne": Ne, "gt": Gt, "ge": Ge, "lt": Lt, "le": Le}

func (o Op) String() string {
	return [...]string{"eq", "ne", "gt", "ge", "lt", "le"}[o]
}

// flip returns the operator with its operands swapped (5 lt X ⇔ X gt 5).
func (o Op) flip() Op {
	switch o {
	case Gt:
		return Lt
	case Ge:
		return Le
	case Lt:
		return Gt
	case Le:
		return Ge
	}
	return o
}

// Expr is a parsed filter.
type Expr interface {
	// Match reports whether the entity satisfies the filter.
	Match(e *engine.Entity) bool
	String() string
}

// Compare is `Property op literal`.
type Compare struct {
	Property string
	Op       Op
	Value    engine.Value

	// hint is where Property was in the last entity matched (see
	// engine.Entity.GetHinted); atomic, as a filter may be shared.
	hint atomic.Int32
}

// And, Or and Not combine filters.
type (
	And struct{ L, R Expr }
	Or  struct{ L, R Expr }
	Not struct{ X Expr }
)

// Match of a comparison: an entity without the property, or with a value
// of another type, does not match (not even ne), as in the Table service.
// Int32 and Int64 compare with each other by value.
func (c *Compare) Match(e *engine.Entity) bool {
	v, ok := c.property(e)
	if !ok {
		return false
	}
	r, ok := v.Compare(c.Value)
	if !ok {
		return false
	}
	switch c.Op {
	case Eq:
		return r == 0
	case Ne:
		return r != 0
	case Gt:
		return r > 0
	case Ge:
		return r >= 0
	case Lt:
		return r < 0
	}
	return r <= 0
}

func (c *Compare) property(e *engine.Entity) (engine.Value, bool) {
	switch c.Property {
	case "PartitionKey":
		return engine.String(e.PartitionKey), true
	case "RowKey":
		return engine.String(e.RowKey), true
	case "Timestamp":
		return engine.DateTimeTicks(e.Timestamp), true
	}
	hint := int(c.hint.Load())
	v, at, ok := e.GetHinted(c.Property, hint)
	if ok && at != hint {
		c.hint.Store(int32(at))
	}
	return v, ok
}

// Match implements Expr.
func (a *And) Match(e *engine.Entity) bool { return a.L.Match(e) && a.R.Match(e) }

// Match implements Expr.
func (o *Or) Match(e *engine.Entity) bool { return o.L.Match(e) || o.R.Match(e) }

// Match implements Expr.
func (n *Not) Match(e *engine.Entity) bool { return !n.X.Match(e) }

func (c *Compare) String() string { return fmt.Sprintf("%s %s %#v", c.Property, c.Op, c.Value) }
func (a *And) String() string     { return "(" + a.L.String() + " and " + a.R.String() + ")" }
func (o *Or) String() string      { return "(" + o.L.String() + " or " + o.R.String() + ")" }
func (n *Not) String() string     { return "not " + n.X.String() }

// SyntaxError is a filter that does not parse, with the byte offset of the
// problem.
type SyntaxError struct {
	Pos int
	Msg string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("$filter: at %d: %s", e.Pos, e.Msg) }

// maxDepth bounds nesting so a hostile filter cannot exhaust the stack.
const maxDepth = 100

// Parse parses a $filter expression.
func Parse(s string) (Expr, error) {
	p := &parser{lx: lexer{s: s}}
	p.next()
	e, err := p.or(0)
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.errf("unexpected %s after the end of the expression", p.tok)
	}
	return e, nil
}

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

// quoted reads a '…' literal starting at i (the opening quote), with ”
// standing for one quote.
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

type parser struct {
	lx  lexer
	tok token
}

func (p *parser) next() { p.tok = p.lx.next() }

func (p *parser) errf(format string, args ...any) error {
	if p.tok.kind == tError {
		return &SyntaxError{Pos: p.tok.pos, Msg: p.tok.err}
	}
	return &SyntaxError{Pos: p.tok.pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) keyword(w string) bool {
	return p.tok.kind == tIdent && strings.EqualFold(p.tok.text, w)
}

func (p *parser) or(depth int) (Expr, error) {
	l, err := p.and(depth)
	if err != nil {
		return nil, err
	}
	for p.keyword("or") {
		p.next()
		r, err := p.and(depth)
		if err != nil {
			return nil, err
		}
		l = &Or{L: l, R: r}
	}
	return l, nil
}

func (p *parser) and(depth int) (Expr, error) {
	l, err := p.not(depth)
	if err != nil {
		return nil, err
	}
	for p.keyword("and") {
		p.next()
		r, err := p.not(depth)
		if err != nil {
			return nil, err
		}
		l = &And{L: l, R: r}
	}
	return l, nil
}

func (p *parser) not(depth int) (Expr, error) {
	if depth > maxDepth {
		return nil, p.errf("the expression is nested more than %d deep", maxDepth)
	}
	if p.keyword("not") {
		p.next()
		x, err := p.not(depth + 1)
		if err != nil {
			return nil, err
		}
		return &Not{X: x}, nil
	}
	if p.tok.kind == tLParen {
		p.next()
		e, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.errf("expected \")\", found %s", p.tok)
		}
		p.next()
		return e, nil
	}
	return p.comparison()
}

func (p *parser) comparison() (Expr, error) {
	left := p.tok
	if left.kind != tIdent && left.kind != tLiteral {
		return nil, p.errf("expected a property name or a literal, found %s", p.tok)
	}
	p.next()
	if p.tok.kind != tIdent {
		return nil, p.errf("expected a comparison operator (eq ne gt ge lt le) after %s, found %s", left, p.tok)
	}
	op, ok := opNames[strings.ToLower(p.tok.text)]
	if !ok {
		return nil, p.errf("unknown operator %s (eq ne gt ge lt le are)", p.tok)
	}
	p.next()
	right := p.tok
	if right.kind != tIdent && right.kind != tLiteral {
		return nil, p.errf("expected a property name or a literal after %s, found %s", op, p.tok)
	}
	p.next()
	switch {
	case left.kind == tIdent && right.kind == tLiteral:
		return &Compare{Property: left.text, Op: op, Value: right.val}, nil
	case left.kind == tLiteral && right.kind == tIdent:
		return &Compare{Property: right.text, Op: op.flip(), Value: left.val}, nil
	}
	return nil, &SyntaxError{Pos: left.pos, Msg: "a comparison needs one property and one literal"}
}
