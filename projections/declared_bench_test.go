package projections

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// Definitions the benchmarks declare on "Emp": the three indexes of
// cmd/cairn-bench projections and an aggregate of four operations.
var (
	benchByEmail = &Definition{Name: "EmpByEmail", Source: "Emp", Version: 1, Kind: KindIndex, Key: []string{"Email"}}
	benchByLast  = &Definition{Name: "EmpByLast", Source: "Emp", Version: 1, Kind: KindIndex, Key: []string{"LastName"}, Include: []string{"FirstName"}}
	benchByDept  = &Definition{Name: "EmpByDept", Source: "Emp", Version: 1, Kind: KindIndex, Key: []string{"Dept", "LastName"}}
	benchPerDept = &Definition{Name: "EmpPerDept", Source: "Emp", Version: 1, Kind: KindAggregate, GroupBy: "Dept", Aggregates: []Aggregate{
		{Op: OpCount, As: "N"}, {Op: OpSum, Property: "Salary", As: "Total"},
		{Op: OpMin, Property: "Salary", As: "Low"}, {Op: OpMax, Property: "Salary", As: "High"}}}
)

var benchDepts = []string{"Sales", "Ops", "Dev", "Legal", "Finance", "Support", "Research", "Marketing"}

// benchEmployee is the record of one put of employee i: ten properties,
// about 600 bytes of values, in one of 1,000 partitions.
func benchEmployee(seq uint64, i int) *engine.Record {
	last := fmt.Sprintf("Last%05d", i%50000)
	e := engine.NewEntity(fmt.Sprintf("p%03d", i%1000), fmt.Sprintf("%08d", i),
		engine.Property{Name: "FirstName", Value: engine.String(fmt.Sprintf("First%d", i%997))},
		engine.Property{Name: "LastName", Value: engine.String(last)},
		engine.Property{Name: "Email", Value: engine.String(fmt.Sprintf("e%08d@contoso.example", i))},
		engine.Property{Name: "Dept", Value: engine.String(benchDepts[i%len(benchDepts)])},
		engine.Property{Name: "Address", Value: engine.String(strings.Repeat("12 Market Street, ", 10))},
		engine.Property{Name: "Notes", Value: engine.String(strings.Repeat("review notes ", 20))},
		engine.Property{Name: "Age", Value: engine.Int32(int32(20 + i%45))},
		engine.Property{Name: "Salary", Value: engine.Int64(int64(30000 + i%70000))},
		engine.Property{Name: "Hired", Value: engine.DateTime(time.Date(2012, 3, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute))},
		engine.Property{Name: "Active", Value: engine.Bool(i%7 != 0)},
	) // sorted by name, as the committer leaves them
	return &engine.Record{Time: int64(seq), PartitionKey: e.PartitionKey, Events: []engine.Event{{
		Kind: engine.EventPut, RowKey: e.RowKey, Properties: e.Properties}}}
}

// benchSource returns a view of n employees, published.
func benchSource(b *testing.B, n int) *Table {
	b.Helper()
	tb := NewTable("Emp", 1, time.Hour)
	for i := 0; i < n; i++ {
		tb.Apply(uint64(i+1), benchEmployee(uint64(i+1), i))
	}
	tb.Publish()
	return tb
}

// benchmarkBuild builds def on a source of -build-entities employees
// (1,000,000), b.N times, and reports source entities per second of the
// build (Table.build: the head, the catch-up, the count check and the
// swap; no writes run beside it).
func benchmarkBuild(b *testing.B, def *Definition) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	tb := benchSource(b, n)
	tb.attach(def)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := *def
		d.Generation = uint64(i + 1)
		if err := tb.build(context.Background(), &d, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entities/s")
	if st, _ := tb.projectionStatus(def.Full()); st.State != "active" || st.Entities == 0 {
		b.Fatalf("projection %s with %d entities", st.State, st.Entities)
	}
}

// BenchmarkBuildIndex builds an index by Email (one entry per entity) on
// a million employees; -short: 100,000.
func BenchmarkBuildIndex(b *testing.B) { benchmarkBuild(b, benchByEmail) }

// BenchmarkBuildIndex2 builds the index by Dept and LastName (two key
// properties).
func BenchmarkBuildIndex2(b *testing.B) { benchmarkBuild(b, benchByDept) }

// BenchmarkBuildAggregate builds count, sum, min and max of salaries per
// department (eight groups) on a million employees.
func BenchmarkBuildAggregate(b *testing.B) { benchmarkBuild(b, benchPerDept) }

// BenchmarkApplyWithIndexes applies one single-entity record (a new
// employee) to a view of 100,000 employees with 0, 1 or 3 indexes
// attached, or the aggregate, publishing a snapshot after every record
// (the applier's worst case: one record per burst) or after every 256 (a
// busy applier): the difference between the sub-benchmarks is what the
// projections cost the applier per record.
func BenchmarkApplyWithIndexes(b *testing.B) {
	const n = 100_000
	for _, every := range []int{1, 256} {
		for _, c := range []struct {
			name string
			defs []*Definition
		}{
			{"indexes=0", nil},
			{"indexes=1", []*Definition{benchByEmail}},
			{"indexes=3", []*Definition{benchByEmail, benchByLast, benchByDept}},
			{"aggregate=1", []*Definition{benchPerDept}},
		} {
			b.Run(fmt.Sprintf("publish-every=%d/%s", every, c.name), func(b *testing.B) {
				tb := NewTable("Emp", 1, time.Hour)
				for _, d := range c.defs {
					tb.attach(d) // on an empty table: active at once
				}
				for i := 0; i < n; i++ {
					tb.Apply(uint64(i+1), benchEmployee(uint64(i+1), i))
				}
				tb.Publish()
				recs := make([]*engine.Record, b.N)
				for i := range recs {
					recs[i] = benchEmployee(uint64(n+i+1), n+i)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i, rec := range recs {
					tb.Apply(uint64(n+i+1), rec)
					if i%every == every-1 {
						tb.Publish()
					}
				}
				tb.Publish()
			})
		}
	}
}
