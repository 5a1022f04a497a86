package node_test

import (
	"testing"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
)

// TestBadInputRefused: over NATS, in JSON and in msgpack (the Go client),
// bad input gets its code and stores nothing: the first write that
// succeeds afterwards is the table's first journal record.
func TestBadInputRefused(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	if _, err := th.c.CreateTable(ctx, "Bad"); err != nil {
		t.Fatal(err)
	}
	// request sends a raw body and returns the reply's error code.
	request := func(body []byte) engine.Code {
		t.Helper()
		m, err := th.nc.RequestWithContext(ctx, "cairn.cmd.Bad", body)
		if err != nil {
			t.Fatal(err)
		}
		decode := wire.DecodeReplyMsgpack
		if wire.Detect(body, "") == wire.JSON {
			decode = wire.DecodeReplyJSON
		}
		rep, err := decode(m.Data)
		if err != nil {
			t.Fatalf("reply %q: %v", m.Data, err)
		}
		if rep.Error == nil {
			return ""
		}
		return rep.Error.Code
	}
	jsonCases := []struct {
		name, body string
		want       engine.Code
	}{
		{"bad UTF-8 in a key", "{\"op\":\"Insert\",\"entity\":{\"PartitionKey\":\"p\xff\",\"RowKey\":\"r\"}}", engine.CodeInvalidInput},
		{"bad UTF-8 in a value", "{\"op\":\"InsertOrMerge\",\"entity\":{\"PartitionKey\":\"p\",\"RowKey\":\"r\",\"S\":\"\xc3\"}}", engine.CodeInvalidInput},
		{"a lone surrogate in a name", `{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r","A\udc00":1}}`, engine.CodeInvalidInput},
		{"bad UTF-8 in a Delete's key", "{\"op\":\"Delete\",\"partitionKey\":\"\xff\",\"rowKey\":\"r\"}", engine.CodeInvalidInput},
		{"no PartitionKey", `{"op":"Insert","entity":{"RowKey":"r"}}`, engine.CodePropertiesNeedValue},
		{"RowKey null", `{"op":"InsertOrReplace","entity":{"PartitionKey":"p","RowKey":null}}`, engine.CodePropertiesNeedValue},
		{"a property twice", `{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r","A":1,"A":2}}`, engine.CodeDuplicatePropertiesSpecified},
		{"PartitionKey twice", `{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r","PartitionKey":"q"}}`, engine.CodeDuplicatePropertiesSpecified},
		{"DateTime of 8 digits", `{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r","D@odata.type":"Edm.DateTime","D":"2014-08-22T00:50:32.12345678Z"}}`, engine.CodeInvalidInput},
		{"DateTime without a zone", `{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r","D@odata.type":"Edm.DateTime","D":"2014-08-22T00:50:32"}}`, engine.CodeInvalidInput},
		{"Double of inf", `{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r","F@odata.type":"Edm.Double","F":"inf"}}`, engine.CodeInvalidInput},
		{"RowKey annotated Int64", `{"op":"Insert","entity":{"PartitionKey":"p","RowKey@odata.type":"Edm.Int64","RowKey":"1"}}`, engine.CodeInvalidInput},
		{"a Delete without partitionKey", `{"op":"Delete","rowKey":"r","ifMatch":"*"}`, engine.CodePropertiesNeedValue},
		{"a Retrieve with rowKey null", `{"op":"Retrieve","partitionKey":"p","rowKey":null}`, engine.CodePropertiesNeedValue},
		{"in a batch", `{"op":"Batch","ops":[{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"1"}},{"op":"Insert","entity":{"PartitionKey":"p"}}]}`, engine.CodePropertiesNeedValue},
	}
	for _, c := range jsonCases {
		if got := request([]byte(c.body)); got != c.want {
			t.Errorf("JSON, %s: got %q, want %s", c.name, got, c.want)
		}
	}
	// msgpack: the Go client sends what it is given; the host refuses it.
	bad := "a\xffb"
	for name, e := range map[string]*engine.Entity{
		"PartitionKey":  engine.NewEntity(bad, "r"),
		"RowKey":        engine.NewEntity("p", bad),
		"property name": engine.NewEntity("p", "r", engine.Property{Name: bad, Value: engine.Int32(1)}),
		"string value":  engine.NewEntity("p", "r", engine.Property{Name: "S", Value: engine.String(bad)}),
	} {
		if _, err := th.c.InsertOrReplace(ctx, "Bad", e); engine.ErrorCode(err) != engine.CodeInvalidInput {
			t.Errorf("msgpack, bad UTF-8 in the %s: %v", name, err)
		}
	}
	dup := engine.NewEntity("p", "r", engine.Property{Name: "A", Value: engine.Int32(1)}, engine.Property{Name: "A", Value: engine.Int32(2)})
	if _, err := th.c.Insert(ctx, "Bad", dup); engine.ErrorCode(err) != engine.CodeDuplicatePropertiesSpecified {
		t.Errorf("msgpack, a property twice: %v", err)
	}
	// {"op": "Insert", "entity": {"rk": "r", "p": []}}: no pk.
	noPK := []byte{0x82, 0xa2, 'o', 'p', 0xa6, 'I', 'n', 's', 'e', 'r', 't', 0xa6, 'e', 'n', 't', 'i', 't', 'y', 0x82, 0xa2, 'r', 'k', 0xa1, 'r', 0xa1, 'p', 0x90}
	if got := request(noPK); got != engine.CodePropertiesNeedValue {
		t.Errorf("msgpack, no pk: got %q", got)
	}
	// Nothing was stored: not under the keys U+FFFD or "" that the input
	// used to become, and nothing in the journal.
	for _, k := range [][2]string{{"\ufffd", "r"}, {"p", "\ufffd"}, {"", "r"}, {"p", ""}, {"p", "r"}} {
		if _, _, err := th.c.Retrieve(ctx, "Bad", k[0], k[1]); engine.ErrorCode(err) != engine.CodeResourceNotFound {
			t.Errorf("retrieve %q: %v", k, err)
		}
	}
	rep, err := th.c.Insert(ctx, "Bad", engine.NewEntity("", ""))
	if err != nil || rep.Seq != 1 {
		t.Fatalf("first good write (empty keys, given): %+v %v; want journal position 1", rep, err)
	}
	if got := request([]byte(`{"op":"Insert","entity":{"PartitionKey":"","RowKey":"x"}}`)); got != "" {
		t.Fatalf("JSON insert with an empty PartitionKey: %s", got)
	}
	if got := request([]byte(`{"op":"Retrieve","partitionKey":"","rowKey":"x"}`)); got != "" {
		t.Fatalf("JSON retrieve with an empty PartitionKey: %s", got)
	}
	if _, err := th.c.Delete(ctx, "Bad", "", "", "*"); err != nil {
		t.Fatalf("client delete of the entity with empty keys: %v", err)
	}
}
