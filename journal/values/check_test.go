package values_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal/values"
)

// TestCheck: a command's references are checked against the store, each
// under its own entity's key: one to a value of that entity passes, one
// to nothing, to another entity's value or malformed is InvalidInput
// (with its index in a batch); a command without references never asks
// for a key, and a nil store refuses every reference.
func TestCheck(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	keyOf := func(pk, rk string) values.Key {
		return values.Key{Account: "devstoreaccount1", Table: "Staff", PartitionKey: pk, RowKey: rk}
	}
	in, err := s.Put(ctx, keyOf("Sales", "1"), bytes.NewReader([]byte("photo")), 1<<20, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ref := engine.ValueRef(in.ID)
	nothing := engine.ValueRef(engine.NewValueID(time.Now(), [engine.ValueIDRandom]byte{7}))
	asked := 0
	key := func(pk, rk string) (values.Key, error) { asked++; return keyOf(pk, rk), nil }
	ent := func(rk string, props ...engine.Property) *engine.Entity {
		return engine.NewEntity("Sales", rk, props...)
	}
	photo := func(v string) engine.Property { return engine.Property{Name: "Photo", Value: engine.String(v)} }

	plain := &engine.Command{Table: "Staff", Batch: true, Ops: []engine.Operation{
		{Op: engine.OpInsert, Entity: ent("1", engine.Property{Name: "Name", Value: engine.String("cairn-valu")})},
		{Op: engine.OpDelete, Entity: ent("2")},
	}}
	if err := values.Check(ctx, s, plain, key); err != nil || asked != 0 {
		t.Fatalf("a command without references: %v, %d keys asked", err, asked)
	}
	if err := values.Check(ctx, s, &engine.Command{Table: "Staff", Ops: []engine.Operation{{Op: engine.OpInsert, Entity: ent("1", photo(ref))}}}, key); err != nil {
		t.Fatalf("a reference to the entity's value: %v", err)
	}
	for _, c := range []struct {
		name  string
		batch bool
		ops   []engine.Operation
		index int
		says  string
	}{
		{"a reference to nothing", false, []engine.Operation{{Op: engine.OpMerge, Entity: ent("1", photo(nothing))}}, engine.NoIndex, "names no value"},
		{"another entity's value", false, []engine.Operation{{Op: engine.OpInsert, Entity: ent("2", photo(ref))}}, engine.NoIndex, "names no value"},
		{"a malformed reference", false, []engine.Operation{{Op: engine.OpInsert, Entity: ent("1", photo(engine.ValueRefPrefix+"x"))}}, engine.NoIndex, "property Photo"},
		{"another entity's value in a batch", true, []engine.Operation{
			{Op: engine.OpInsert, Entity: ent("1", photo(ref))},
			{Op: engine.OpInsertOrReplace, Entity: ent("3")},
			{Op: engine.OpInsert, Entity: ent("2", photo(ref))},
		}, 2, "names no value"},
	} {
		err := values.Check(ctx, s, &engine.Command{Table: "Staff", Batch: c.batch, Ops: c.ops}, key)
		if err == nil {
			t.Fatalf("%s: accepted", c.name)
		}
		if e := engine.AsError(err); e.Code != engine.CodeInvalidInput || e.Index != c.index || !strings.Contains(e.Message, c.says) {
			t.Fatalf("%s: %v (index %d), want InvalidInput at %d saying %q", c.name, err, e.Index, c.index, c.says)
		}
	}
	one := &engine.Command{Table: "Staff", Ops: []engine.Operation{{Op: engine.OpInsert, Entity: ent("1", photo(ref))}}}
	if err := values.Check(ctx, nil, one, key); engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Fatalf("a reference with no store: %v", err)
	}
}
