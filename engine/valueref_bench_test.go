package engine

import (
	"strings"
	"testing"
	"time"
)

// BenchmarkValueRefs is what every write pays for large values at the
// door and in the decision when it holds none: a scan of its String
// values' prefixes. The entity is the benchmarks' usual one, ten
// properties of about 1 KB; "with a reference" adds one to it.
func BenchmarkValueRefs(b *testing.B) {
	props := []Property{
		{Name: "Name", Value: String("Jones, Margaret Anne (Sales)")},
		{Name: "Email", Value: String("margaret.jones@contoso.example")},
		{Name: "Department", Value: String("Sales")},
		{Name: "City", Value: String("Springfield")},
		{Name: "Age", Value: Int32(42)},
		{Name: "Salary", Value: Double(50000.25)},
		{Name: "Hired", Value: DateTime(time.Date(2012, 3, 1, 9, 0, 0, 0, time.UTC))},
		{Name: "Serial", Value: Int64(1234567)},
		{Name: "Bucket", Value: Int32(7)},
		{Name: "Notes", Value: String(strings.Repeat("Lorem ipsum dolor sit amet. ", 30))},
	}
	run := func(b *testing.B, props []Property, want int) {
		claims := Claims{Now: time.Now()}
		b.ReportAllocs()
		for b.Loop() {
			ids, err := ValueRefs(props)
			if err != nil || len(ids) != want {
				b.Fatal(ids, err)
			}
			if err := claims.check(nil, props); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("none", func(b *testing.B) { run(b, props, 0) })
	var rnd [ValueIDRandom]byte
	ref := Property{Name: "Photo", Value: String(ValueRef(NewValueID(time.Now(), rnd)))}
	b.Run("with a reference", func(b *testing.B) { run(b, append(props[:len(props):len(props)], ref), 1) })
}
