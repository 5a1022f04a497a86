package projections

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// Definitions the model tests declare on table "Tab".
var (
	byEmail = &Definition{Name: "ByEmail", Source: "Tab", Version: 1, Kind: KindIndex, Key: []string{"Email"}, Include: []string{"Name"}}
	byDept  = &Definition{Name: "ByDeptName", Source: "Tab", Version: 1, Kind: KindIndex, Key: []string{"Dept", "Name"}, Separator: "-", Prefix: 4}
	perDept = &Definition{Name: "PerDept", Source: "Tab", Version: 1, Kind: KindAggregate, GroupBy: "Dept", Aggregates: []Aggregate{
		{Op: OpCount, As: "N"}, {Op: OpSum, Property: "Salary", As: "Total"},
		{Op: OpMin, Property: "Salary", As: "Low"}, {Op: OpMax, Property: "Salary", As: "High"}}}
	perPart = &Definition{Name: "PerPartition", Source: "Tab", Version: 1, Kind: KindAggregate, GroupBy: "PartitionKey", Aggregates: []Aggregate{
		{Op: OpCount, As: "N"}, {Op: OpMax, Property: "Name", As: "Last"}}}
)

// randomRecord is a record of 1 to 4 puts and deletes in one of four
// partitions, over 60 row keys: emails shared by several entities, some
// properties missing, salaries of both integer types; a put replaces the
// entity whole (as an update, or a merge once decided, does), so key
// properties change, appear and disappear.
func randomRecord(r *rand.Rand, seq uint64) *engine.Record {
	pk := []string{"a", "b|c", "d", "e"}[r.IntN(4)]
	rec := &engine.Record{Time: int64(seq) * 1000, PartitionKey: pk}
	for i := r.IntN(4); i >= 0; i-- {
		rk := fmt.Sprintf("%02d", r.IntN(60))
		if r.IntN(4) == 0 {
			rec.Events = append(rec.Events, engine.Event{Kind: engine.EventDelete, RowKey: rk})
			continue
		}
		var props []engine.Property
		if r.IntN(5) > 0 {
			props = append(props, engine.Property{Name: "Dept", Value: engine.String([]string{"Sales", "Ops", "R&D"}[r.IntN(3)])})
		}
		if r.IntN(5) > 0 {
			props = append(props, engine.Property{Name: "Email", Value: engine.String(fmt.Sprintf("u%d@x.org", r.IntN(25)))})
		}
		if r.IntN(6) > 0 {
			props = append(props, engine.Property{Name: "Name", Value: engine.String(fmt.Sprintf("Name%02d", r.IntN(40)))})
		}
		switch r.IntN(4) {
		case 0:
			props = append(props, engine.Property{Name: "Salary", Value: engine.Int32(int32(r.IntN(1000)))})
		case 1, 2:
			props = append(props, engine.Property{Name: "Salary", Value: engine.Int64(int64(r.IntN(100000)) - 50000)})
		}
		rec.Events = append(rec.Events, engine.Event{Kind: engine.EventPut, RowKey: rk, Properties: props})
	}
	return rec
}

// modelOf computes what projection d must hold for the source snapshot s,
// from scratch and without the derivation's code: index entities keyed by
// the joined key and the escaped source keys, or one entity per group.
func modelOf(d *Definition, s *Snapshot) []string {
	str := func(e *engine.Entity, name string) (string, bool) {
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
		if v.Type() == engine.TypeString {
			return v.Str(), true
		}
		return fmt.Sprint(v.Int()), true
	}
	var out []string
	if d.Kind == KindIndex {
		s.Scan(func(e *engine.Entity) bool {
			var parts []string
			for _, k := range d.Key {
				v, ok := str(e, k)
				if !ok {
					return true
				}
				parts = append(parts, v)
			}
			sep := d.Separator
			if sep == "" {
				sep = "|"
			}
			key := strings.Join(parts, sep)
			if d.Prefix > 0 && len(key) > d.Prefix {
				key = key[:d.Prefix]
			}
			line := fmt.Sprintf("%s/%s|%s: SourcePartitionKey=%s SourceRowKey=%s", key, strings.ReplaceAll(e.PartitionKey, "|", "||"), e.RowKey, e.PartitionKey, e.RowKey)
			for _, inc := range d.Include {
				if v, ok := e.Get(inc); ok {
					line += fmt.Sprintf(" %s=%v", inc, v.GoString())
				}
			}
			out = append(out, line)
			return true
		})
		sort.Strings(out)
		return out
	}
	type agg struct {
		n        int64
		sum      int64
		min, max *engine.Value
	}
	groups := map[string][]*agg{}
	s.Scan(func(e *engine.Entity) bool {
		g, ok := str(e, d.GroupBy)
		if !ok {
			return true
		}
		if groups[g] == nil {
			for range d.Aggregates {
				groups[g] = append(groups[g], &agg{})
			}
		}
		for i, a := range d.Aggregates {
			st := groups[g][i]
			st.n++
			v, ok := e.Get(a.Property)
			if !ok {
				continue
			}
			if a.Op == OpSum {
				st.sum += v.Int()
			}
			if st.min == nil || less(v, *st.min) {
				st.min = &v
			}
			if st.max == nil || less(*st.max, v) {
				st.max = &v
			}
		}
		return true
	})
	for g, aggs := range groups {
		line := g + "/:"
		for i, a := range d.Aggregates {
			st := aggs[i]
			switch a.Op {
			case OpCount:
				line += fmt.Sprintf(" %s=%v", a.As, engine.Int64(st.n).GoString())
			case OpSum:
				line += fmt.Sprintf(" %s=%v", a.As, engine.Int64(st.sum).GoString())
			case OpMin:
				if st.min != nil {
					line += fmt.Sprintf(" %s=%v", a.As, st.min.GoString())
				}
			case OpMax:
				if st.max != nil {
					line += fmt.Sprintf(" %s=%v", a.As, st.max.GoString())
				}
			}
		}
		out = append(out, line)
	}
	sort.Strings(out)
	return out
}

func less(a, b engine.Value) bool {
	if a.Type() == engine.TypeString && b.Type() == engine.TypeString {
		return a.Str() < b.Str()
	}
	return a.Int() < b.Int()
}

// dump lists a projection snapshot's entities like modelOf, properties in
// the aggregate's declared order (they are stored sorted by name).
func dump(d *Definition, s *Snapshot) []string {
	var out []string
	s.Scan(func(e *engine.Entity) bool {
		line := e.PartitionKey + "/" + e.RowKey + ":"
		if d.Kind == KindIndex {
			sk, _ := e.Get("SourcePartitionKey")
			sr, _ := e.Get("SourceRowKey")
			line += fmt.Sprintf(" SourcePartitionKey=%s SourceRowKey=%s", sk.Str(), sr.Str())
			for _, inc := range d.Include {
				if v, ok := e.Get(inc); ok {
					line += fmt.Sprintf(" %s=%v", inc, v.GoString())
				}
			}
		} else {
			for _, a := range d.Aggregates {
				if v, ok := e.Get(a.As); ok {
					line += fmt.Sprintf(" %s=%v", a.As, v.GoString())
				}
			}
		}
		out = append(out, line)
		return true
	})
	sort.Strings(out)
	return out
}

func reader(t *testing.T, tb *Table, d *Definition) *Table {
	t.Helper()
	tb.dmu.Lock()
	defer tb.dmu.Unlock()
	a := tb.projection(d.Full())
	if a == nil || a.active == nil {
		t.Fatalf("projection %s is not active", d.Name)
	}
	return a.reader
}

// checkModel compares every projection's published snapshot with the model
// of the source's snapshot at the same position.
func checkModel(t *testing.T, tb *Table, defs ...*Definition) {
	t.Helper()
	src := tb.Snapshot()
	for _, d := range defs {
		ps := reader(t, tb, d).Snapshot()
		if ps.Seq != src.Seq {
			t.Fatalf("%s is at %d, its source at %d", d.Name, ps.Seq, src.Seq)
		}
		got, want := dump(d, ps), modelOf(d, src)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%s v%d at %d differs from the model of its source:\ngot  %d entities\n%s\nwant %d entities\n%s",
				d.Name, d.Version, src.Seq, len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
		}
	}
}

// TestDeclaredAgainstModel applies thousands of random records (puts that
// add, change and drop key properties, deletes, shared index values) to a
// table with two indexes and two aggregates declared before its first
// record, and compares each projection with a model computed from scratch
// from the source's snapshot at the same position, at random points.
func TestDeclaredAgainstModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 11))
	tb := NewTable("Tab", 1, 0)
	defs := []*Definition{byEmail, byDept, perDept, perPart}
	for _, d := range defs {
		if err := d.Validate(); err != nil {
			t.Fatal(err)
		}
		if tb.attach(d) {
			t.Fatalf("%s: a table at 0 needs no build", d.Name)
		}
	}
	for seq := uint64(1); seq <= 5000; seq++ {
		tb.Apply(seq, randomRecord(r, seq))
		if r.IntN(100) == 0 {
			tb.Publish()
			checkModel(t, tb, defs...)
		}
	}
	tb.Publish()
	checkModel(t, tb, defs...)
}

// TestBuildUnderWrites declares projections on a table that has records,
// and builds a new version of one, while the applier goes on applying:
// every build catches up, passes its check and swaps in a projection equal
// to the model; until its swap, readers see the version before.
func TestBuildUnderWrites(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 12))
	tb := NewTable("Tab", 1, 0)
	seq := uint64(0)
	apply := func(n int) {
		for range n {
			seq++
			tb.Apply(seq, randomRecord(r, seq))
			if seq%64 == 0 {
				tb.Publish()
			}
		}
		tb.Publish()
	}
	apply(3000)
	ctx := context.Background()
	build := func(d *Definition) chan error {
		done := make(chan error, 1)
		tb.attach(d)
		if !tb.wants(d) {
			t.Fatalf("%s v%d: no build wanted", d.Name, d.Version)
		}
		go func() { done <- tb.build(ctx, d, nil) }()
		return done
	}
	b1, b2 := build(byEmail), build(perDept)
	for _, b := range []chan error{b1, b2} {
	loop:
		for {
			select {
			case err := <-b:
				if err != nil {
					t.Fatal(err)
				}
				break loop
			default:
				apply(5)
			}
		}
	}
	apply(100)
	checkModel(t, tb, byEmail, perDept)

	// Version 2 of the index, carrying Dept too: version 1 serves until
	// the swap.
	v2 := *byEmail
	v2.Version, v2.Include = 2, []string{"Dept", "Name"}
	b := build(&v2)
	for {
		select {
		case err := <-b:
			if err != nil {
				t.Fatal(err)
			}
			apply(50)
			checkModel(t, tb, &v2, perDept)
			if st, _ := tb.projectionStatus(v2.Full()); st.Version != 2 || st.State != "active" {
				t.Fatalf("status after the swap: %+v", st)
			}
			return
		default:
			apply(5)
			if st, _ := tb.projectionStatus(v2.Full()); st.Version == 1 {
				checkModel(t, tb, byEmail)
			}
		}
	}
}

// TestBuildCheckFails: a build whose result does not match its source is
// not swapped in; the version before keeps serving and the status says
// why.
func TestBuildCheckFails(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 13))
	tb := NewTable("Tab", 1, 0)
	tb.attach(byEmail)
	for seq := uint64(1); seq <= 500; seq++ {
		tb.Apply(seq, randomRecord(r, seq))
	}
	tb.Publish()
	v2 := *byEmail
	v2.Version = 2
	tb.attach(&v2)
	// A change the source never had, slipped into the build's catch-up:
	// the check must catch it.
	tb.afterHead = func(a *attached) {
		a.buf = append(a.buf, change{new: engine.NewEntity("zz", "zz", engine.Property{Name: "Email", Value: engine.String("lost@x.org")})})
	}
	done := make(chan error, 1)
	go func() { done <- tb.build(context.Background(), &v2, nil) }()
	err := <-done
	if _, ok := err.(*errBuildCheck); !ok {
		t.Fatalf("build of a damaged shadow: %v, want a failed check", err)
	}
	st, _ := tb.projectionStatus(byEmail.Full())
	if st.Version != 1 || st.State != "active" || !strings.Contains(st.Error, "does not match its source") {
		t.Fatalf("status: %+v", st)
	}
	checkModel(t, tb, byEmail)
}

func TestDefinitionValidate(t *testing.T) {
	for _, bad := range []Definition{
		{Name: "X", Source: "Tab", Version: 1, Kind: KindIndex, Key: []string{"A"}},
		{Name: "Idx", Source: "Idx", Version: 1, Kind: KindIndex, Key: []string{"A"}},
		{Name: "Idx", Source: "T1", Version: 0, Kind: KindIndex, Key: []string{"A"}},
		{Name: "Idx", Source: "T1", Version: 1, Kind: "view"},
		{Name: "Idx", Source: "T1", Version: 1, Kind: KindIndex},
		{Name: "Idx", Source: "T1", Version: 1, Kind: KindIndex, Key: []string{"a b"}},
		{Name: "Idx", Source: "T1", Version: 1, Kind: KindIndex, Key: []string{"A"}, Separator: "/"},
		{Name: "Idx", Source: "T1", Version: 1, Kind: KindIndex, Key: []string{"A"}, Include: []string{"SourceRowKey"}},
		{Name: "Idx", Source: "T1", Version: 1, Kind: KindIndex, Key: []string{"A"}, GroupBy: "B"},
		{Name: "Agg", Source: "T1", Version: 1, Kind: KindAggregate, GroupBy: "B"},
		{Name: "Agg", Source: "T1", Version: 1, Kind: KindAggregate, Aggregates: []Aggregate{{Op: "avg", Property: "P", As: "A"}}},
		{Name: "Agg", Source: "T1", Version: 1, Kind: KindAggregate, Aggregates: []Aggregate{{Op: OpSum, As: "A"}}},
		{Name: "Agg", Source: "T1", Version: 1, Kind: KindAggregate, Aggregates: []Aggregate{{Op: OpCount, As: "A"}, {Op: OpSum, Property: "P", As: "A"}}},
		{Name: "Agg", Source: "T1", Version: 1, Kind: KindAggregate, GroupBy: "RowKey", Aggregates: []Aggregate{{Op: OpCount, As: "A"}}},
		{Name: "Agg", Account: "A!", Source: "T1", Version: 1, Kind: KindAggregate, Aggregates: []Aggregate{{Op: OpCount, As: "A"}}},
	} {
		err := bad.Validate()
		if engine.ErrorCode(err) != engine.CodeInvalidInput {
			t.Errorf("%+v: %v, want InvalidInput", bad, err)
		}
	}
	for _, good := range []*Definition{byEmail, byDept, perDept, perPart} {
		if err := good.Validate(); err != nil {
			t.Errorf("%s: %v", good.Name, err)
		}
	}
}

// TestProjectionFaultsWithSource: when its source's view stops at a record
// it cannot apply, a projection stops with it: its readers and waiters get
// TableFaulted naming the record, and its status says faulted, never
// silently behind.
func TestProjectionFaultsWithSource(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 14))
	tb := NewTable("Tab", 1, 0)
	tb.attach(byEmail)
	for seq := uint64(1); seq <= 50; seq++ {
		tb.Apply(seq, randomRecord(r, seq))
	}
	tb.Publish()
	rd := reader(t, tb, byEmail)
	waiting := make(chan error, 1)
	go func() {
		_, err := rd.WaitSeq(context.Background(), 51)
		waiting <- err
	}()
	tb.fault(faultOf(tb, &faultError{seq: 51, err: fmt.Errorf("a damaged record")}, 51))
	if err := <-waiting; engine.ErrorCode(err) != engine.CodeTableFaulted || !strings.Contains(err.Error(), "record 51") {
		t.Fatalf("a waiter of the projection: %v", err)
	}
	if err := rd.Err(); engine.ErrorCode(err) != engine.CodeTableFaulted || !strings.Contains(err.Error(), "its source table Tab is faulted") {
		t.Fatalf("the projection's error: %v", err)
	}
	if st, _ := tb.projectionStatus(byEmail.Full()); st.State != "faulted" || !strings.Contains(st.Error, "record 51") {
		t.Fatalf("status: %+v", st)
	}
}
