package wire

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
)

// docFields is what docs/PROTOCOL.md (Requests, Queries) says each
// operation takes, written out again by hand: the table of fields.go is
// checked against the page, not against itself.
var docFields = map[string][]string{
	"Insert":          {"op", "id", "entity", "messages"},
	"Replace":         {"op", "id", "entity", "ifMatch", "messages"},
	"Update":          {"op", "id", "entity", "ifMatch", "messages"},
	"Merge":           {"op", "id", "entity", "ifMatch", "messages"},
	"InsertOrReplace": {"op", "id", "entity", "messages"},
	"InsertOrMerge":   {"op", "id", "entity", "messages"},
	"Delete":          {"op", "id", "partitionKey", "rowKey", "entity", "ifMatch", "messages"},
	"Batch":           {"op", "id", "ops", "messages"},
	"Retrieve":        {"op", "partitionKey", "rowKey", "entity", "asOf", "position"},
	"Query":           {"op", "filter", "select", "top", "continuation", "descending", "asOf", "position"},
	"CreateTable":     {"op", "table"},
	"DeleteTable":     {"op", "table"},
	"ListTables":      {"op"},
}

// docBatchFields is what an operation of a Batch takes ("each with op,
// entity or keys, ifMatch"; the id and messages go on the Batch).
var docBatchFields = map[string][]string{
	"Insert":          {"op", "entity"},
	"Replace":         {"op", "entity", "ifMatch"},
	"Update":          {"op", "entity", "ifMatch"},
	"Merge":           {"op", "entity", "ifMatch"},
	"InsertOrReplace": {"op", "entity"},
	"InsertOrMerge":   {"op", "entity"},
	"Delete":          {"op", "partitionKey", "rowKey", "entity", "ifMatch"},
}

// docFieldValues holds a valid value of every field of a request.
var docFieldValues = map[string]any{
	"id":           "c-1",
	"ifMatch":      "*",
	"entity":       map[string]any{"PartitionKey": "p", "RowKey": "r"},
	"partitionKey": "p",
	"rowKey":       "r",
	"ops":          []any{map[string]any{"op": "Insert", "entity": map[string]any{"PartitionKey": "p", "RowKey": "r"}}},
	"table":        "Employees",
	"messages":     []any{map[string]any{"queue": "archive", "body": "x"}},
	"asOf":         3,
	"position":     7,
	"filter":       "PartitionKey eq 'p'",
	"select":       []any{"Name"},
	"top":          10,
	"continuation": "q1!a!x",
	"descending":   true,
}

// docBase is the least each operation needs besides "op".
func docBase(op string) []reqMember {
	switch op {
	case "Delete", "Retrieve":
		return []reqMember{{"partitionKey", "p"}, {"rowKey", "r"}}
	case "Batch":
		return []reqMember{{"ops", docFieldValues["ops"]}}
	case "CreateTable", "DeleteTable":
		return []reqMember{{"table", "Employees"}}
	case "ListTables", "Query":
		return nil
	}
	return []reqMember{{"entity", docFieldValues["entity"]}}
}

// A member of a request written in a test: its name as sent, and value.
type reqMember struct {
	name  string
	value any
}

// body writes the members in order, in JSON or msgpack (where a JSON
// request's entity is the msgpack entity form).
func body(t *testing.T, enc Encoding, ms []reqMember) []byte {
	t.Helper()
	if enc == JSON {
		b := []byte{'{'}
		for i, m := range ms {
			if i > 0 {
				b = append(b, ',')
			}
			v, err := json.Marshal(m.value)
			if err != nil {
				t.Fatal(err)
			}
			b = append(AppendJSONString(b, m.name), ':')
			b = append(b, v...)
		}
		return append(b, '}')
	}
	var buf strings.Builder
	e := msgpack.NewEncoder(&buf)
	enc1 := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	enc1(e.EncodeMapLen(len(ms)))
	for _, m := range ms {
		enc1(e.EncodeString(m.name))
		enc1(encodeTestValue(e, m.name, m.value))
	}
	return []byte(buf.String())
}

// encodeTestValue writes a field's value in msgpack: an entity in the
// entity form, operations and messages in theirs.
func encodeTestValue(e *msgpack.Encoder, name string, v any) error {
	switch name {
	case "entity", "Entity", "ENTITY":
		m := v.(map[string]any)
		return EncodeEntity(e, engine.NewEntity(m["PartitionKey"].(string), m["RowKey"].(string)))
	case "messages":
		return e.Encode([]any{[]any{"archive", "", []byte("x")}})
	case "ops":
		if err := e.EncodeArrayLen(1); err != nil {
			return err
		}
		if err := e.EncodeMapLen(2); err != nil {
			return err
		}
		if err := e.EncodeString("op"); err != nil {
			return err
		}
		if err := e.EncodeString("Insert"); err != nil {
			return err
		}
		if err := e.EncodeString("entity"); err != nil {
			return err
		}
		return EncodeEntity(e, engine.NewEntity("p", "r"))
	}
	return e.Encode(v)
}

// decodeAsDoor decodes a request as the NATS door does: a Query as one,
// and an entity write into a command.
func decodeAsDoor(data []byte, enc Encoding) error {
	if IsQuery(data, enc) {
		_, err := DecodeQueryRequest(data, enc)
		return err
	}
	r, err := DecodeRequest(data, enc)
	if err != nil {
		return err
	}
	if o := operationNamed([]byte(r.Op)); o == nil || !o.tables && r.Op != "Retrieve" {
		_, err = ToCommand(r, "Employees")
	}
	return err
}

func sortedOps() []string {
	ops := make([]string, 0, len(docFields))
	for op := range docFields {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	return ops
}

var encodings = []struct {
	name string
	enc  Encoding
}{{"JSON", JSON}, {"msgpack", Msgpack}}

// TestStrictFieldsTaken: every field the page gives an operation is
// taken, one at a time on top of what the operation needs, in both
// encodings.
func TestStrictFieldsTaken(t *testing.T) {
	for _, op := range sortedOps() {
		for _, f := range docFields[op] {
			base := docBase(op)
			if f == "op" || slices.ContainsFunc(base, func(m reqMember) bool { return m.name == f }) {
				continue
			}
			for _, e := range encodings {
				ms := append([]reqMember{{"op", op}}, base...)
				ms = append(ms, reqMember{f, docFieldValues[f]})
				data := body(t, e.enc, ms)
				if err := decodeAsDoor(data, e.enc); err != nil {
					t.Errorf("%s, %s with %q: %v", e.name, op, f, err)
				}
			}
		}
	}
}

// TestStrictFieldsRefused: every field of the protocol that the page
// does not give an operation is refused with InvalidInput, naming the
// field and the operation, in both encodings, and in a request built in
// Go (ToCommand).
func TestStrictFieldsRefused(t *testing.T) {
	for _, op := range sortedOps() {
		for _, f := range requestFields {
			if slices.Contains(docFields[op], f) {
				continue
			}
			for _, e := range encodings {
				ms := append([]reqMember{{"op", op}}, docBase(op)...)
				ms = append(ms, reqMember{f, docFieldValues[f]})
				data := body(t, e.enc, ms)
				err := decodeAsDoor(data, e.enc)
				if engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), op+" does not take \""+f+"\"") {
					t.Errorf("%s, %s with %q: %v, want InvalidInput naming both", e.name, op, f, err)
				}
			}
		}
	}
	for _, r := range []*engine.Request{
		{Op: "Insert", Entity: engine.NewEntity("p", "r"), IfMatch: "*"},
		{Op: "InsertOrReplace", Entity: engine.NewEntity("p", "r"), IfMatch: "*"},
		{Op: "Insert", Entity: engine.NewEntity("p", "r"), Table: "T"},
		{Op: "Merge", Entity: engine.NewEntity("p", "r"), PartitionKey: "p"},
		{Op: "Delete", PartitionKey: "p", RowKey: "r", Position: 3},
		{Op: "Batch", Entity: engine.NewEntity("p", "r"), Ops: []engine.Request{{Op: "Insert", Entity: engine.NewEntity("p", "r")}}},
	} {
		if _, err := ToCommand(r, "Employees"); engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), r.Op+" does not take") {
			t.Errorf("built in Go, %+v: %v, want InvalidInput", r, err)
		}
	}
}

// TestStrictBatchOpFields: an operation of a Batch takes what the page
// gives it and nothing else; a refusal names the field and carries the
// operation's index.
func TestStrictBatchOpFields(t *testing.T) {
	ops := make([]string, 0, len(docBatchFields))
	for op := range docBatchFields {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		for _, f := range requestFields {
			base := docBase(op)
			if f == "op" || slices.ContainsFunc(base, func(m reqMember) bool { return m.name == f }) {
				continue
			}
			inner := map[string]any{"op": op}
			for _, m := range base {
				inner[m.name] = m.value
			}
			inner[f] = docFieldValues[f]
			first := map[string]any{"op": "Insert", "entity": map[string]any{"PartitionKey": "p", "RowKey": "0"}}
			data := body(t, JSON, []reqMember{{"op", "Batch"}, {"ops", []any{first, inner}}})
			err := decodeAsDoor(data, JSON)
			if slices.Contains(docBatchFields[op], f) {
				if err != nil {
					t.Errorf("%s in a batch with %q: %v", op, f, err)
				}
				continue
			}
			if engine.ErrorCode(err) != engine.CodeInvalidInput || engine.AsError(err).Index != 1 || !strings.Contains(err.Error(), `"`+f+`"`) {
				t.Errorf("%s in a batch with %q: %v, want InvalidInput at operation 1 naming the field", op, f, err)
			}
			// msgpack, built in Go where the Request has the field.
			r := &engine.Request{Op: "Batch", Ops: []engine.Request{{Op: "Insert", Entity: engine.NewEntity("p", "0")}, {Op: op}}}
			o := &r.Ops[1]
			for _, m := range base {
				switch m.name {
				case "entity":
					o.Entity = engine.NewEntity("p", "r")
				case "partitionKey":
					o.PartitionKey = "p"
				case "rowKey":
					o.RowKey = "r"
				}
			}
			if !setField(o, f) {
				continue // a Query's: no such field in a Request
			}
			mp, err := EncodeRequestMsgpack(r)
			if err != nil {
				t.Fatal(err)
			}
			if err := decodeAsDoor(mp, Msgpack); engine.ErrorCode(err) != engine.CodeInvalidInput || engine.AsError(err).Index != 1 {
				t.Errorf("msgpack, %s in a batch with %q: %v, want InvalidInput at operation 1", op, f, err)
			}
			if _, err := ToCommand(r, "Employees"); engine.ErrorCode(err) != engine.CodeInvalidInput || engine.AsError(err).Index != 1 {
				t.Errorf("built in Go, %s in a batch with %q: %v, want InvalidInput at operation 1", op, f, err)
			}
		}
	}
}

// setField gives r a value of field f; false when a Request has no such
// field.
func setField(r *engine.Request, f string) bool {
	switch f {
	case "id":
		r.ID = "c-1"
	case "ifMatch":
		r.IfMatch = "*"
	case "entity":
		r.Entity = engine.NewEntity("p", "r")
	case "partitionKey":
		r.PartitionKey = "p"
	case "rowKey":
		r.RowKey = "r"
	case "ops":
		r.Ops = []engine.Request{{Op: "Insert", Entity: engine.NewEntity("p", "r")}}
	case "table":
		r.Table = "Employees"
	case "messages":
		r.Messages = []engine.Message{{Queue: "archive"}}
	case "asOf":
		r.AsOf = 3
	case "position":
		r.Position = 7
	default:
		return false
	}
	return true
}

// spellings are the ways a client may get a field's case wrong.
func spellings(f string) []string {
	out := []string{strings.ToUpper(f), strings.ToUpper(f[:1]) + f[1:]}
	if l := strings.ToLower(f); l != f {
		out = append(out, l)
	}
	return out
}

// TestStrictFieldNamesCase: a field spelled in another case ("OP",
// "IfMatch", "partitionkey") is an unknown field, in JSON (where
// encoding/json would take it) and msgpack, for every field of every
// operation; the refusal names the field meant.
func TestStrictFieldNamesCase(t *testing.T) {
	for _, op := range sortedOps() {
		for _, f := range docFields[op] {
			for _, wrong := range spellings(f) {
				for _, e := range encodings {
					ms := append([]reqMember{{"op", op}}, docBase(op)...)
					if !slices.ContainsFunc(ms, func(m reqMember) bool { return m.name == f }) {
						ms = append(ms, reqMember{f, docFieldValues[f]})
					}
					for i := range ms {
						if ms[i].name == f {
							ms[i].name = wrong
						}
					}
					err := decodeAsDoor(body(t, e.enc, ms), e.enc)
					if engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), `unknown field "`+wrong+`"`) ||
						!strings.Contains(err.Error(), `"`+f+`"`) {
						t.Errorf("%s, %s with %q for %q: %v, want InvalidInput naming both", e.name, op, wrong, f, err)
					}
				}
			}
		}
	}
	// The members of an outbox message, in a request and in the HTTP
	// API's X-Cairn-Messages.
	for _, f := range []string{"queue", "subject", "id", "body", "bodyBase64"} {
		for _, wrong := range spellings(f) {
			msg := `[{"queue":"archive","` + wrong + `":"eA=="}]`
			if f == "queue" {
				msg = `[{"` + wrong + `":"archive"}]`
			}
			req := `{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r"},"messages":` + msg + `}`
			if _, err := DecodeRequestJSON([]byte(req)); engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), `unknown field "`+wrong+`"`) {
				t.Errorf("a message's %q as %q: %v", f, wrong, err)
			}
			if _, err := DecodeMessagesJSON([]byte(msg)); engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), `unknown field "`+wrong+`"`) {
				t.Errorf("X-Cairn-Messages, %q as %q: %v", f, wrong, err)
			}
		}
	}
	// A change feed request's.
	for _, f := range []string{"from", "max", "partitions", "wait"} {
		for _, wrong := range spellings(f) {
			for _, e := range encodings {
				data := body(t, e.enc, []reqMember{{wrong, map[string]any{"from": 1, "max": 5, "partitions": []any{"p"}, "wait": "1s"}[f]}})
				if _, err := DecodeChangesRequest(data, e.enc); engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), `unknown field "`+wrong+`"`) {
					t.Errorf("%s, a change feed request's %q as %q: %v", e.name, f, wrong, err)
				}
			}
		}
	}
	if IsQuery([]byte(`{"OP":"Query"}`), JSON) || IsQuery([]byte(`{"Op":"Query"}`), JSON) {
		t.Error(`"OP": "Query" taken for a Query`)
	}
}

// TestStrictUnknownAndTwice: members that are no field, and a field
// given twice, are refused; a name written with escapes is the name.
func TestStrictUnknownAndTwice(t *testing.T) {
	for _, c := range []struct {
		name, body string
		ok         bool
	}{
		{"no field", `{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r"},"colour":"red"}`, false},
		{"an entity's name at the top", `{"op":"Delete","PartitionKey":"p","RowKey":"r"}`, false},
		{"an ETag's name", `{"op":"Merge","etag":"*","entity":{"PartitionKey":"p","RowKey":"r"}}`, false},
		{"a Query's field misspelt", `{"op":"Query","order":"desc"}`, false},
		{"in an operation of a batch", `{"op":"Batch","ops":[{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r"},"x":1}]}`, false},
		{"in a message", `{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r"},"messages":[{"queue":"archive","topic":"x"}]}`, false},
		{"op twice", `{"op":"Insert","op":"Insert","entity":{"PartitionKey":"p","RowKey":"r"}}`, false},
		{"op twice, once escaped", `{"op":"Insert","\u006fp":"Delete","entity":{"PartitionKey":"p","RowKey":"r"}}`, false},
		{"a key twice", `{"op":"Delete","partitionKey":"p","partitionKey":"q","rowKey":"r"}`, false},
		{"ifMatch twice in a batch", `{"op":"Batch","ops":[{"op":"Delete","partitionKey":"p","rowKey":"r","ifMatch":"*","ifMatch":"*"}]}`, false},
		{"a message's body twice", `{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r"},"messages":[{"queue":"archive","body":"a","body":"b"}]}`, false},
		{"a Query's top twice", `{"op":"Query","top":1,"top":2}`, false},
		{"op escaped", `{"\u006fp":"Insert","entity":{"PartitionKey":"p","RowKey":"r"}}`, true},
	} {
		err := decodeAsDoor([]byte(c.body), JSON)
		if c.ok != (err == nil) || !c.ok && engine.ErrorCode(err) != engine.CodeInvalidInput {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// msgpack: {"op": "Insert", "op": "Delete", ...} and a key twice.
	for _, ms := range [][]reqMember{
		{{"op", "Insert"}, {"op", "Delete"}, {"entity", docFieldValues["entity"]}},
		{{"op", "Delete"}, {"partitionKey", "p"}, {"rowKey", "r"}, {"rowKey", "s"}},
		{{"op", "Query"}, {"top", 1}, {"top", 2}},
		{{"op", "Insert"}, {"entity", docFieldValues["entity"]}, {"colour", "red"}},
	} {
		if err := decodeAsDoor(body(t, Msgpack, ms), Msgpack); engine.ErrorCode(err) != engine.CodeInvalidInput {
			t.Errorf("msgpack %v: %v, want InvalidInput", ms, err)
		}
	}
	for _, ms := range [][]reqMember{{{"from", 1}, {"from", 2}}, {{"from", 1}, {"to", 2}}} {
		for _, e := range encodings {
			if _, err := DecodeChangesRequest(body(t, e.enc, ms), e.enc); engine.ErrorCode(err) != engine.CodeInvalidInput {
				t.Errorf("%s, change feed request %v: %v, want InvalidInput", e.name, ms, err)
			}
		}
	}
}

// TestUnknownOperationNamesEvery: an unknown operation's refusal names
// every operation of the subject, Query included; the table of
// operations has every engine operation.
func TestUnknownOperationNamesEvery(t *testing.T) {
	for _, body := range []string{`{"op":"Frobnicate"}`, `{"op":"insert","entity":{"PartitionKey":"p","RowKey":"r"}}`, `{}`} {
		err := decodeAsDoor([]byte(body), JSON)
		if engine.ErrorCode(err) != engine.CodeInvalidInput {
			t.Fatalf("%s: %v", body, err)
		}
		for _, op := range []string{"Insert", "Replace", "Update", "Merge", "InsertOrReplace", "InsertOrMerge", "Delete", "Batch", "Retrieve", "Query"} {
			if !strings.Contains(err.Error(), op+",") && !strings.Contains(err.Error(), op+" ") && !strings.Contains(err.Error(), op+")") {
				t.Errorf("%s: %q does not name %s", body, err, op)
			}
		}
	}
	for _, op := range []string{"CreateTable", "DeleteTable", "ListTables"} {
		if !strings.Contains(TableOps(), op) {
			t.Errorf("TableOps() = %q, without %s", TableOps(), op)
		}
	}
	err := decodeAsDoor([]byte(`{"op":"Batch","ops":[{"op":"Retrieve","partitionKey":"p","rowKey":"r"}]}`), JSON)
	if engine.ErrorCode(err) != engine.CodeInvalidInput || engine.AsError(err).Index != 0 || strings.Contains(err.Error(), "Query") || !strings.Contains(err.Error(), "InsertOrMerge") {
		t.Errorf("a Retrieve in a batch: %v, want the operations a batch holds", err)
	}
	for o := engine.OpInsert; o <= engine.OpDelete; o++ {
		if operationNamed([]byte(o.String())) == nil {
			t.Errorf("%s is not in the table of operations", o)
		}
	}
}

// TestFromCommandDecodes: what a node forwards (and the Go client's
// Batch sends) is taken by the strict decoder, an IfMatch an operation
// ignores left out.
func TestFromCommandDecodes(t *testing.T) {
	cmd := &engine.Command{Batch: true, ID: "b", Ops: []engine.Operation{
		{Op: engine.OpInsert, Entity: engine.NewEntity("p", "1"), IfMatch: "*"},
		{Op: engine.OpInsertOrMerge, Entity: engine.NewEntity("p", "2"), IfMatch: `W/"1.1.0"`},
		{Op: engine.OpMerge, Entity: engine.NewEntity("p", "3"), IfMatch: `W/"1.2.0"`},
		{Op: engine.OpDelete, Entity: engine.NewEntity("p", "4", engine.Property{Name: "A", Value: engine.Int32(1)}), IfMatch: "*"},
	}}
	for _, c := range []*engine.Command{cmd, {ID: "one", Ops: cmd.Ops[:1]}, {Ops: cmd.Ops[3:]}} {
		data, err := EncodeRequestMsgpack(FromCommand(c))
		if err != nil {
			t.Fatal(err)
		}
		r, err := DecodeRequestMsgpack(data)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		got, err := ToCommand(r, "T")
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		for i, op := range got.Ops {
			want := c.Ops[i].IfMatch
			if op.Op == engine.OpInsert || op.Op == engine.OpInsertOrMerge {
				want = ""
			}
			if op.Op != c.Ops[i].Op || op.IfMatch != want || op.Entity.RowKey != c.Ops[i].Entity.RowKey {
				t.Errorf("operation %d: %+v, want %+v", i, op, c.Ops[i])
			}
		}
	}
}
