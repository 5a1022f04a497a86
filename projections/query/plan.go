package query

import (
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections"
)

// Kind is how a query reads the table, fastest first.
type Kind int

// The kinds of query of the Table service's design guide.
const (
	Point         Kind = iota // PartitionKey and RowKey equal
	Range                     // PartitionKey equal, RowKey bounded
	PartitionScan             // PartitionKey equal
	TableScan                 // anything else (a PartitionKey range narrows it)
)

func (k Kind) String() string {
	return [...]string{"point", "range", "partition scan", "table scan"}[k]
}

// bound is one end of a key range.
type bound struct {
	set       bool
	key       string
	inclusive bool
}

// keyRange is the set of strings between lo and hi.
type keyRange struct{ lo, hi bound }

// narrow intersects r with `key op v`.
func (r *keyRange) narrow(op Op, v string) {
	raise := func(b bound) {
		if !r.lo.set || b.key > r.lo.key || b.key == r.lo.key && !b.inclusive {
			r.lo = b
		}
	}
	lower := func(b bound) {
		if !r.hi.set || b.key < r.hi.key || b.key == r.hi.key && !b.inclusive {
			r.hi = b
		}
	}
	switch op {
	case Eq:
		raise(bound{true, v, true})
		lower(bound{true, v, true})
	case Gt:
		raise(bound{true, v, false})
	case Ge:
		raise(bound{true, v, true})
	case Lt:
		lower(bound{true, v, false})
	case Le:
		lower(bound{true, v, true})
	}
}

func (r *keyRange) single() (string, bool) {
	return r.lo.key, r.lo.set && r.hi.set && r.lo.inclusive && r.hi.inclusive && r.lo.key == r.hi.key
}

func (r *keyRange) empty() bool {
	if !r.lo.set || !r.hi.set {
		return false
	}
	return r.lo.key > r.hi.key || r.lo.key == r.hi.key && !(r.lo.inclusive && r.hi.inclusive)
}

func (r *keyRange) below(k string) bool { // k is past the upper end
	return r.hi.set && (k > r.hi.key || k == r.hi.key && !r.hi.inclusive)
}

func (r *keyRange) above(k string) bool { // k is before the lower end
	return r.lo.set && (k < r.lo.key || k == r.lo.key && !r.lo.inclusive)
}

// Plan is a filter with the key ranges derived from it.
type Plan struct {
	Filter Expr // nil: every entity
	Kind   Kind
	pk, rk keyRange
	none   bool // the key conditions contradict each other
}

// NewPlan derives the B-tree range a filter needs: conditions on
// PartitionKey and RowKey joined by `and` at the top of the filter bound the
// walk; everything else (including `or`) is checked on each entity walked.
func NewPlan(f Expr) *Plan {
	p := &Plan{Filter: f}
	var walk func(e Expr)
	walk = func(e Expr) {
		switch x := e.(type) {
		case *And:
			walk(x.L)
			walk(x.R)
		case *Compare:
			if x.Value.Type() != engine.TypeString || x.Op == Ne {
				return
			}
			switch x.Property {
			case "PartitionKey":
				p.pk.narrow(x.Op, x.Value.Str())
			case "RowKey":
				p.rk.narrow(x.Op, x.Value.Str())
			}
		}
	}
	if f != nil {
		walk(f)
	}
	p.none = p.pk.empty() || p.rk.empty()
	_, onePK := p.pk.single()
	_, oneRK := p.rk.single()
	switch {
	case onePK && oneRK:
		p.Kind = Point
	case onePK && (p.rk.lo.set || p.rk.hi.set):
		p.Kind = Range
	case onePK:
		p.Kind = PartitionScan
	default:
		p.Kind = TableScan
	}
	return p
}

// Partition returns the one partition the plan reads, if it reads one
// (a point, range or partition scan).
func (p *Plan) Partition() (string, bool) {
	if p.none {
		return "", false
	}
	return p.pk.single()
}

// Page is one page of results.
type Page struct {
	Entities []*engine.Entity
	// NextPartitionKey and NextRowKey are the continuation: the key of the
	// first entity not returned. More is false when nothing remains.
	NextPartitionKey, NextRowKey string
	More                         bool
	// Examined counts the entities walked (returned or not).
	Examined int
}

// Options bound one page.
type Options struct {
	// Limit is the most entities in the page (1,000 at most, as Azure).
	Limit int
	// Deadline ends the page early (Azure's 5 s budget); zero: none.
	Deadline time.Time
	// From resumes an earlier page: the continuation it returned (the
	// first entity not yet returned).
	From *Continuation
	// Descending walks the keys from the highest down (a Cairn extension
	// for the log-tail pattern; Azure only ascends).
	Descending bool
	// Keep, when set, answers for the entities it keeps only: a view that
	// holds more shards than a gathered query asks of it skips the
	// others' entities (counted as examined; projections.KeepShards).
	Keep func(e engine.Fields) bool
}

// Continuation is where a query resumes.
type Continuation struct{ PartitionKey, RowKey string }

// MaxPage is the Table service's page size limit.
const MaxPage = 1000

// afterKeys is greater than every key of partition pk: keys cannot hold
// control characters, so pk+"\x00" is the next possible partition.
func afterKeys(pk string) string { return pk + "\x00" }

// Run reads one page from snap in key order (or reverse key order), walking
// only the range the plan allows.
func (p *Plan) Run(snap *projections.Snapshot, o Options) Page {
	var pg Page
	if p.none {
		return pg
	}
	limit := o.Limit
	if limit <= 0 || limit > MaxPage {
		limit = MaxPage
	}
	onePK, single := p.pk.single()
	// In the walk's direction: is the entity before the range's start
	// (skip it) or past its end (stop)?
	before, past := p.pk.above, p.pk.below
	rkPast := p.rk.below
	if o.Descending {
		before, past = p.pk.below, p.pk.above
		rkPast = p.rk.above
	}
	checkDeadline := !o.Deadline.IsZero()
	// Each entity is read in place through f, which is used again for
	// the next, and decoded only if the page keeps it: a scan that
	// examines many entities decodes and allocates for those it returns.
	var f engine.PackedFields
	visit := func(packed engine.Packed) bool {
		f.Reset(packed)
		pk, rk := f.Keys()
		if past(pk) || single && pk != onePK {
			return false
		}
		if before(pk) {
			return true
		}
		if single && rkPast(rk) {
			return false
		}
		if len(pg.Entities) == limit || checkDeadline && pg.Examined%256 == 255 && time.Now().After(o.Deadline) {
			pg.More, pg.NextPartitionKey, pg.NextRowKey = true, pk, rk
			return false
		}
		pg.Examined++
		if p.rk.above(rk) || p.rk.below(rk) {
			return true
		}
		if o.Keep != nil && !o.Keep(&f) {
			return true
		}
		if p.Filter == nil || p.Filter.Match(&f) {
			pg.Entities = append(pg.Entities, packed.Entity())
		}
		return true
	}
	if o.Descending {
		p.descend(snap, o.From, visit)
	} else {
		p.ascend(snap, o.From, visit)
	}
	return pg
}

// ascend starts at the range's lower end, or at the continuation if it is
// further on.
func (p *Plan) ascend(snap *projections.Snapshot, from *Continuation, visit func(engine.Packed) bool) {
	startPK, startRK := "", ""
	if p.pk.lo.set {
		startPK = p.pk.lo.key
		if onePK, ok := p.pk.single(); ok && p.rk.lo.set {
			startPK, startRK = onePK, p.rk.lo.key
		}
	}
	if c := from; c != nil && (c.PartitionKey > startPK || c.PartitionKey == startPK && c.RowKey > startRK) {
		startPK, startRK = c.PartitionKey, c.RowKey
	}
	snap.AscendPacked(startPK, startRK, visit)
}

// descend starts at the range's upper end, or at the continuation if it is
// further down.
func (p *Plan) descend(snap *projections.Snapshot, from *Continuation, visit func(engine.Packed) bool) {
	var start *Continuation
	if p.pk.hi.set {
		start = &Continuation{PartitionKey: afterKeys(p.pk.hi.key)}
		if onePK, ok := p.pk.single(); ok && p.rk.hi.set {
			start = &Continuation{PartitionKey: onePK, RowKey: p.rk.hi.key}
		}
	}
	if c := from; c != nil && (start == nil || c.PartitionKey < start.PartitionKey ||
		c.PartitionKey == start.PartitionKey && c.RowKey < start.RowKey) {
		start = c
	}
	if start == nil {
		snap.ReversePacked(visit)
		return
	}
	snap.DescendPacked(start.PartitionKey, start.RowKey, visit)
}
