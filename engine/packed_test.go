package engine

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPackedRoundTrip packs entities with every type, extreme values and
// empty and long strings, and decodes them back unchanged, into a new
// entity and into a reused one.
func TestPackedRoundTrip(t *testing.T) {
	long := strings.Repeat("é", 70_000) // lengths of three varint bytes
	entities := []*Entity{
		{PartitionKey: "", RowKey: ""},
		NewEntity("p", "r",
			Property{Name: "B", Value: Bool(true)},
			Property{Name: "Bf", Value: Bool(false)},
			Property{Name: "Bin", Value: Binary([]byte{0, 1, 0xff})},
			Property{Name: "BinEmpty", Value: Binary(nil)},
			Property{Name: "D", Value: Double(-1.5)},
			Property{Name: "DNaN", Value: Double(math.NaN())},
			Property{Name: "DInf", Value: Double(math.Inf(-1))},
			Property{Name: "G", Value: Guid([16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})},
			Property{Name: "I32", Value: Int32(math.MinInt32)},
			Property{Name: "I64", Value: Int64(math.MinInt64)},
			Property{Name: "I64Max", Value: Int64(math.MaxInt64)},
			Property{Name: "S", Value: String("")},
			Property{Name: "SLong", Value: String(long)},
			Property{Name: "T", Value: DateTime(time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC))},
		),
		{PartitionKey: long, RowKey: "r", Timestamp: math.MaxInt64, Version: Version{Seq: math.MaxUint64, Index: math.MaxUint32}},
		{PartitionKey: "p", RowKey: long, Timestamp: -1, Version: Version{Seq: 1}},
	}
	entities[1].Timestamp = TimeToTicks(time.Now())
	entities[1].Version = Version{Seq: 300, Index: 2}
	var reused Entity
	for i, want := range entities {
		p := Pack(want)
		if pk, rk := p.Keys(); pk != want.PartitionKey || rk != want.RowKey {
			t.Errorf("%d: keys %q %q", i, pk, rk)
		}
		if got := p.PartitionKey(); got != want.PartitionKey {
			t.Errorf("%d: PartitionKey %q", i, got)
		}
		for _, got := range []*Entity{p.Entity(), func() *Entity { p.DecodeInto(&reused); return &reused }()} {
			if !sameEntity(got, want) {
				t.Errorf("%d: decoded %+v, want %+v", i, got, want)
			}
		}
	}
}

// sameEntity compares entities as DeepEqual does, but NaN equal to NaN
// and no property slice equal to an empty one.
func sameEntity(a, b *Entity) bool {
	if a.PartitionKey != b.PartitionKey || a.RowKey != b.RowKey || a.Timestamp != b.Timestamp ||
		a.Version != b.Version || len(a.Properties) != len(b.Properties) {
		return false
	}
	for i := range a.Properties {
		if !reflect.DeepEqual(a.Properties[i], b.Properties[i]) {
			return false
		}
	}
	return true
}

// TestPackedOrder checks that packed entities order as their keys do,
// including keys that are prefixes of one another and keys whose lengths
// take more varint bytes than others'.
func TestPackedOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"", "a", "b", "\x7f", "é", "ab", strings.Repeat("a", 200)}
	key := func() string {
		var sb strings.Builder
		for range r.IntN(3) {
			sb.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return sb.String()
	}
	type keys struct{ pk, rk string }
	var ks []keys
	for range 500 {
		ks = append(ks, keys{key(), key()})
	}
	for i := range ks {
		for j := range ks {
			a, b := ks[i], ks[j]
			want := strings.Compare(a.pk, b.pk)
			if want == 0 {
				want = strings.Compare(a.rk, b.rk)
			}
			pa := Pack(&Entity{PartitionKey: a.pk, RowKey: a.rk, Properties: []Property{{Name: "X", Value: Int32(int32(i))}}})
			if got := ComparePacked(pa, PackedKey(b.pk, b.rk)); got != want {
				t.Fatalf("compare (%q, %q) with (%q, %q): %d, want %d", a.pk, a.rk, b.pk, b.rk, got, want)
			}
		}
	}
	sorted := slices.SortedFunc(slices.Values(ks), func(a, b keys) int {
		return ComparePacked(PackedKey(a.pk, a.rk), PackedKey(b.pk, b.rk))
	})
	if !slices.IsSortedFunc(sorted, func(a, b keys) int {
		if c := strings.Compare(a.pk, b.pk); c != 0 {
			return c
		}
		return strings.Compare(a.rk, b.rk)
	}) {
		t.Fatal("packed order is not key order")
	}
}

// TestAppendPackedKey: keys appended one after another are each
// PackedKey's bytes, read back by Keys, for keys with lengths of one and
// several varint bytes.
func TestAppendPackedKey(t *testing.T) {
	long := strings.Repeat("k", 300)
	keys := [][2]string{{"", ""}, {"p", "r"}, {long, ""}, {"", long}, {"é", long}}
	var b []byte
	var ends []int
	for _, k := range keys {
		b = AppendPackedKey(b, k[0], k[1])
		ends = append(ends, len(b))
	}
	start := 0
	for i, k := range keys {
		got := Packed(b[start:ends[i]])
		if got != PackedKey(k[0], k[1]) {
			t.Errorf("%d: appended %q, want %q", i, got, PackedKey(k[0], k[1]))
		}
		if pk, rk := got.Keys(); pk != k[0] || rk != k[1] {
			t.Errorf("%d: keys %q %q", i, pk, rk)
		}
		start = ends[i]
	}
}

// TestPackedMalformed checks that a packed string Pack did not make is
// refused loudly rather than read as some other entity.
func TestPackedMalformed(t *testing.T) {
	good := Pack(NewEntity("p", "r", Property{Name: "S", Value: String("value")}))
	for _, bad := range []Packed{good[:len(good)-1], good + "x", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "\x05ab"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%q decoded without a panic", bad)
				}
			}()
			bad.Entity()
		}()
	}
}

func BenchmarkPacked(b *testing.B) {
	e := NewEntity("partition-0001", "row-0000001")
	for i := range 10 {
		e.Properties = append(e.Properties, Property{Name: "Property" + string(rune('A'+i)), Value: String(strings.Repeat("v", 90))})
	}
	p := Pack(e)
	b.Run("pack", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Pack(e)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.Entity()
		}
	})
	b.Run("decode-into", func(b *testing.B) {
		b.ReportAllocs()
		var into Entity
		for b.Loop() {
			p.DecodeInto(&into)
		}
	})
	b.Run("compare", func(b *testing.B) {
		q := PackedKey("partition-0001", "row-0000002")
		for b.Loop() {
			ComparePacked(p, q)
		}
	})
}

// TestPackedFields reads every property of packed entities in place, as
// their decoded form gives it, and finds no property that is not there.
func TestPackedFields(t *testing.T) {
	e := NewEntity("pk", "rk",
		Property{Name: "B", Value: Bool(true)},
		Property{Name: "D", Value: Double(2.5)},
		Property{Name: "G", Value: Guid([16]byte{15: 1})},
		Property{Name: "I", Value: Int64(-300)},
		Property{Name: "S", Value: String(strings.Repeat("s", 200))},
		Property{Name: "T", Value: DateTimeTicks(1 << 60)},
		Property{Name: "X", Value: Binary([]byte("bytes"))},
	)
	e.Timestamp = 12345
	var f PackedFields
	f.Reset(Pack(e))
	if pk, rk := f.Keys(); pk != "pk" || rk != "rk" || f.Ticks() != 12345 {
		t.Fatalf("keys %q %q, ticks %d", pk, rk, f.Ticks())
	}
	for i, p := range e.Properties {
		v, at, ok := f.GetHinted(p.Name, -1)
		if !ok || at != i || !reflect.DeepEqual(v, p.Value) {
			t.Errorf("%s: %v at %d (%v), want %v at %d", p.Name, v, at, ok, p.Value, i)
		}
	}
	for _, name := range []string{"", "A", "C", "Sa", "Z", "b"} {
		if v, _, ok := f.GetHinted(name, 3); ok {
			t.Errorf("%q found: %v", name, v)
		}
	}
	f.Reset(Pack(&Entity{}))
	if _, _, ok := f.GetHinted("B", 0); ok {
		t.Error("a property of an entity without properties")
	}
}
