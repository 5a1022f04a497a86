package projections

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/btree"

	"github.com/cairn-dev/cairn/engine"
)

// change is one entity's change in a source table: old is what was there
// (nil for an insert), new what is there now (nil for a delete); ver and
// ts are the change's journal version and time.
type change struct {
	old, new *engine.Entity
	ver      engine.Version
	ts       int64
}

// deriver maintains one version of a projection from its source table's
// changes. One goroutine uses it at a time (the source's applier, or a
// build before the deriver is attached); readers see copies of rows.
type deriver struct {
	def      *Definition
	sep      string
	keyHints []int    // where each key property was in the last entity (GetHinted)
	include  []string // Include sorted by name (nil for "*", see all)
	all      bool     // Include is ["*"]
	incHints []int
	rows     *rowTree           // the projection's entities, copy-on-write
	members  int64              // source entities the projection holds
	groups   map[groupID]*group // aggregate state by group
	// shards, when above 0, splits each aggregate group by the source
	// entity's shard: a table whose shards are placed on hosts keeps a
	// group entity per shard (RowKey ShardRowKey), which reads fold.
	shards uint32
	// deferred, when not nil, collects the groups a change touched
	// instead of writing their entities: a build's scan of the head
	// writes each group once at the end (flush) rather than once per
	// source entity.
	deferred map[groupID]struct{}
}

// groupID names an aggregate group: its key, and the source shard when
// groups are split by shard.
type groupID struct {
	key   string
	shard uint32
}

// group is the writer's state of one aggregate group.
type group struct {
	// key is the group's key, a string of its own: the key of the entity
	// that made the group is a substring of that entity's text (the
	// journal's decoder cuts an entity's strings from one, and a view's
	// entity decoded from its packed form shares its strings), which the
	// group would keep alive after the entity is gone.
	key  string
	n    int64
	ver  engine.Version
	ts   int64
	sums []sum                       // per aggregate (used by sum)
	ext  []*btree.BTreeG[extremeKey] // per aggregate (used by min and max)
}

type sum struct {
	i       int64
	f       float64
	doubles int64 // Double values summed: the sum is a Double if any
}

// extremeKey orders a group's values of a min or max aggregate, with the
// entity's keys to tell equal values apart.
type extremeKey struct {
	v      engine.Value
	pk, rk string
}

// newDeriver returns the deriver of def; shards, above 0, splits an
// aggregate's groups by the source's shards.
func newDeriver(def *Definition, shards uint32) *deriver {
	d := &deriver{def: def, sep: def.Separator, rows: newRows(),
		keyHints: make([]int, len(def.Key))}
	if d.sep == "" {
		d.sep = "|"
	}
	if len(def.Include) == 1 && def.Include[0] == "*" {
		d.all = true
	} else if len(def.Include) > 0 {
		d.include = slices.Clone(def.Include)
		slices.Sort(d.include)
		d.incHints = make([]int, len(d.include))
	}
	if def.Kind == KindAggregate {
		d.groups = map[groupID]*group{}
		d.shards = shards
	}
	return d
}

// apply applies one change of the source.
func (d *deriver) apply(c change) {
	if d.def.Kind == KindIndex {
		d.applyIndex(c)
	} else {
		d.applyAggregate(c)
	}
}

// indexRowKey is an index entity's RowKey: the source's PartitionKey with
// every "|" doubled, a "|", then the source's RowKey. It is unique per
// source entity and sorts by the source's keys within one index value.
func indexRowKey(pk, rk string) string {
	if strings.IndexByte(pk, '|') >= 0 {
		pk = strings.ReplaceAll(pk, "|", "||")
	}
	return pk + "|" + rk
}

func (d *deriver) applyIndex(c change) {
	var oldKey, newKey string
	oldOK, newOK := false, false
	if c.old != nil {
		oldKey, oldOK = d.indexKey(c.old)
	}
	if c.new != nil {
		newKey, newOK = d.indexKey(c.new)
	}
	if oldOK && (!newOK || newKey != oldKey) {
		d.rows.Delete(engine.PackedKey(oldKey, indexRowKey(c.old.PartitionKey, c.old.RowKey)))
		d.members--
		oldOK = false
	}
	if !newOK {
		return
	}
	if !oldOK {
		d.members++
	}
	d.rows.Set(engine.Pack(d.indexEntity(newKey, c.new)))
}

// indexKey is the index value of a source entity: its key properties'
// values as text, joined, cut to Prefix characters; false when one is
// missing or Binary. A key of one String property is the value itself
// (no copy); several are joined into one allocation.
func (d *deriver) indexKey(e *engine.Entity) (string, bool) {
	if len(d.def.Key) == 1 {
		s, ok := d.propertyText(e, 0)
		if !ok {
			return "", false
		}
		return cutRunes(s, d.def.Prefix), true
	}
	var parts [MaxProjectionKeys]string
	n := len(d.sep) * (len(d.def.Key) - 1)
	for i := range d.def.Key {
		s, ok := d.propertyText(e, i)
		if !ok {
			return "", false
		}
		parts[i] = s
		n += len(s)
	}
	var b strings.Builder
	b.Grow(n)
	for i := range d.def.Key {
		if i > 0 {
			b.WriteString(d.sep)
		}
		b.WriteString(parts[i])
	}
	return cutRunes(b.String(), d.def.Prefix), true
}

// propertyText is propertyText of key property i, looked up where it was
// in the last entity first.
func (d *deriver) propertyText(e *engine.Entity, i int) (string, bool) {
	name := d.def.Key[i]
	if name == "PartitionKey" || name == "RowKey" {
		return propertyText(e, name)
	}
	v, h, ok := e.GetHinted(name, d.keyHints[i])
	d.keyHints[i] = h
	if !ok {
		return "", false
	}
	return valueText(v)
}

func cutRunes(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	i := 0
	for k := 0; k < n && i < len(s); k++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i]
}

// propertyText returns a property (or the PartitionKey or RowKey) as the
// text of an index or group key: strings as they are, numbers in decimal,
// booleans as true or false, DateTimes in RFC 3339 (UTC, so they sort),
// Guids in their usual form. Binary values are not keys.
func propertyText(e *engine.Entity, name string) (string, bool) {
	switch name {
	case "PartitionKey":
		return e.PartitionKey, true
	case "RowKey":
		return e.RowKey, true
	}
	v, ok := e.Get(name)
	if !ok {
		return "", false
	}
	return valueText(v)
}

// valueText is a value as the text of an index or group key
// (propertyText).
func valueText(v engine.Value) (string, bool) {
	switch v.Type() {
	case engine.TypeString:
		return v.Str(), true
	case engine.TypeInt32, engine.TypeInt64:
		return strconv.FormatInt(v.Int(), 10), true
	case engine.TypeDouble:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64), true
	case engine.TypeBoolean:
		return strconv.FormatBool(v.Boolean()), true
	case engine.TypeDateTime:
		return v.Time().UTC().Format(time.RFC3339Nano), true
	case engine.TypeGuid:
		return v.GuidString(), true
	}
	return "", false
}

// indexEntity is the index entity of source entity e: keyed by the index
// value and the source's keys, carrying SourcePartitionKey, SourceRowKey
// and the included properties, with the source's version (so its ETag is
// the source entity's) and time.
func (d *deriver) indexEntity(key string, e *engine.Entity) *engine.Entity {
	n := 2 + len(d.include)
	if d.all {
		n = 2 + len(e.Properties)
	}
	// The included properties in name order (e's are sorted, d.include
	// too), then the two source keys inserted in their places: the
	// entity's properties are sorted without sorting them.
	props := make([]engine.Property, 0, n)
	if d.all {
		for _, p := range e.Properties {
			if p.Name != "SourcePartitionKey" && p.Name != "SourceRowKey" {
				props = append(props, p)
			}
		}
	} else {
		for i, name := range d.include {
			v, h, ok := e.GetHinted(name, d.incHints[i])
			d.incHints[i] = h
			if ok {
				props = append(props, engine.Property{Name: name, Value: v})
			}
		}
	}
	props = insertProperty(props, engine.Property{Name: "SourcePartitionKey", Value: engine.String(e.PartitionKey)})
	props = insertProperty(props, engine.Property{Name: "SourceRowKey", Value: engine.String(e.RowKey)})
	return &engine.Entity{PartitionKey: key, RowKey: indexRowKey(e.PartitionKey, e.RowKey), Timestamp: e.Timestamp, Version: e.Version, Properties: props}
}

// insertProperty inserts p into props (sorted by name) after every
// property whose name is not above p's.
func insertProperty(props []engine.Property, p engine.Property) []engine.Property {
	lo, hi := 0, len(props)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if props[m].Name <= p.Name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return slices.Insert(props, lo, p)
}

// groupKey is the group of a source entity; false when it has no value
// for GroupBy (it is in no group).
func (d *deriver) groupKey(e *engine.Entity) (string, bool) {
	if d.def.GroupBy == "" {
		return "", true
	}
	return propertyText(e, d.def.GroupBy)
}

// group returns the group e belongs to, if any.
func (d *deriver) group(e *engine.Entity) (groupID, bool) {
	k, ok := d.groupKey(e)
	if !ok {
		return groupID{}, false
	}
	id := groupID{key: k}
	if d.shards > 0 {
		id.shard = uint32(engine.Shard(e.PartitionKey, int(d.shards)))
	}
	return id, true
}

func (d *deriver) applyAggregate(c change) {
	var touched [2]groupID
	n := 0
	if c.old != nil {
		if k, ok := d.group(c.old); ok {
			d.member(k, c.old, -1)
			touched[n] = k
			n++
		}
	}
	if c.new != nil {
		if k, ok := d.group(c.new); ok {
			d.member(k, c.new, 1)
			if n == 0 || touched[0] != k {
				touched[n] = k
				n++
			}
		}
	}
	for _, k := range touched[:n] {
		g := d.groups[k]
		if c.ver.Seq > g.ver.Seq || c.ver.Seq == g.ver.Seq && c.ver.Index > g.ver.Index {
			g.ver = c.ver
		}
		g.ts = max(g.ts, c.ts)
		if d.deferred != nil {
			d.deferred[k] = struct{}{}
		} else {
			d.materialise(k, g)
		}
	}
}

// flush writes the entities of the groups deferred collected, and stops
// deferring.
func (d *deriver) flush() {
	for k := range d.deferred {
		if g := d.groups[k]; g != nil {
			d.materialise(k, g)
		}
	}
	d.deferred = nil
}

// member adds (sign 1) or removes (sign -1) source entity e to or from
// group k's count, sums and sorted values.
func (d *deriver) member(k groupID, e *engine.Entity, sign int64) {
	g := d.groups[k]
	if g == nil {
		if sign < 0 {
			return // cannot happen: every entity leaves a group it joined
		}
		k.key = strings.Clone(k.key)
		g = &group{key: k.key, sums: make([]sum, len(d.def.Aggregates)), ext: make([]*btree.BTreeG[extremeKey], len(d.def.Aggregates))}
		d.groups[k] = g
	}
	g.n += sign
	d.members += sign
	for i, a := range d.def.Aggregates {
		v, ok := e.Get(a.Property)
		if a.Op == OpCount || !ok {
			continue
		}
		switch a.Op {
		case OpSum:
			addSum(&g.sums[i], v, sign)
		case OpMin, OpMax:
			if g.ext[i] == nil {
				g.ext[i] = btree.NewBTreeGOptions(lessExtreme, btree.Options{NoLocks: true})
			}
			if sign > 0 {
				// Kept apart from e, whose strings may be parts of a
				// larger one (its packed form, its record's text).
				g.ext[i].Set(extremeKey{v: v.Detached(), pk: strings.Clone(e.PartitionKey), rk: strings.Clone(e.RowKey)})
			} else {
				g.ext[i].Delete(extremeKey{v: v, pk: e.PartitionKey, rk: e.RowKey})
			}
		}
	}
}

// addSum adds (sign 1) or removes (sign -1) a numeric value; other types
// are not summed. Integers are summed exactly; Doubles in float64, in
// journal order, so a sum of Doubles may differ in its last bits from the
// same values summed in another order (after a rebuild).
func addSum(s *sum, v engine.Value, sign int64) {
	switch v.Type() {
	case engine.TypeInt32, engine.TypeInt64:
		s.i += sign * v.Int()
	case engine.TypeDouble:
		s.f += float64(sign) * v.Float()
		s.doubles += sign
		if s.doubles == 0 {
			s.f = 0 // no Double left: forget the rounding of the removed ones
		}
	}
}

// materialise writes group k's entity, or deletes it when the group is
// empty.
func (d *deriver) materialise(k groupID, g *group) {
	rk := ""
	if d.shards > 0 {
		rk = ShardRowKey(k.shard)
	}
	if g.n == 0 {
		delete(d.groups, k)
		d.rows.Delete(engine.PackedKey(k.key, rk))
		return
	}
	props := make([]engine.Property, 0, len(d.def.Aggregates))
	for i, a := range d.def.Aggregates {
		var v engine.Value
		switch a.Op {
		case OpCount:
			v = engine.Int64(g.n)
		case OpSum:
			s := g.sums[i]
			if s.doubles > 0 {
				v = engine.Double(float64(s.i) + s.f)
			} else {
				v = engine.Int64(s.i)
			}
		case OpMin, OpMax:
			t := g.ext[i]
			if t == nil || t.Len() == 0 {
				continue // no member has the property
			}
			var x extremeKey
			if a.Op == OpMin {
				x, _ = t.Min()
			} else {
				x, _ = t.Max()
			}
			v = x.v
		}
		props = append(props, engine.Property{Name: a.As, Value: v})
	}
	e := engine.NewEntity(g.key, rk, props...)
	e.Timestamp, e.Version = g.ts, g.ver
	d.rows.Set(engine.Pack(e))
}

// typeRank orders values of different types for min and max: all
// integers together, then the others by type.
func typeRank(t engine.Type) int {
	if t == engine.TypeInt32 {
		return int(engine.TypeInt64)
	}
	return int(t)
}

// compareExtreme orders the values of a min or max aggregate: by type
// (typeRank), then by value.
func compareExtreme(a, b engine.Value) int {
	if ra, rb := typeRank(a.Type()), typeRank(b.Type()); ra != rb {
		return cmp.Compare(ra, rb)
	}
	c, ok := a.Compare(b)
	if !ok { // NaN: order by bits, so the tree stays consistent
		c = cmp.Compare(math.Float64bits(a.Float()), math.Float64bits(b.Float()))
	}
	return c
}

func lessExtreme(a, b extremeKey) bool {
	if c := compareExtreme(a.v, b.v); c != 0 {
		return c < 0
	}
	if a.pk != b.pk {
		return a.pk < b.pk
	}
	return a.rk < b.rk
}

// expected counts what the projection must hold for a source snapshot:
// its entities (index entries or groups) and its members (source
// entities in it). A build checks itself against it before the swap.
func (d *deriver) expected(src *rowTree) (rows, members int64) {
	groups := map[groupID]struct{}{}
	var e engine.Entity
	src.Scan(func(p engine.Packed) bool {
		p.DecodeInto(&e)
		if d.def.Kind == KindIndex {
			if _, ok := d.indexKey(&e); ok {
				rows++
				members++
			}
			return true
		}
		if k, ok := d.group(&e); ok {
			members++
			groups[k] = struct{}{}
		}
		return true
	})
	if d.def.Kind == KindAggregate {
		rows = int64(len(groups))
	}
	return rows, members
}
