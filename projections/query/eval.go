package query

import "github.com/cairn-dev/cairn/engine"

// Match of a comparison: an entity without the property, or with a value
// of another type, does not match (not even ne), as in the Table service.
// Int32 and Int64 compare with each other by value.
func (c *Compare) Match(e engine.Fields) bool {
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

func (c *Compare) property(e engine.Fields) (engine.Value, bool) {
	switch c.Property {
	case "PartitionKey":
		pk, _ := e.Keys()
		return engine.String(pk), true
	case "RowKey":
		_, rk := e.Keys()
		return engine.String(rk), true
	case "Timestamp":
		return engine.DateTimeTicks(e.Ticks()), true
	}
	hint := int(c.hint.Load())
	v, at, ok := e.GetHinted(c.Property, hint)
	if ok && at != hint {
		c.hint.Store(int32(at))
	}
	return v, ok
}

// Match implements Expr.
func (a *And) Match(e engine.Fields) bool { return a.L.Match(e) && a.R.Match(e) }

// Match implements Expr.
func (o *Or) Match(e engine.Fields) bool { return o.L.Match(e) || o.R.Match(e) }

// Match implements Expr.
func (n *Not) Match(e engine.Fields) bool { return !n.X.Match(e) }
