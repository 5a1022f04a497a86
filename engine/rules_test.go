package engine

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

func code(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if !errors.As(err, &e) {
		return "not an *Error: " + Code(err.Error())
	}
	return e.Code
}

func insert(e *Entity) *Command {
	return &Command{Table: "Employees", Ops: []Operation{{Op: OpInsert, Entity: e}}}
}

func props(n int) []Property {
	ps := make([]Property, n)
	for i := range ps {
		ps[i] = Property{Name: fmt.Sprintf("P%03d", i), Value: Int32(int32(i))}
	}
	return ps
}

func TestValidateLimits(t *testing.T) {
	astral := "\U0001F600" // two UTF-16 units
	cases := []struct {
		name string
		e    *Entity
		want Code
	}{
		{"empty keys", NewEntity("", ""), ""},
		{"PartitionKey of 512 units", NewEntity(strings.Repeat("x", 512), "r"), ""},
		{"PartitionKey of 513 units", NewEntity(strings.Repeat("x", 513), "r"), CodeKeyValueTooLarge},
		{"RowKey of 512 units", NewEntity("p", strings.Repeat("é", 512)), ""},
		{"RowKey of 513 units", NewEntity("p", strings.Repeat("é", 513)), CodeKeyValueTooLarge},
		{"RowKey of 256 astral runes (512 units)", NewEntity("p", strings.Repeat(astral, 256)), ""},
		{"RowKey of 257 astral runes (514 units)", NewEntity("p", strings.Repeat(astral, 257)), CodeKeyValueTooLarge},
		{"invalid UTF-8 key", NewEntity("p\xff", "r"), CodeInvalidInput},
		{"invalid UTF-8 RowKey", NewEntity("p", "\xed\xa0\x80"), CodeInvalidInput},
		{"invalid UTF-8 property name", NewEntity("p", "r", Property{Name: "A\xff", Value: Bool(true)}), CodeInvalidInput},
		{"truncated UTF-8 property name", NewEntity("p", "r", Property{Name: "\xc3", Value: Bool(true)}), CodeInvalidInput},
		{"252 properties", NewEntity("p", "r", props(252)...), ""},
		{"253 properties", NewEntity("p", "r", props(253)...), CodeTooManyProperties},
		{"name of 255", NewEntity("p", "r", Property{Name: strings.Repeat("a", 255), Value: Bool(true)}), ""},
		{"name of 256", NewEntity("p", "r", Property{Name: strings.Repeat("a", 256), Value: Bool(true)}), CodePropertyNameTooLong},
		{"name with a dot", NewEntity("p", "r", Property{Name: "a.b", Value: Bool(true)}), CodePropertyNameInvalid},
		{"name starting with a digit", NewEntity("p", "r", Property{Name: "1a", Value: Bool(true)}), CodePropertyNameInvalid},
		{"empty name", NewEntity("p", "r", Property{Name: "", Value: Bool(true)}), CodePropertyNameInvalid},
		{"underscore and unicode name", NewEntity("p", "r", Property{Name: "_Größe2", Value: Bool(true)}), ""},
		{"reserved Timestamp", NewEntity("p", "r", Property{Name: "Timestamp", Value: Bool(true)}), CodePropertyNameInvalid},
		{"reserved PartitionKey", NewEntity("p", "r", Property{Name: "PartitionKey", Value: String("x")}), CodePropertyNameInvalid},
		{"duplicate names", NewEntity("p", "r", Property{Name: "A", Value: Bool(true)}, Property{Name: "A", Value: Bool(false)}), CodeDuplicatePropertiesSpecified},
		{"duplicate names, unsorted", &Entity{PartitionKey: "p", RowKey: "r", Properties: []Property{{Name: "B", Value: Bool(true)}, {Name: "A", Value: Bool(true)}, {Name: "B", Value: Bool(false)}}}, CodeDuplicatePropertiesSpecified},
		{"unsorted, no duplicate", &Entity{PartitionKey: "p", RowKey: "r", Properties: []Property{{Name: "B", Value: Bool(true)}, {Name: "A", Value: Bool(true)}}}, ""},
		{"invalid type", NewEntity("p", "r", Property{Name: "A"}), CodeInvalidValueType},
		{"string of 32768 units", NewEntity("p", "r", Property{Name: "S", Value: String(strings.Repeat("x", 32768))}), ""},
		{"string of 32769 units", NewEntity("p", "r", Property{Name: "S", Value: String(strings.Repeat("x", 32769))}), CodePropertyValueTooLarge},
		{"string of 16385 astral runes", NewEntity("p", "r", Property{Name: "S", Value: String(strings.Repeat(astral, 16385))}), CodePropertyValueTooLarge},
		{"invalid UTF-8 string", NewEntity("p", "r", Property{Name: "S", Value: String("a\xffb")}), CodeInvalidInput},
		{"surrogate in UTF-8 string", NewEntity("p", "r", Property{Name: "S", Value: String("\xed\xa0\x80")}), CodeInvalidInput},
		{"U+FFFD itself is valid", NewEntity("\ufffd", "r", Property{Name: "S", Value: String("\ufffd")}), ""},
		{"binary of 65536", NewEntity("p", "r", Property{Name: "B", Value: Binary(make([]byte, 65536))}), ""},
		{"binary of 65537", NewEntity("p", "r", Property{Name: "B", Value: Binary(make([]byte, 65537))}), CodePropertyValueTooLarge},
		{"DateTime at 1601-01-01", NewEntity("p", "r", Property{Name: "D", Value: DateTime(MinDateTime)}), ""},
		{"DateTime before 1601", NewEntity("p", "r", Property{Name: "D", Value: DateTime(MinDateTime.Add(-time.Microsecond))}), CodeOutOfRangeInput},
		{"DateTime after 9999", NewEntity("p", "r", Property{Name: "D", Value: DateTimeTicks(TimeToTicks(MaxDateTime) + 1)}), CodeOutOfRangeInput},
	}
	// An entity just under and just over 1 MiB: 16 binaries of 64 KiB.
	var big []Property
	for i := 0; i < 16; i++ {
		big = append(big, Property{Name: fmt.Sprintf("B%02d", i), Value: Binary(make([]byte, 65536))})
	}
	under := NewEntity("p", "r", big...)
	under.Properties[15].Value = Binary(make([]byte, 65536-(EntitySize(under)-MaxEntitySize)))
	over := under.Clone()
	over.Properties[15].Value = Binary(make([]byte, len(over.Properties[15].Value.Bytes())+1))
	cases = append(cases,
		struct {
			name string
			e    *Entity
			want Code
		}{"entity of exactly 1 MiB", under, ""},
		struct {
			name string
			e    *Entity
			want Code
		}{"entity of 1 MiB + 1", over, CodeEntityTooLarge})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateCommand(insert(c.e))
			if got := code(err); got != c.want {
				t.Fatalf("got %q (%v), want %q", got, err, c.want)
			}
			if err != nil {
				if e := err.(*Error); e.Index != NoIndex || e.Message == "" {
					t.Fatalf("single operation error %+v: want a message and no index", e)
				}
			}
		})
	}
	if EntitySize(under) != MaxEntitySize {
		t.Fatalf("test entity is %d bytes, want exactly %d", EntitySize(under), MaxEntitySize)
	}
}

func TestValidateKeyCharacters(t *testing.T) {
	for _, r := range []rune{'/', '\\', '#', '?', 0x00, 0x01, 0x1f, 0x7f, 0x80, 0x9f} {
		for _, which := range []string{"pk", "rk"} {
			e := NewEntity("p", "r")
			if which == "pk" {
				e.PartitionKey = "a" + string(r) + "b"
			} else {
				e.RowKey = "a" + string(r) + "b"
			}
			err := ValidateCommand(insert(e))
			if code(err) != CodeOutOfRangeInput {
				t.Errorf("%s with U+%04X: got %v, want OutOfRangeInput", which, r, err)
			} else if !strings.Contains(err.Error(), "position 1") {
				t.Errorf("%s with U+%04X: message %q does not say where", which, r, err)
			}
			// Delete validates keys too.
			del := &Command{Table: "T1x", Ops: []Operation{{Op: OpDelete, Entity: e}}}
			if code(ValidateCommand(del)) != CodeOutOfRangeInput {
				t.Errorf("delete %s with U+%04X accepted", which, r)
			}
		}
	}
	for _, r := range []rune{' ', 0xa0, 'ü', '日', '.', '*', '>', '\''} {
		if err := ValidateCommand(insert(NewEntity("a"+string(r), "b"+string(r)))); err != nil {
			t.Errorf("U+%04X rejected: %v", r, err)
		}
	}
}

func TestValidateTableName(t *testing.T) {
	for name, want := range map[string]Code{
		"abc": "", "Employees2026": "", strings.Repeat("a", 63): "",
		"ab": CodeInvalidInput, strings.Repeat("a", 64): CodeInvalidInput, "1abc": CodeInvalidInput,
		"ab-c": CodeInvalidInput, "ab_c": CodeInvalidInput, "tables": CodeInvalidInput, "Tables": CodeInvalidInput, "äbc": CodeInvalidInput,
	} {
		if got := code(ValidateTableName(name)); got != want {
			t.Errorf("%q: got %q, want %q", name, got, want)
		}
	}
}

// TestValidateRecord: a record a view applies follows the rules of the
// commands that make records; one that breaks any is refused whole.
func TestValidateRecord(t *testing.T) {
	good := func() *Record {
		return &Record{PartitionKey: "p", Time: 1,
			Commands: []CommandRef{{ID: "c", First: 0, Count: 2}},
			Events:   []Event{{Kind: EventPut, RowKey: "r", Properties: props(2)}, {Kind: EventDelete, RowKey: "s"}},
			Messages: []Message{{Queue: "q-1", Body: []byte("x")}}}
	}
	if err := ValidateRecord(good()); err != nil {
		t.Fatalf("good record refused: %v", err)
	}
	for name, tc := range map[string]struct {
		spoil func(*Record)
		want  Code
	}{
		"partition key with /":    {func(r *Record) { r.PartitionKey = "a/b" }, CodeOutOfRangeInput},
		"partition key too long":  {func(r *Record) { r.PartitionKey = strings.Repeat("k", MaxKeyUnits+1) }, CodeKeyValueTooLarge},
		"row key with control":    {func(r *Record) { r.Events[0].RowKey = "a\x01" }, CodeOutOfRangeInput},
		"deleted row key with #":  {func(r *Record) { r.Events[1].RowKey = "#" }, CodeOutOfRangeInput},
		"reserved property name":  {func(r *Record) { r.Events[0].Properties[0].Name = "RowKey" }, CodePropertyNameInvalid},
		"property name not ident": {func(r *Record) { r.Events[0].Properties[0].Name = "a b" }, CodePropertyNameInvalid},
		"too many properties":     {func(r *Record) { r.Events[0].Properties = props(MaxUserProperties + 1) }, CodeTooManyProperties},
		"entity too large": {func(r *Record) {
			big := String(strings.Repeat("x", MaxStringUnits))
			r.Events[0].Properties = nil
			for i := range 20 {
				r.Events[0].Properties = append(r.Events[0].Properties, Property{Name: fmt.Sprintf("P%02d", i), Value: big})
			}
		}, CodeEntityTooLarge},
		"unknown event kind":   {func(r *Record) { r.Events[1].Kind = 9 }, CodeInvalidInput},
		"command out of range": {func(r *Record) { r.Commands[0].Count = 3 }, CodeInvalidInput},
		"bad queue name":       {func(r *Record) { r.Messages[0].Queue = "a.b" }, CodeInvalidInput},
	} {
		r := good()
		tc.spoil(r)
		if got := code(ValidateRecord(r)); got != tc.want {
			t.Errorf("%s: got %q, want %q", name, got, tc.want)
		}
	}
}

func TestValidateCatalogRecord(t *testing.T) {
	for _, tc := range []struct {
		rec  CatalogRecord
		want Code
	}{
		{CatalogRecord{Kind: CatalogTableCreated, Name: "Employees"}, ""},
		{CatalogRecord{Kind: CatalogTableDeleted, Name: "Employees"}, ""},
		{CatalogRecord{Kind: 7, Name: "Employees"}, CodeInvalidInput},
		{CatalogRecord{Kind: CatalogTableCreated, Name: "x"}, CodeInvalidInput},
		{CatalogRecord{Kind: CatalogTableCreated, Name: "a.b>c"}, CodeInvalidInput},
	} {
		if got := code(ValidateCatalogRecord(&tc.rec)); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.rec, got, tc.want)
		}
	}
}

func batch(ops ...Operation) *Command { return &Command{Table: "Employees", Batch: true, Ops: ops} }

func TestValidateBatch(t *testing.T) {
	ins := func(pk, rk string) Operation { return Operation{Op: OpInsert, Entity: NewEntity(pk, rk)} }
	var hundred []Operation
	for i := 0; i < 100; i++ {
		hundred = append(hundred, ins("p", fmt.Sprintf("%03d", i)))
	}
	if err := ValidateCommand(batch(hundred...)); err != nil {
		t.Fatalf("batch of 100: %v", err)
	}
	if code(ValidateCommand(batch(append(hundred, ins("p", "x"))...))) != CodeInvalidInput {
		t.Fatal("batch of 101 accepted")
	}
	err := ValidateCommand(batch(ins("p", "1"), ins("p", "2"), ins("q", "3")))
	if e, ok := err.(*Error); !ok || e.Code != CodeCommandsInBatchActOnDifferentPartitions || e.Index != 2 {
		t.Fatalf("different partitions: %v", err)
	}
	err = ValidateCommand(batch(ins("p", "1"), ins("p", "2"), Operation{Op: OpDelete, Entity: NewEntity("p", "1")}))
	if e, ok := err.(*Error); !ok || e.Code != CodeInvalidDuplicateRow || e.Index != 2 {
		t.Fatalf("duplicate row: %v", err)
	}
	err = ValidateCommand(batch(ins("p", "1"), ins("p", "a/b")))
	if e, ok := err.(*Error); !ok || e.Code != CodeOutOfRangeInput || e.Index != 1 {
		t.Fatalf("bad key in op 1: %v", err)
	}
	// Five entities of ~1 MiB each make a batch over 4 MiB.
	var heavy []Operation
	for i := 0; i < 5; i++ {
		var ps []Property
		for k := 0; k < 15; k++ {
			ps = append(ps, Property{Name: fmt.Sprintf("B%02d", k), Value: Binary(make([]byte, 65536))})
		}
		heavy = append(heavy, Operation{Op: OpInsert, Entity: NewEntity("p", fmt.Sprint(i), ps...)})
	}
	if code(ValidateCommand(batch(heavy[:4]...))) != "" {
		t.Fatal("batch of 4 × 0.94 MiB rejected")
	}
	if code(ValidateCommand(batch(heavy...))) != CodeRequestBodyTooLarge {
		t.Fatal("batch over 4 MiB accepted")
	}
	if code(ValidateCommand(batch())) != CodeInvalidInput {
		t.Fatal("empty batch accepted")
	}
	two := &Command{Table: "Employees", Ops: []Operation{ins("p", "1"), ins("p", "2")}}
	if code(ValidateCommand(two)) != CodeInvalidInput {
		t.Fatal("two operations outside a batch accepted")
	}
	if code(ValidateCommand(&Command{Table: "Employees", Ops: []Operation{{Op: OpInsert}}})) != CodeInvalidInput {
		t.Fatal("operation without entity accepted")
	}
	msg := insert(NewEntity("p", "r"))
	msg.Messages = []Message{{Queue: "bad queue"}}
	if code(ValidateCommand(msg)) != CodeInvalidInput {
		t.Fatal("bad queue name accepted")
	}
}

// TestValidateUTF8: no string that is not valid UTF-8 passes
// ValidateCommand, whichever part of a command carries it, so a decoder
// that does not check (msgpack) or a command built by a function cannot
// store one; batch errors name the operation.
func TestValidateUTF8(t *testing.T) {
	const bad = "a\xffb"
	ins := func(pk, rk string, ps ...Property) Operation {
		return Operation{Op: OpInsert, Entity: NewEntity(pk, rk, ps...)}
	}
	cases := []struct {
		name  string
		cmd   *Command
		index int
	}{
		{"PartitionKey", insert(NewEntity(bad, "r")), NoIndex},
		{"RowKey", insert(NewEntity("p", bad)), NoIndex},
		{"property name", insert(NewEntity("p", "r", Property{Name: bad, Value: Int32(1)})), NoIndex},
		{"string value", insert(NewEntity("p", "r", Property{Name: "S", Value: String(bad)})), NoIndex},
		{"delete key", &Command{Table: "Employees", Ops: []Operation{{Op: OpDelete, Entity: NewEntity("p", bad)}}}, NoIndex},
		{"command id", &Command{ID: bad, Table: "Employees", Ops: []Operation{ins("p", "r")}}, NoIndex},
		{"message id", &Command{Table: "Employees", Ops: []Operation{ins("p", "r")}, Messages: []Message{{Queue: "q1", ID: bad}}}, NoIndex},
		{"batch operation 1", batch(ins("p", "1"), ins("p", "2", Property{Name: "S", Value: String(bad)})), 1},
		{"batch delete 2", batch(ins("p", "1"), ins("p", "2"), Operation{Op: OpDelete, Entity: NewEntity("p", bad)}), 2},
	}
	for _, c := range cases {
		err := ValidateCommand(c.cmd)
		e, ok := err.(*Error)
		if !ok || e.Code != CodeInvalidInput || e.Index != c.index {
			t.Errorf("%s: got %v, want InvalidInput at index %d", c.name, err, c.index)
		}
	}
}

// state is a plain map used as the decider's committed partition state.
type state map[string]*Entity

func (s state) Entity(rk string) (*Entity, bool) { e, ok := s[rk]; return e, ok }

func committed(rk string, seq uint64, ps ...Property) *Entity {
	e := NewEntity("p", rk, ps...)
	e.Version = Version{Seq: seq}
	return e
}

func TestDecide(t *testing.T) {
	const epoch = 7
	st := state{
		"a": committed("a", 10, Property{Name: "X", Value: Int64(1 << 60)}, Property{Name: "Y", Value: String("y")}),
	}
	cur := ETag(epoch, Version{Seq: 10})
	stale := ETag(epoch, Version{Seq: 9})
	otherEpoch := ETag(epoch+1, Version{Seq: 10})
	newA := NewEntity("p", "a", Property{Name: "Z", Value: Double(5)})
	newB := NewEntity("p", "b", Property{Name: "Z", Value: Double(5)})
	cases := []struct {
		name  string
		op    Operation
		want  Code
		check func(t *testing.T, ev Event)
	}{
		{"insert existing", Operation{Op: OpInsert, Entity: newA}, CodeEntityAlreadyExists, nil},
		{"insert new", Operation{Op: OpInsert, Entity: newB}, "", func(t *testing.T, ev Event) {
			if ev.Kind != EventPut || ev.RowKey != "b" || len(ev.Properties) != 1 {
				t.Fatalf("%+v", ev)
			}
		}},
		{"replace missing", Operation{Op: OpReplace, Entity: newB, IfMatch: "*"}, CodeResourceNotFound, nil},
		{"replace with current etag", Operation{Op: OpReplace, Entity: newA, IfMatch: cur}, "", func(t *testing.T, ev Event) {
			if len(ev.Properties) != 1 || ev.Properties[0].Name != "Z" {
				t.Fatalf("replace kept old properties: %+v", ev.Properties)
			}
		}},
		{"replace with *", Operation{Op: OpReplace, Entity: newA, IfMatch: "*"}, "", nil},
		{"replace without If-Match", Operation{Op: OpReplace, Entity: newA}, "", nil},
		{"replace with stale etag", Operation{Op: OpReplace, Entity: newA, IfMatch: stale}, CodeUpdateConditionNotSatisfied, nil},
		{"replace with other epoch's etag", Operation{Op: OpReplace, Entity: newA, IfMatch: otherEpoch}, CodeUpdateConditionNotSatisfied, nil},
		{"replace with garbage etag", Operation{Op: OpReplace, Entity: newA, IfMatch: "garbage"}, CodeUpdateConditionNotSatisfied, nil},
		{"merge", Operation{Op: OpMerge, Entity: NewEntity("p", "a", Property{Name: "Y", Value: Bool(true)}, Property{Name: "Z", Value: Double(5)}), IfMatch: cur}, "", func(t *testing.T, ev Event) {
			want := []Property{{Name: "X", Value: Int64(1 << 60)}, {Name: "Y", Value: Bool(true)}, {Name: "Z", Value: Double(5)}}
			if !reflect.DeepEqual(ev.Properties, want) {
				t.Fatalf("merged %#v, want %#v", ev.Properties, want)
			}
		}},
		{"merge stale", Operation{Op: OpMerge, Entity: newA, IfMatch: stale}, CodeUpdateConditionNotSatisfied, nil},
		{"merge missing", Operation{Op: OpMerge, Entity: newB, IfMatch: "*"}, CodeResourceNotFound, nil},
		{"insert or replace existing", Operation{Op: OpInsertOrReplace, Entity: newA}, "", func(t *testing.T, ev Event) {
			if len(ev.Properties) != 1 {
				t.Fatalf("%+v", ev.Properties)
			}
		}},
		{"insert or merge existing", Operation{Op: OpInsertOrMerge, Entity: newA}, "", func(t *testing.T, ev Event) {
			if len(ev.Properties) != 3 {
				t.Fatalf("%+v", ev.Properties)
			}
		}},
		{"insert or merge missing", Operation{Op: OpInsertOrMerge, Entity: newB}, "", func(t *testing.T, ev Event) {
			if len(ev.Properties) != 1 {
				t.Fatalf("%+v", ev.Properties)
			}
		}},
		{"delete", Operation{Op: OpDelete, Entity: NewEntity("p", "a"), IfMatch: cur}, "", func(t *testing.T, ev Event) {
			if ev.Kind != EventDelete || ev.RowKey != "a" {
				t.Fatalf("%+v", ev)
			}
		}},
		{"delete stale", Operation{Op: OpDelete, Entity: NewEntity("p", "a"), IfMatch: stale}, CodeUpdateConditionNotSatisfied, nil},
		{"delete missing", Operation{Op: OpDelete, Entity: NewEntity("p", "b"), IfMatch: "*"}, CodeResourceNotFound, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := fmt.Sprintf("%#v", st["a"])
			cmd := &Command{Table: "T1x", Ops: []Operation{c.op}}
			cmdBefore := fmt.Sprintf("%#v", *c.op.Entity)
			evs, err := Decide(st, epoch, cmd, Claims{})
			if code(err) != c.want {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if err != nil && evs != nil {
				t.Fatalf("failure with events %+v", evs)
			}
			if c.check != nil {
				c.check(t, evs[0])
			}
			if fmt.Sprintf("%#v", st["a"]) != before || fmt.Sprintf("%#v", *c.op.Entity) != cmdBefore {
				t.Fatal("Decide modified its inputs")
			}
			if err == nil && len(evs[0].Properties) > 0 && len(c.op.Entity.Properties) > 0 && &evs[0].Properties[0] == &c.op.Entity.Properties[0] {
				t.Fatal("the event shares the command's property slice")
			}
		})
	}
}

func TestDecideBatch(t *testing.T) {
	st := state{"a": committed("a", 3)}
	cmd := batch(
		Operation{Op: OpInsert, Entity: NewEntity("p", "b")},
		Operation{Op: OpMerge, Entity: NewEntity("p", "a"), IfMatch: "*"},
		Operation{Op: OpInsert, Entity: NewEntity("p", "a")},
		Operation{Op: OpInsert, Entity: NewEntity("p", "c")},
	)
	evs, err := Decide(st, 1, cmd, Claims{})
	if e, ok := err.(*Error); !ok || e.Code != CodeEntityAlreadyExists || e.Index != 2 || evs != nil {
		t.Fatalf("got %v %v, want EntityAlreadyExists at index 2 and no events", evs, err)
	}
	cmd.Ops = append(cmd.Ops[:2], cmd.Ops[3])
	evs, err = Decide(st, 1, cmd, Claims{})
	if err != nil || len(evs) != 3 {
		t.Fatalf("got %v %v", evs, err)
	}
}

func TestOverlay(t *testing.T) {
	base := state{"a": committed("a", 5, Property{Name: "X", Value: Int32(1)})}
	ov := NewOverlay(base)
	ov.Apply([]Event{{Kind: EventDelete, RowKey: "a"}, {Kind: EventPut, RowKey: "b"}}, 42)
	if _, ok := ov.Entity("a"); ok {
		t.Fatal("a deleted in the overlay is still visible")
	}
	b, ok := ov.Entity("b")
	if !ok || b.Timestamp != 42 || b.Version.Seq != 0 {
		t.Fatalf("pending b = %+v, %v", b, ok)
	}
	// A pending entity matches only "*": no client can know its ETag yet.
	_, err := Decide(ov, 1, &Command{Table: "T1x", Ops: []Operation{{Op: OpReplace, Entity: NewEntity("p", "b"), IfMatch: ETag(1, Version{})}}}, Claims{})
	if code(err) != CodeUpdateConditionNotSatisfied {
		t.Fatalf("pending entity matched a concrete etag: %v", err)
	}
	if _, err := Decide(ov, 1, &Command{Table: "T1x", Ops: []Operation{{Op: OpReplace, Entity: NewEntity("p", "b"), IfMatch: "*"}}}, Claims{}); err != nil {
		t.Fatal(err)
	}
	ov.Reset()
	if _, ok := ov.Entity("a"); !ok {
		t.Fatal("Reset did not restore the base")
	}
	if _, ok := base["b"]; ok {
		t.Fatal("the overlay wrote into its base")
	}
}

func TestETagRoundTrip(t *testing.T) {
	v := Version{Seq: 1 << 40, Index: 99}
	e, got, err := ParseETag(ETag(3, v))
	if err != nil || e != 3 || got != v {
		t.Fatalf("got %d %+v %v", e, got, err)
	}
	for _, bad := range []string{"", "*", `W/"1.2"`, `"1.2.3"`, `W/"a.b.c"`, `W/"1.2.3.4"`} {
		if _, _, err := ParseETag(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// BenchmarkValidateRecord: what a view spends checking a record it did not
// write itself, for a record of one entity with ten properties of about
// 100 bytes each (the replay benchmark's shape).
func BenchmarkValidateRecord(b *testing.B) {
	ps := make([]Property, 10)
	for i := range ps {
		ps[i] = Property{Name: fmt.Sprintf("Prop%02d", i), Value: String(strings.Repeat("v", 100))}
	}
	rec := &Record{PartitionKey: "partition-0001", Time: 1, Nonce: "n",
		Commands: []CommandRef{{ID: "id", Count: 1}},
		Events:   []Event{{Kind: EventPut, RowKey: "row-000001", Properties: ps}}}
	b.ReportAllocs()
	for b.Loop() {
		if err := ValidateRecord(rec); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeBytesLengthChecked: a binary or Guid value whose length prefix
// claims more than any entity may hold is refused before anything is
// allocated (msgpack's DecodeBytes would allocate what the prefix claims).
func TestDecodeBytesLengthChecked(t *testing.T) {
	for _, typ := range []Type{TypeBinary, TypeGuid} {
		// [[name, type, bin32 of 0xfffffff0 bytes]] and nothing after.
		data := []byte{0x91, 0x93, 0xa1, 'B', byte(typ), 0xc6, 0xff, 0xff, 0xff, 0xf0}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := DecodeProperties(msgpack.NewDecoder(bytes.NewReader(data)))
		runtime.ReadMemStats(&after)
		if err == nil || after.TotalAlloc-before.TotalAlloc > 1<<20 {
			t.Fatalf("type %d: %v after allocating %d bytes", typ, err, after.TotalAlloc-before.TotalAlloc)
		}
	}
}
