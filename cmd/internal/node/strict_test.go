package node_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
)

// TestStrictRequestsOverNATS: over the NATS door, a field spelled in
// another case, a field the protocol does not have, one given twice and
// one the operation does not take are refused with InvalidInput, in JSON
// and msgpack, on the command, table and change feed subjects, and
// nothing is stored: the first write that succeeds afterwards is the
// table's first journal record, and no table was created.
func TestStrictRequestsOverNATS(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	if _, err := th.c.CreateTable(ctx, "Strict"); err != nil {
		t.Fatal(err)
	}
	// refusal sends body and returns the reply's error (nil: none).
	refusal := func(subject string, body []byte) *engine.Error {
		t.Helper()
		b := ask(t, th.nc, subject, body, nil)
		rep, err := wire.DecodeReplyJSON(b)
		if wire.Detect(body, "") == wire.Msgpack {
			rep, err = wire.DecodeReplyMsgpack(b)
		}
		if err != nil {
			t.Fatalf("reply %q: %v", b, err)
		}
		return rep.Error
	}
	entity := `{"PartitionKey":"p","RowKey":"r","Name":"x"}`
	cases := []struct {
		name, subject, body, says string
	}{
		{"OP", "cairn.cmd.Strict", `{"OP":"Insert","entity":` + entity + `}`, `unknown field "OP"`},
		{"Op", "cairn.cmd.Strict", `{"Op":"InsertOrReplace","entity":` + entity + `}`, `unknown field "Op"`},
		{"ENTITY", "cairn.cmd.Strict", `{"op":"Insert","ENTITY":` + entity + `}`, `unknown field "ENTITY"`},
		{"IFMATCH", "cairn.cmd.Strict", `{"op":"Replace","IFMATCH":"*","entity":` + entity + `}`, `unknown field "IFMATCH"`},
		{"PARTITIONKEY", "cairn.cmd.Strict", `{"op":"Delete","PARTITIONKEY":"p","rowKey":"r"}`, `unknown field "PARTITIONKEY"`},
		{"ID", "cairn.cmd.Strict", `{"op":"Insert","ID":"c-1","entity":` + entity + `}`, `unknown field "ID"`},
		{"Messages", "cairn.cmd.Strict", `{"op":"Insert","entity":` + entity + `,"Messages":[{"queue":"archive"}]}`, `unknown field "Messages"`},
		{"a message's Queue", "cairn.cmd.Strict", `{"op":"Insert","entity":` + entity + `,"messages":[{"Queue":"archive"}]}`, `unknown field "Queue"`},
		{"in a batch", "cairn.cmd.Strict", `{"op":"Batch","ops":[{"op":"Insert","Entity":` + entity + `}]}`, `unknown field "Entity"`},
		{"no field", "cairn.cmd.Strict", `{"op":"Insert","entity":` + entity + `,"colour":"red"}`, `unknown field "colour"`},
		{"twice", "cairn.cmd.Strict", `{"op":"Insert","entity":` + entity + `,"entity":` + entity + `}`, `"entity" is given twice`},
		{"ifMatch on Insert", "cairn.cmd.Strict", `{"op":"Insert","ifMatch":"*","entity":` + entity + `}`, `Insert does not take "ifMatch"`},
		{"ifMatch on InsertOrMerge", "cairn.cmd.Strict", `{"op":"InsertOrMerge","ifMatch":"*","entity":` + entity + `}`, `InsertOrMerge does not take "ifMatch"`},
		{"ifMatch on Insert in a batch", "cairn.cmd.Strict", `{"op":"Batch","ops":[{"op":"Insert","ifMatch":"*","entity":` + entity + `}]}`, `Insert in a batch does not take "ifMatch"`},
		{"id on an operation of a batch", "cairn.cmd.Strict", `{"op":"Batch","ops":[{"op":"Insert","id":"c-1","entity":` + entity + `}]}`, `cannot have "id"`},
		{"table on Insert", "cairn.cmd.Strict", `{"op":"Insert","table":"Other","entity":` + entity + `}`, `Insert does not take "table"`},
		{"asOf on a write", "cairn.cmd.Strict", `{"op":"InsertOrReplace","asOf":1,"entity":` + entity + `}`, `InsertOrReplace does not take "asOf"`},
		{"filter on Insert", "cairn.cmd.Strict", `{"op":"Insert","filter":"x","entity":` + entity + `}`, `Insert does not take "filter"`},
		{"ifMatch on Retrieve", "cairn.cmd.Strict", `{"op":"Retrieve","partitionKey":"p","rowKey":"r","ifMatch":"*"}`, `Retrieve does not take "ifMatch"`},
		{"filter on Retrieve", "cairn.cmd.Strict", `{"op":"Retrieve","partitionKey":"p","rowKey":"r","filter":"Name eq 'x'"}`, `Retrieve does not take "filter"`},
		{"id on Retrieve", "cairn.cmd.Strict", `{"op":"Retrieve","partitionKey":"p","rowKey":"r","id":"c-1"}`, `Retrieve does not take "id"`},
		{"TOP on Query", "cairn.cmd.Strict", `{"op":"Query","TOP":1}`, `unknown field "TOP"`},
		{"entity on Query", "cairn.cmd.Strict", `{"op":"Query","entity":` + entity + `}`, `Query does not take "entity"`},
		{"an unknown op", "cairn.cmd.Strict", `{"op":"Upsert","entity":` + entity + `}`, `Retrieve, Query, PutValue or GetValue`},
		{"TABLE", "cairn.tables", `{"op":"CreateTable","TABLE":"Made"}`, `unknown field "TABLE"`},
		{"id on CreateTable", "cairn.tables", `{"op":"CreateTable","table":"Made","id":"c-1"}`, `CreateTable does not take "id"`},
		{"entity on CreateTable", "cairn.tables", `{"op":"CreateTable","table":"Made","entity":` + entity + `}`, `CreateTable does not take "entity"`},
		{"FROM", "cairn.changes.Strict", `{"FROM":1}`, `unknown field "FROM"`},
	}
	for _, c := range cases {
		e := refusal(c.subject, []byte(c.body))
		if e == nil || e.Code != engine.CodeInvalidInput || !strings.Contains(e.Message, c.says) {
			t.Errorf("JSON, %s: %+v, want InvalidInput saying %s", c.name, e, c.says)
		}
	}
	mp := func(kv ...any) []byte {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		_ = enc.EncodeMapLen(len(kv) / 2)
		for i := 0; i < len(kv); i += 2 {
			_ = enc.EncodeString(kv[i].(string))
			if e, ok := kv[i+1].(*engine.Entity); ok {
				_ = wire.EncodeEntity(enc, e)
			} else {
				_ = enc.Encode(kv[i+1])
			}
		}
		return buf.Bytes()
	}
	e := engine.NewEntity("p", "r")
	for name, body := range map[string][]byte{
		"OP":                mp("OP", "Insert", "entity", e),
		"IfMatch":           mp("op", "Replace", "IfMatch", "*", "entity", e),
		"ifMatch on Insert": mp("op", "Insert", "ifMatch", "*", "entity", e),
		"op twice":          mp("op", "Insert", "op", "Insert", "entity", e),
		"select on Delete":  mp("op", "Delete", "partitionKey", "p", "rowKey", "r", "select", []string{"A"}),
		"Top on Query":      mp("op", "Query", "Top", 1),
		"table on Query":    mp("op", "Query", "table", "Strict"),
	} {
		if e := refusal("cairn.cmd.Strict", body); e == nil || e.Code != engine.CodeInvalidInput {
			t.Errorf("msgpack, %s: %+v, want InvalidInput", name, e)
		}
	}

	// Nothing was stored, and no table made.
	if _, _, err := th.c.Retrieve(ctx, "Strict", "p", "r"); engine.ErrorCode(err) != engine.CodeResourceNotFound {
		t.Fatalf("retrieve after the refusals: %v", err)
	}
	if rep, err := th.c.Insert(ctx, "Strict", engine.NewEntity("p", "first")); err != nil || rep.Seq != 1 {
		t.Fatalf("first good write: %+v %v; want journal position 1", rep, err)
	}
	tables, err := th.c.ListTables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range tables {
		if ti.Name == "Made" {
			t.Fatalf("a refused CreateTable made %+v", ti)
		}
	}
	// What the page spells exactly is taken.
	for body, want := range map[string]engine.Code{
		`{"op":"Replace","ifMatch":"*","entity":` + entity + `}`:             engine.CodeResourceNotFound, // taken: p/r does not exist
		`{"op":"Retrieve","partitionKey":"p","rowKey":"first","position":1}`: "",
		`{"op":"Query","top":1,"position":1}`:                                "",
	} {
		var got engine.Code
		e := refusal("cairn.cmd.Strict", []byte(body))
		if e != nil {
			got = e.Code
		}
		if got != want {
			t.Errorf("%s: %+v, want %q", body, e, want)
		}
	}
}
