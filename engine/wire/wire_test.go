package wire

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

func allTypes() *engine.Entity {
	e := engine.NewEntity("Sales ü", `quote" back\slash`,
		engine.Property{Name: "Name", Value: engine.String("Jones \"日本\"\n\t\u2028 <>&")},
		engine.Property{Name: "Age", Value: engine.Int32(math.MinInt32)},
		engine.Property{Name: "Max", Value: engine.Int32(math.MaxInt32)},
		engine.Property{Name: "Big", Value: engine.Int64(1<<62 + 1)},
		engine.Property{Name: "Neg", Value: engine.Int64(math.MinInt64)},
		engine.Property{Name: "Whole", Value: engine.Double(5)},
		engine.Property{Name: "Tenth", Value: engine.Double(0.1)},
		engine.Property{Name: "Huge", Value: engine.Double(1e300)},
		engine.Property{Name: "NaN", Value: engine.Double(math.NaN())},
		engine.Property{Name: "Inf", Value: engine.Double(math.Inf(1))},
		engine.Property{Name: "NInf", Value: engine.Double(math.Inf(-1))},
		engine.Property{Name: "Active", Value: engine.Bool(false)},
		engine.Property{Name: "Hired", Value: engine.DateTime(time.Date(2014, 8, 22, 0, 50, 32, 123456700, time.UTC))},
		engine.Property{Name: "Old", Value: engine.DateTime(engine.MinDateTime)},
		engine.Property{Name: "Id", Value: engine.Guid([16]byte{0xc9, 0xda, 0x6a, 0x32, 0x45, 0x4c, 0x4b, 0x52, 0x8d, 0x5f, 0x8c, 0x0c, 0x86, 0x35, 0x1e, 0x14})},
		engine.Property{Name: "Photo", Value: engine.Binary([]byte{0, 1, 0xfe, 0xff})},
		engine.Property{Name: "Empty", Value: engine.Binary(nil)},
	)
	e.Timestamp = engine.TimeToTicks(time.Date(2026, 11, 22, 1, 2, 3, 400, time.UTC))
	return e
}

func sameEntity(t *testing.T, got, want *engine.Entity) {
	t.Helper()
	if got.PartitionKey != want.PartitionKey || got.RowKey != want.RowKey {
		t.Fatalf("keys %q/%q, want %q/%q", got.PartitionKey, got.RowKey, want.PartitionKey, want.RowKey)
	}
	if len(got.Properties) != len(want.Properties) {
		t.Fatalf("%d properties, want %d: %#v", len(got.Properties), len(want.Properties), got.Properties)
	}
	for i, p := range want.Properties {
		g := got.Properties[i]
		if g.Name != p.Name || !g.Value.Equal(p.Value) {
			t.Fatalf("property %s: got %s %#v, want %#v", p.Name, g.Name, g.Value, p.Value)
		}
	}
}

func TestEntityJSONRoundTrip(t *testing.T) {
	want := allTypes()
	data := AppendEntityJSON(nil, want, `W/"1.2.3"`, MinimalMetadata)
	got, err := ParseEntityJSON(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	sameEntity(t, got, want)
	s := string(data)
	for _, frag := range []string{`"odata.etag":"W/\"1.2.3\""`, `"Whole":5.0`, `"Big@odata.type":"Edm.Int64","Big":"4611686018427387905"`,
		`"Hired@odata.type":"Edm.DateTime","Hired":"2014-08-22T00:50:32.1234567Z"`, `"Timestamp":"2026-11-22T01:02:03.0000004Z"`,
		`"NaN@odata.type":"Edm.Double","NaN":"NaN"`, `"Id@odata.type":"Edm.Guid","Id":"c9da6a32-454c-4b52-8d5f-8c0c86351e14"`,
		`"Photo@odata.type":"Edm.Binary","Photo":"AAH+/w=="`, `"Age":-2147483648`} {
		if !strings.Contains(s, frag) {
			t.Errorf("JSON lacks %s:\n%s", frag, s)
		}
	}
	none := string(AppendEntityJSON(nil, want, "x", NoMetadata))
	if strings.Contains(none, "odata") {
		t.Errorf("no-metadata JSON has annotations: %s", none)
	}
}

func TestEntityJSONExact(t *testing.T) {
	e := engine.NewEntity("Sales", "1", engine.Property{Name: "Name", Value: engine.String("Ann")}, engine.Property{Name: "Age", Value: engine.Int32(38)})
	e.Timestamp = engine.TimeToTicks(time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC))
	got := string(AppendEntityJSON(nil, e, `W/"1.1.0"`, MinimalMetadata))
	want := `{"odata.etag":"W/\"1.1.0\"","PartitionKey":"Sales","RowKey":"1","Timestamp":"2026-01-02T03:04:05.0000006Z","Age":38,"Name":"Ann"}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestParseEntityJSONInference(t *testing.T) {
	e, err := ParseEntityJSON([]byte(`{"PartitionKey":"p","RowKey":"r","Timestamp":"x","odata.etag":"y","A":2147483647,"B":2147483648,"C":1.5,"D":true,"E":"s","F":null,"G":-2147483648,"H":-2147483649}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]engine.Value{"A": engine.Int32(math.MaxInt32), "B": engine.Double(2147483648), "C": engine.Double(1.5),
		"D": engine.Bool(true), "E": engine.String("s"), "G": engine.Int32(math.MinInt32), "H": engine.Double(-2147483649)}
	if len(e.Properties) != len(want) {
		t.Fatalf("got %#v", e.Properties)
	}
	for n, v := range want {
		if g, _ := e.Get(n); !g.Equal(v) {
			t.Errorf("%s: got %#v, want %#v", n, g, v)
		}
	}
}

func TestParseEntityJSONErrors(t *testing.T) {
	for _, in := range []string{
		``, `[]`, `"x"`, `{"PartitionKey":1}`, `{"A":{"b":1}}`, `{"A":[1]}`,
		`{"A@odata.type":"Edm.Int32","A":2147483648}`, `{"A@odata.type":"Edm.Int32","A":"1"}`,
		`{"A@odata.type":"Edm.Int64","A":"1.5"}`, `{"A@odata.type":"Edm.Int64","A":"9223372036854775808"}`,
		`{"A@odata.type":"Edm.Guid","A":"nope"}`, `{"A@odata.type":"Edm.Binary","A":"!!"}`,
		`{"A@odata.type":"Edm.DateTime","A":"yesterday"}`, `{"A@odata.type":"Edm.Boolean","A":1}`,
		`{"A@odata.type":"Edm.Decimal","A":1}`, `{"B@odata.type":"Edm.Int64"}`, `{"A":1} {}`,
	} {
		_, err := ParseEntityJSON([]byte(in))
		var e *engine.Error
		if !errors.As(err, &e) || (e.Code != engine.CodeInvalidInput && e.Code != engine.CodeInvalidValueType) || e.Message == "" {
			t.Errorf("%s: got %v, want a coded error", in, err)
		}
	}
}

func sampleRequests() []*engine.Request {
	e := allTypes()
	e.Timestamp = 0
	return []*engine.Request{
		{Op: "Insert", ID: "c1", Entity: e, Messages: []engine.Message{{Queue: "archive", ID: "m", Body: []byte("body")}}},
		{Op: "Replace", IfMatch: `W/"1.2.3"`, Entity: engine.NewEntity("p", "r")},
		{Op: "Merge", IfMatch: "*", Entity: engine.NewEntity("p", "r", engine.Property{Name: "A", Value: engine.Int64(-1)})},
		{Op: "InsertOrReplace", Entity: engine.NewEntity("", "")},
		{Op: "InsertOrMerge", Entity: engine.NewEntity("p", "r")},
		{Op: "Delete", PartitionKey: "p", RowKey: "r", IfMatch: "*"},
		{Op: "Retrieve", PartitionKey: "p", RowKey: "r"},
		{Op: "Batch", ID: "b", Ops: []engine.Request{{Op: "Insert", Entity: engine.NewEntity("p", "1")}, {Op: "Delete", PartitionKey: "p", RowKey: "2", IfMatch: "*"}}},
		{Op: "CreateTable", Table: "Employees"},
		{Op: "ListTables"},
		{Op: "InsertOrMerge", Entity: engine.NewEntity("p", "s"), Messages: []engine.Message{
			{Subject: "orders.created", ID: "m1", Body: []byte{0, 0xff}}, {Queue: "archive", Body: []byte("x")}, {Subject: "billing.eu.created"}}},
		{Op: "Retrieve", PartitionKey: "p", RowKey: "r", AsOf: 1 << 40},
		{Op: "Retrieve", PartitionKey: "p", RowKey: "r", Position: 7},
	}
}

func sameRequest(t *testing.T, got, want *engine.Request) {
	t.Helper()
	if got.Op != want.Op || got.ID != want.ID || got.IfMatch != want.IfMatch || got.PartitionKey != want.PartitionKey ||
		got.RowKey != want.RowKey || got.Table != want.Table || got.AsOf != want.AsOf || got.Position != want.Position || len(got.Ops) != len(want.Ops) || !reflect.DeepEqual(got.Messages, want.Messages) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if (got.Entity == nil) != (want.Entity == nil) {
		t.Fatalf("entity: got %v, want %v", got.Entity, want.Entity)
	}
	if want.Entity != nil {
		sameEntity(t, got.Entity, want.Entity)
	}
	for i := range want.Ops {
		sameRequest(t, &got.Ops[i], &want.Ops[i])
	}
}

func TestRequestRoundTrip(t *testing.T) {
	for _, req := range sampleRequests() {
		for _, enc := range []Encoding{Msgpack, JSON} {
			var data []byte
			var err error
			if enc == JSON {
				data, err = EncodeRequestJSON(req)
			} else {
				data, err = EncodeRequestMsgpack(req)
			}
			if err != nil {
				t.Fatal(err)
			}
			if Detect(data, "") != enc {
				t.Fatalf("%s: Detect got the encoding wrong", req.Op)
			}
			got, err := DecodeRequest(data, enc)
			if err != nil {
				t.Fatalf("%s/%d: %v", req.Op, enc, err)
			}
			sameRequest(t, got, req)
		}
	}
}

func TestReplyRoundTrip(t *testing.T) {
	e := allTypes()
	replies := []*engine.Reply{
		{ETag: `W/"1.2.0"`, Timestamp: 12345670, Seq: 2},
		{Seq: 9, Results: []engine.Result{{ETag: `W/"1.9.0"`, Timestamp: 10}, {Timestamp: 10}}, Duplicate: true},
		{Entity: e, ETag: `W/"1.2.0"`, Timestamp: e.Timestamp, Seq: 4},
		{Tables: []engine.TableInfo{{Name: "A", Epoch: 3, Created: 5000000}}},
		{Error: &engine.Error{Code: engine.CodeUpdateConditionNotSatisfied, Message: "stale", Index: 2}},
		{Error: &engine.Error{Code: engine.CodeTableNotFound, Message: "no", Index: engine.NoIndex}},
	}
	for i, orig := range replies {
		for _, enc := range []Encoding{Msgpack, JSON} {
			w := *orig
			want := &w
			data := EncodeReply(want, enc)
			var got *engine.Reply
			var err error
			if enc == JSON {
				got, err = DecodeReplyJSON(data)
			} else {
				got, err = DecodeReplyMsgpack(data)
			}
			if err != nil {
				t.Fatalf("reply %d/%d: %v", i, enc, err)
			}
			if want.Entity != nil {
				sameEntity(t, got.Entity, want.Entity)
				if got.Entity.Timestamp != want.Entity.Timestamp {
					t.Fatalf("entity timestamp %d, want %d", got.Entity.Timestamp, want.Entity.Timestamp)
				}
				got.Entity, want.Entity = nil, nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("reply %d/%d: got %+v, want %+v", i, enc, got, want)
			}
		}
	}
}

func TestRequestErrors(t *testing.T) {
	for _, in := range []string{`{"op":"Insert","entitty":{}}`, `{"op":1}`, `{`, `{"op":"Batch","ops":[{"op":"Batch","ops":[{"op":"Insert"}]}]}`,
		`{"op":"Insert","entity":{"A@odata.type":"Edm.Int32","A":3000000000}}`} {
		_, err := DecodeRequest([]byte(in), JSON)
		if engine.ErrorCode(err) != engine.CodeInvalidInput && engine.ErrorCode(err) != engine.CodeInvalidValueType {
			t.Errorf("%s: %v", in, err)
		}
	}
	_, err := DecodeRequest([]byte(`{"op":"Insert","entity":{"A@odata.type":"Edm.Int32","A":3000000000}}`), JSON)
	if !strings.Contains(err.Error(), `property "A"`) {
		t.Errorf("message does not say where: %v", err)
	}
	// "asOf" of 0 names no position (leaving it out reads the present).
	if _, err := DecodeRequest([]byte(`{"op":"Retrieve","partitionKey":"p","rowKey":"r","asOf":0}`), JSON); engine.ErrorCode(err) != engine.CodeInvalidAsOfPosition {
		t.Errorf("JSON asOf 0: %v", err)
	}
	if _, err := DecodeRequest([]byte{0x81, 0xa4, 'a', 's', 'O', 'f', 0x00}, Msgpack); engine.ErrorCode(err) != engine.CodeInvalidAsOfPosition {
		t.Errorf("msgpack asOf 0: %v", err)
	}
	for _, in := range [][]byte{{0xc1}, {0x81, 0xa2, 'o', 'p', 0x01}, {0x81, 0xa1, 'x', 0xc0}, {0xdf, 0xff, 0xff, 0xff, 0xff}, {0xdd, 0xff, 0xff, 0xff, 0xff}} {
		if _, err := DecodeRequest(in, Msgpack); engine.ErrorCode(err) != engine.CodeInvalidInput {
			t.Errorf("%x: %v", in, err)
		}
	}
}

func TestToCommand(t *testing.T) {
	reqs := sampleRequests()
	cmd, err := ToCommand(reqs[7], "Employees")
	if err != nil || !cmd.Batch || len(cmd.Ops) != 2 || cmd.Ops[1].Op != engine.OpDelete || cmd.Ops[1].Entity.RowKey != "2" || cmd.ID != "b" {
		t.Fatalf("batch: %+v %v", cmd, err)
	}
	cmd, err = ToCommand(&engine.Request{Op: "Update", Entity: engine.NewEntity("p", "r")}, "T1x")
	if err != nil || cmd.Ops[0].Op != engine.OpReplace {
		t.Fatalf("Update: %+v %v", cmd, err)
	}
	for _, r := range []*engine.Request{
		{Op: "Insert"}, {Op: "Frobnicate"}, {Op: "Batch"},
		{Op: "Batch", Ops: []engine.Request{{Op: "Insert", Entity: engine.NewEntity("p", "1")}, {Op: "Retrieve"}}},
		{Op: "Insert", Entity: engine.NewEntity("p", "r"), Ops: []engine.Request{{Op: "Insert"}}},
		{Op: "Insert", Entity: engine.NewEntity("p", "r"), AsOf: 1},
		{Op: "Delete", PartitionKey: "p", RowKey: "r", Position: 1},
		{Op: "Batch", Ops: []engine.Request{{Op: "Insert", Entity: engine.NewEntity("p", "1"), AsOf: 2}}},
	} {
		if _, err := ToCommand(r, "T1x"); engine.ErrorCode(err) != engine.CodeInvalidInput {
			t.Errorf("%+v: %v", r, err)
		}
	}
	_, err = ToCommand(&engine.Request{Op: "Batch", Ops: []engine.Request{{Op: "Insert", Entity: engine.NewEntity("p", "1")}, {Op: "Retrieve"}}}, "T1x")
	if e := engine.AsError(err); e.Index != 1 {
		t.Errorf("batch error index %d, want 1", e.Index)
	}
}

func TestDetect(t *testing.T) {
	if Detect([]byte("  \n{"), "") != JSON || Detect([]byte{0x81}, "") != Msgpack || Detect([]byte("{"), "application/msgpack") != Msgpack ||
		Detect([]byte{0x81}, "application/json; charset=utf-8") != JSON || Detect(nil, "") != Msgpack {
		t.Fatal("Detect")
	}
}
