package query

import (
	"fmt"
	"strings"
)

// SyntaxError is a filter that does not parse, with the byte offset of the
// problem.
type SyntaxError struct {
	Pos int
	Msg string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("$filter: at %d: %s", e.Pos, e.Msg) }

// maxDepth bounds nesting so a hostile filter cannot exhaust the stack.
const maxDepth = 100

// MaxFilterLen bounds a $filter's length in bytes. Azure allows 15
// comparisons in a filter; 16 KiB leaves room for long keys and literals
// while a hostile filter cannot make every page's evaluation expensive.
const MaxFilterLen = 16 << 10

// Parse parses a $filter expression. A filter longer than MaxFilterLen is
// refused before it is read.
func Parse(s string) (Expr, error) {
	if len(s) > MaxFilterLen {
		return nil, &SyntaxError{Pos: MaxFilterLen, Msg: fmt.Sprintf("the filter is %d bytes long; at most %d are allowed", len(s), MaxFilterLen)}
	}
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

var opNames = map[string]Op{"eq": Eq, "ne": Ne, "gt": Gt, "ge": Ge, "lt": Lt, "le": Le}

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
