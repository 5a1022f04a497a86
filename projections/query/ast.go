package query

import (
	"fmt"
	"sync/atomic"

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
	Match(e engine.Fields) bool
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

func (c *Compare) String() string { return fmt.Sprintf("%s %s %#v", c.Property, c.Op, c.Value) }
func (a *And) String() string     { return "(" + a.L.String() + " and " + a.R.String() + ")" }
func (o *Or) String() string      { return "(" + o.L.String() + " or " + o.R.String() + ")" }
func (n *Not) String() string     { return "not " + n.X.String() }
