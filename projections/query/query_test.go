package query

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections"
)

var pks = []string{"", "a", "b", "b'c", "c", "ü"}

func randomTable(r *rand.Rand, n, rows int) *projections.Snapshot {
	t := projections.NewTable("T", 1, 0)
	for i := 0; i < n; i++ {
		pk := pks[r.IntN(len(pks))]
		var props []engine.Property
		if r.IntN(4) > 0 {
			props = append(props, engine.Property{Name: "A", Value: engine.Int32(int32(r.IntN(10)))})
		}
		if r.IntN(4) > 0 {
			props = append(props, engine.Property{Name: "B", Value: engine.String(fmt.Sprintf("s%d", r.IntN(10)))})
		}
		if r.IntN(4) > 0 {
			props = append(props, engine.Property{Name: "C", Value: engine.Double(float64(r.IntN(10)) / 2)})
		}
		if r.IntN(4) > 0 {
			props = append(props, engine.Property{Name: "D", Value: engine.Bool(r.IntN(2) == 0)})
		}
		if r.IntN(4) == 0 {
			props = append(props, engine.Property{Name: "L", Value: engine.Int64(int64(r.IntN(10)))})
		}
		rec := &engine.Record{Time: int64(i + 1), PartitionKey: pk, Events: []engine.Event{
			{Kind: engine.EventPut, RowKey: fmt.Sprintf("%03d", r.IntN(rows)), Properties: engine.NewEntity("", "", props...).Properties}}}
		t.Apply(uint64(i+1), rec)
	}
	t.Publish()
	return t.Snapshot()
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func randomCompare(r *rand.Rand) string {
	ops := []string{"eq", "ne", "gt", "ge", "lt", "le"}
	op := ops[r.IntN(len(ops))]
	var prop, lit string
	switch r.IntN(8) {
	case 0, 1:
		prop, lit = "PartitionKey", quote(pks[r.IntN(len(pks))])
	case 2, 3:
		prop, lit = "RowKey", quote(fmt.Sprintf("%03d", r.IntN(42)))
	case 4:
		prop, lit = "A", fmt.Sprint(r.IntN(11))
		if r.IntN(3) == 0 {
			lit += "L"
		}
	case 5:
		prop, lit = "B", quote(fmt.Sprintf("s%d", r.IntN(10)))
	case 6:
		prop, lit = "C", fmt.Sprintf("%.1f", float64(r.IntN(10))/2)
	default:
		prop, lit = "D", fmt.Sprint(r.IntN(2) == 0)
	}
	if r.IntN(10) == 0 {
		prop = "Missing"
	}
	if r.IntN(6) == 0 {
		return lit + " " + op + " " + prop
	}
	return prop + " " + op + " " + lit
}

func randomFilter(r *rand.Rand, depth int) string {
	if depth > 3 || r.IntN(3) == 0 {
		return randomCompare(r)
	}
	switch r.IntN(4) {
	case 0:
		return "(" + randomFilter(r, depth+1) + ") or (" + randomFilter(r, depth+1) + ")"
	case 1:
		return "not (" + randomFilter(r, depth+1) + ")"
	}
	return randomFilter(r, depth+1) + " and " + randomFilter(r, depth+1)
}

// TestAgainstBruteForce checks random filters over random data: paging
// through the planned query with continuations returns exactly what a full
// scan with the same predicate returns, in the same order.
func TestAgainstBruteForce(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	snap := randomTable(r, 300, 40)
	for i := 0; i < 3000; i++ {
		src := randomFilter(r, 0)
		f, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		desc := r.IntN(3) == 0
		var want []*engine.Entity
		collect := func(e *engine.Entity) bool {
			if f.Match(e) {
				want = append(want, e)
			}
			return true
		}
		if desc {
			snap.Reverse(collect)
		} else {
			snap.Scan(collect)
		}
		plan := NewPlan(f)
		var got []*engine.Entity
		o := Options{Limit: 1 + r.IntN(7), Descending: desc}
		for pages := 0; ; pages++ {
			if pages > 1000 {
				t.Fatalf("%s: paging does not end", src)
			}
			pg := plan.Run(snap, o)
			got = append(got, pg.Entities...)
			if !pg.More {
				break
			}
			o.From = &Continuation{pg.NextPartitionKey, pg.NextRowKey}
		}
		if len(got) != len(want) {
			t.Fatalf("%s (%s, descending %v): %d entities, brute force %d", src, plan.Kind, desc, len(got), len(want))
		}
		for k := range got {
			if !reflect.DeepEqual(got[k], want[k]) {
				t.Fatalf("%s (descending %v): entity %d differs", src, desc, k)
			}
		}
	}
}

func TestPlanKinds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	snap := randomTable(r, 500, 40)
	inB := 0
	snap.Ascend("b", "", func(e *engine.Entity) bool {
		if e.PartitionKey != "b" {
			return false
		}
		inB++
		return true
	})
	for _, c := range []struct {
		filter      string
		kind        Kind
		maxExamined int
	}{
		{"PartitionKey eq 'b' and RowKey eq '007'", Point, 1},
		{"RowKey eq '007' and PartitionKey eq 'b' and A gt 3", Point, 1},
		{"PartitionKey eq 'b' and RowKey ge '005' and RowKey lt '010'", Range, 5},
		{"PartitionKey eq 'b' and (RowKey eq '001' or RowKey eq '030')", PartitionScan, inB},
		{"PartitionKey eq 'b' and A eq 3", PartitionScan, inB},
		{"PartitionKey eq 'b' and PartitionKey eq 'c'", TableScan, 0}, // contradictory keys: nothing walked
		{"A eq 3", TableScan, snap.Len()},
	} {
		f, err := Parse(c.filter)
		if err != nil {
			t.Fatal(err)
		}
		p := NewPlan(f)
		pg := p.Run(snap, Options{})
		if p.Kind != c.kind || pg.Examined > c.maxExamined {
			t.Errorf("%s: %s examining %d, want %s examining at most %d", c.filter, p.Kind, pg.Examined, c.kind, c.maxExamined)
		}
	}
}

func TestLiterals(t *testing.T) {
	g := "c9da6a32-454c-4b52-8d5f-8c0c86351e14"
	when := time.Date(2014, 8, 22, 0, 50, 32, 123456700, time.UTC)
	cases := map[string]engine.Value{
		"X eq 'it''s'":         engine.String("it's"),
		"X eq 42":              engine.Int32(42),
		"X eq -42":             engine.Int32(-42),
		"X eq 42L":             engine.Int64(42),
		"X eq 1.5":             engine.Double(1.5),
		"X eq 2e3":             engine.Double(2000),
		"X eq true":            engine.Bool(true),
		"X eq guid'" + g + "'": func() engine.Value { b, _ := engine.ParseGuid(g); return engine.Guid(b) }(),
		"X eq datetime'2014-08-22T00:50:32.1234567Z'": engine.DateTime(when),
		"X eq X'0aff'":      engine.Binary([]byte{0x0a, 0xff}),
		"X eq binary'0aff'": engine.Binary([]byte{0x0a, 0xff}),
	}
	for src, want := range cases {
		f, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if c := f.(*Compare); !c.Value.Equal(want) || c.Property != "X" || c.Op != Eq {
			t.Errorf("%s: got %s, want %#v", src, c, want)
		}
	}
}

func TestSyntaxErrors(t *testing.T) {
	for src, pos := range map[string]int{
		"":                       0,
		"A eq":                   4,
		"A eq 'open":             5,
		"A equals 1":             2,
		"(A eq 1":                7,
		"A eq 1)":                6,
		"A eq 3000000000":        5,
		"A eq 1 B eq 2":          7,
		"A eq datetime'x'":       5,
		"A eq guid'x'":           5,
		"A eq B":                 0,
		"1 eq 2":                 0,
		"A eq 1 and":             10,
		"A eq #":                 5,
		"A eq 12abc":             5,
		"not":                    3,
		"A eq nonsense'1'":       5,
		"PartitionKey eq 'a' or": 22,
	} {
		_, err := Parse(src)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: got %v, want a syntax error", src, err)
			continue
		}
		if se.Pos != pos {
			t.Errorf("%q: error at %d (%s), want %d", src, se.Pos, se.Msg, pos)
		}
	}
	if _, err := Parse(strings.Repeat("(", 200) + "A eq 1" + strings.Repeat(")", 200)); err == nil {
		t.Error("200 levels of parentheses accepted")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"PartitionKey eq 'a' and RowKey gt '1'", "not (A lt 5L) or B eq X'00'", "Ts ge datetime'2014-08-22T00:50:32Z'"} {
		f.Add(s)
	}
	snap := randomTable(rand.New(rand.NewPCG(5, 6)), 50, 40)
	f.Fuzz(func(t *testing.T, s string) {
		e, err := Parse(s)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("not a syntax error: %v", err)
			}
			return
		}
		NewPlan(e).Run(snap, Options{Limit: 3})
	})
}

// TestDeadline ends pages early when the time budget is spent; the
// continuation still resumes exactly after the last entity returned.
func TestDeadline(t *testing.T) {
	snap := randomTable(rand.New(rand.NewPCG(7, 8)), 2000, 1000)
	f, _ := Parse("A ge 0 or A lt 0 or B ne 'x'")
	plan := NewPlan(f)
	var want []*engine.Entity
	snap.Scan(func(e *engine.Entity) bool {
		if f.Match(e) {
			want = append(want, e)
		}
		return true
	})
	var got []*engine.Entity
	o := Options{Deadline: time.Now().Add(-time.Second)}
	pages := 0
	for {
		pg := plan.Run(snap, o)
		pages++
		if pg.Examined > 256 {
			t.Fatalf("a page past its deadline examined %d entities", pg.Examined)
		}
		got = append(got, pg.Entities...)
		if !pg.More {
			break
		}
		o.From = &Continuation{pg.NextPartitionKey, pg.NextRowKey}
	}
	if len(got) != len(want) || pages < 2 {
		t.Fatalf("%d entities in %d pages, want %d in several", len(got), pages, len(want))
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("entity %d differs", i)
		}
	}
}

// BenchmarkScan walks 10,000 entities of 12 properties with a filter on a
// non-key property that matches 1%: the cost per entity examined.
func BenchmarkScan(b *testing.B) {
	t := projections.NewTable("T", 1, 0)
	for i := 0; i < 10000; i++ {
		props := []engine.Property{{Name: "Bucket", Value: engine.Int32(int32(i % 100))}}
		for _, n := range []string{"Age", "City", "Department", "Email", "Hired", "Name", "Notes", "Salary", "Serial", "Zip", "Extra"} {
			props = append(props, engine.Property{Name: n, Value: engine.String(n)})
		}
		rec := &engine.Record{Time: int64(i + 1), PartitionKey: fmt.Sprintf("p%03d", i/100), Events: []engine.Event{
			{Kind: engine.EventPut, RowKey: fmt.Sprintf("%05d", i), Properties: engine.NewEntity("", "", props...).Properties}}}
		t.Apply(uint64(i+1), rec)
	}
	t.Publish()
	snap := t.Snapshot()
	f, err := Parse("Bucket eq 50")
	if err != nil {
		b.Fatal(err)
	}
	plan := NewPlan(f)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if pg := plan.Run(snap, Options{}); len(pg.Entities) != 100 || pg.Examined != 10000 {
			b.Fatal(len(pg.Entities), pg.Examined)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10000, "ns/entity")
}
