package engine

import (
	"strings"
	"testing"
	"time"
)

func TestValueID(t *testing.T) {
	at := time.Date(2026, 11, 26, 10, 30, 0, 123456789, time.FixedZone("x", 3600))
	id := NewValueID(at, [ValueIDRandom]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	got, err := ParseValueID(id)
	if err != nil || !got.Equal(at) {
		t.Fatalf("ParseValueID(%q) = %v, %v; want %v", id, got, err, at)
	}
	if !strings.HasPrefix(id, "20261126T093000.123456789Z-") {
		t.Fatalf("id %q: want the UTC time first", id)
	}
	later := NewValueID(at.Add(time.Nanosecond), [ValueIDRandom]byte{})
	if later <= id {
		t.Fatalf("ids do not sort by time: %q <= %q", later, id)
	}
	for _, bad := range []string{
		"", "x", id[:len(id)-1], id + "a", strings.Replace(id, "-", "_", 1),
		strings.Replace(id, "T", "t", 1), strings.ToUpper(id),
		"20261399T093000.123456789Z-aaaaaaaaaaaaaaaa", // no 99th of month 13
		id[:len(id)-1] + "1",                          // not base32
		"20261126T093000.123456789Z-aaaaaaaaaaaaaaa=",
	} {
		if _, err := ParseValueID(bad); ErrorCode(err) != CodeInvalidInput {
			t.Errorf("ParseValueID(%q) = %v; want InvalidInput", bad, err)
		}
	}
	if _, _, err := ParseValueRef(String(ValueRef(id))); err != nil {
		t.Fatal(err)
	}
	for _, v := range []Value{String(id), Binary([]byte(ValueRef(id))), String(ValueRefPrefix)} {
		if _, _, err := ParseValueRef(v); ErrorCode(err) != CodeInvalidInput {
			t.Errorf("ParseValueRef(%#v) = %v; want InvalidInput", v, err)
		}
	}
}

func TestDecideClaims(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	const w = time.Hour
	ref := func(age time.Duration, b byte) Value {
		return String(ValueRef(NewValueID(now.Add(-age), [ValueIDRandom]byte{b})))
	}
	young, old, future := ref(time.Minute, 1), ref(2*time.Hour, 2), ref(-2*time.Hour, 3)
	st := state{
		"a": committed("a", 10, Property{Name: "Photo", Value: old}, Property{Name: "Y", Value: String("y")}),
	}
	claims := Claims{Now: now, Window: w}
	cases := []struct {
		name string
		op   Operation
		want Code
	}{
		{"young claimed by an insert", Operation{Op: OpInsert, Entity: NewEntity("p", "b", Property{Name: "Photo", Value: young})}, ""},
		{"old claimed by an insert", Operation{Op: OpInsert, Entity: NewEntity("p", "b", Property{Name: "Photo", Value: old})}, CodeInvalidInput},
		{"ahead of the clock", Operation{Op: OpInsert, Entity: NewEntity("p", "b", Property{Name: "Photo", Value: future})}, CodeInvalidInput},
		{"malformed", Operation{Op: OpInsert, Entity: NewEntity("p", "b", Property{Name: "Photo", Value: String(ValueRefPrefix + "x")})}, CodeInvalidInput},
		{"old kept by a replace", Operation{Op: OpReplace, IfMatch: "*", Entity: NewEntity("p", "a", Property{Name: "Photo", Value: old})}, ""},
		{"old kept by an upsert", Operation{Op: OpInsertOrReplace, Entity: NewEntity("p", "a", Property{Name: "Photo", Value: old}, Property{Name: "Z", Value: young})}, ""},
		{"old kept by a merge that does not name it", Operation{Op: OpMerge, IfMatch: "*", Entity: NewEntity("p", "a", Property{Name: "Y", Value: String("z")})}, ""},
		{"old moved to another property", Operation{Op: OpMerge, IfMatch: "*", Entity: NewEntity("p", "a", Property{Name: "Copy", Value: old})}, CodeInvalidInput},
		{"old claimed by another row", Operation{Op: OpInsertOrMerge, Entity: NewEntity("p", "c", Property{Name: "Photo", Value: old})}, CodeInvalidInput},
		{"young replaces old", Operation{Op: OpMerge, IfMatch: "*", Entity: NewEntity("p", "a", Property{Name: "Photo", Value: young})}, ""},
		{"delete of a holder", Operation{Op: OpDelete, IfMatch: "*", Entity: NewEntity("p", "a")}, ""},
	}
	for _, c := range cases {
		_, err := Decide(st, 1, &Command{Table: "T1x", Ops: []Operation{c.op}}, claims)
		if got := ErrorCode(err); err == nil && c.want != "" || err != nil && got != c.want {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
	// In a batch, an entity deleted then written again claims anew.
	cmd := &Command{Table: "T1x", Batch: true, Ops: []Operation{
		{Op: OpInsert, Entity: NewEntity("p", "b", Property{Name: "Photo", Value: young})},
		{Op: OpReplace, IfMatch: "*", Entity: NewEntity("p", "a", Property{Name: "Photo", Value: old})},
		{Op: OpInsertOrReplace, Entity: NewEntity("p", "c", Property{Name: "Photo", Value: old})},
	}}
	_, err := Decide(st, 1, cmd, claims)
	if e := AsError(err); e == nil || e.Code != CodeInvalidInput || e.Index != 2 {
		t.Fatalf("batch: %v; want InvalidInput at index 2", err)
	}
	// The window ends for a claim, not for a value held: the same
	// reference a minute later is refused to a new claim.
	late := Claims{Now: now.Add(w), Window: w}
	if _, err := Decide(st, 1, &Command{Table: "T1x", Ops: []Operation{{Op: OpInsert, Entity: NewEntity("p", "b", Property{Name: "Photo", Value: young})}}}, late); ErrorCode(err) != CodeInvalidInput {
		t.Fatalf("a claim after the window: %v", err)
	}
}

func TestHolds(t *testing.T) {
	id := NewValueID(time.Unix(0, 0), [ValueIDRandom]byte{})
	props := []Property{{Name: "A", Value: String("x")}, {Name: "B", Value: String(ValueRef(id))}}
	if !Holds(props, id) || Holds(props[:1], id) || Holds(props, id[:len(id)-1]+"b") {
		t.Fatal("Holds")
	}
	ids, err := ValueRefs(props)
	if err != nil || len(ids) != 1 || ids[0] != id {
		t.Fatalf("ValueRefs = %v, %v", ids, err)
	}
	if _, err := ValueRefs(append(props, Property{Name: "C", Value: String(ValueRefPrefix)})); ErrorCode(err) != CodeInvalidInput || !strings.Contains(err.Error(), "property C") {
		t.Fatalf("ValueRefs of a malformed one = %v", err)
	}
}
