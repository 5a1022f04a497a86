package wire

import (
	"math"
	"testing"

	"github.com/cairn-dev/cairn/engine"
)

// throughGate decodes a request and makes it a validated command, as the
// NATS front door does: the error, if any, is what the client is told.
func throughGate(data []byte, enc Encoding) error {
	r, err := DecodeRequest(data, enc)
	if err != nil {
		return err
	}
	cmd, err := ToCommand(r, "Employees")
	if err != nil {
		return err
	}
	return engine.ValidateCommand(cmd)
}

// TestBadEntityJSONRefused: entity JSON that Cairn refuses, with the code
// each gets (the same over NATS and HTTP: both parse with ParseEntityJSON).
func TestBadEntityJSONRefused(t *testing.T) {
	cases := []struct {
		name, body string
		want       engine.Code
	}{
		{"bad UTF-8 in PartitionKey", "{\"PartitionKey\":\"p\xff\",\"RowKey\":\"r\"}", engine.CodeInvalidInput},
		{"bad UTF-8 in RowKey", "{\"PartitionKey\":\"p\",\"RowKey\":\"\xc3\"}", engine.CodeInvalidInput},
		{"bad UTF-8 in a property name", "{\"PartitionKey\":\"p\",\"RowKey\":\"r\",\"A\xff\":1}", engine.CodeInvalidInput},
		{"bad UTF-8 in a string value", "{\"PartitionKey\":\"p\",\"RowKey\":\"r\",\"A\":\"x\xed\xa0\x80\"}", engine.CodeInvalidInput},
		{"bad UTF-8 in an ignored member", "{\"PartitionKey\":\"p\",\"RowKey\":\"r\",\"odata.etag\":\"\xff\"}", engine.CodeInvalidInput},
		{"lone high surrogate", `{"PartitionKey":"p\ud800","RowKey":"r"}`, engine.CodeInvalidInput},
		{"lone low surrogate", `{"PartitionKey":"p","RowKey":"r","A":"\udc00"}`, engine.CodeInvalidInput},
		{"high surrogate then a letter", `{"PartitionKey":"p","RowKey":"r","A\ud83d\u0041":1}`, engine.CodeInvalidInput},
		{"no PartitionKey", `{"RowKey":"r","A":1}`, engine.CodePropertiesNeedValue},
		{"no RowKey", `{"PartitionKey":"p"}`, engine.CodePropertiesNeedValue},
		{"no keys", `{}`, engine.CodePropertiesNeedValue},
		{"PartitionKey null", `{"PartitionKey":null,"RowKey":"r"}`, engine.CodePropertiesNeedValue},
		{"RowKey null", `{"PartitionKey":"p","RowKey":null}`, engine.CodePropertiesNeedValue},
		{"a key of the wrong type", `{"PartitionKey":1,"RowKey":"r"}`, engine.CodeInvalidValueType},
		{"DateTime of 8 fractional digits", `{"PartitionKey":"p","RowKey":"r","D@odata.type":"Edm.DateTime","D":"2014-08-22T00:50:32.12345678Z"}`, engine.CodeInvalidInput},
		{"DateTime of 12 fractional digits", `{"PartitionKey":"p","RowKey":"r","D@odata.type":"Edm.DateTime","D":"2014-08-22T00:50:32.123456789123+02:00"}`, engine.CodeInvalidInput},
		{"DateTime without a zone", `{"PartitionKey":"p","RowKey":"r","D@odata.type":"Edm.DateTime","D":"2014-08-22T00:50:32"}`, engine.CodeInvalidInput},
		{"DateTime without a zone, with digits", `{"PartitionKey":"p","RowKey":"r","D@odata.type":"Edm.DateTime","D":"2014-08-22T00:50:32.5"}`, engine.CodeInvalidInput},
		{"Double of nan", `{"PartitionKey":"p","RowKey":"r","F@odata.type":"Edm.Double","F":"nan"}`, engine.CodeInvalidInput},
		{"Double of inf", `{"PartitionKey":"p","RowKey":"r","F@odata.type":"Edm.Double","F":"inf"}`, engine.CodeInvalidInput},
		{"Double of +Inf", `{"PartitionKey":"p","RowKey":"r","F@odata.type":"Edm.Double","F":"+Inf"}`, engine.CodeInvalidInput},
		{"Double of a hex float", `{"PartitionKey":"p","RowKey":"r","F@odata.type":"Edm.Double","F":"0x1p4"}`, engine.CodeInvalidInput},
		{"Double of +5", `{"PartitionKey":"p","RowKey":"r","F@odata.type":"Edm.Double","F":"+5"}`, engine.CodeInvalidInput},
		{"Double of a padded number", `{"PartitionKey":"p","RowKey":"r","F@odata.type":"Edm.Double","F":" 5"}`, engine.CodeInvalidInput},
		{"PartitionKey annotated Int32", `{"PartitionKey@odata.type":"Edm.Int32","PartitionKey":"p","RowKey":"r"}`, engine.CodeInvalidInput},
		{"RowKey annotated DateTime", `{"PartitionKey":"p","RowKey@odata.type":"Edm.DateTime","RowKey":"r"}`, engine.CodeInvalidInput},
		{"RowKey annotation not a string", `{"PartitionKey":"p","RowKey@odata.type":1,"RowKey":"r"}`, engine.CodeInvalidInput},
		{"Timestamp annotated String", `{"PartitionKey":"p","RowKey":"r","Timestamp@odata.type":"Edm.String","Timestamp":"x"}`, engine.CodeInvalidInput},
		{"Timestamp annotated Int64, no Timestamp", `{"PartitionKey":"p","RowKey":"r","Timestamp@odata.type":"Edm.Int64"}`, engine.CodeInvalidInput},
		{"a property twice", `{"PartitionKey":"p","RowKey":"r","A":1,"A":2}`, engine.CodeDuplicatePropertiesSpecified},
		{"a property twice, one escaped", `{"PartitionKey":"p","RowKey":"r","A":1,"\u0041":2}`, engine.CodeDuplicatePropertiesSpecified},
		{"a property twice, one null", `{"PartitionKey":"p","RowKey":"r","A":null,"A":2}`, engine.CodeDuplicatePropertiesSpecified},
		{"PartitionKey twice", `{"PartitionKey":"p","RowKey":"r","PartitionKey":"q"}`, engine.CodeDuplicatePropertiesSpecified},
		{"RowKey twice, the same value", `{"PartitionKey":"p","RowKey":"r","RowKey":"r"}`, engine.CodeDuplicatePropertiesSpecified},
		{"an annotation twice", `{"PartitionKey":"p","RowKey":"r","A@odata.type":"Edm.Int64","A":"1","A@odata.type":"Edm.Int64"}`, engine.CodeDuplicatePropertiesSpecified},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseEntityJSON([]byte(c.body))
			if got := engine.ErrorCode(err); got != c.want {
				t.Fatalf("got %v, want %s", err, c.want)
			}
			req := `{"op":"Insert","entity":` + c.body + `}`
			if got := engine.ErrorCode(throughGate([]byte(req), JSON)); got != c.want {
				t.Fatalf("over NATS: got %s, want %s", got, c.want)
			}
		})
	}
}

// TestGoodEntityJSONAccepted: the edges of the rules that stay valid.
func TestGoodEntityJSONAccepted(t *testing.T) {
	cases := []struct {
		name, body string
		check      func(*engine.Entity) bool
	}{
		{"a surrogate pair", `{"PartitionKey":"\ud83d\ude00","RowKey":"r"}`,
			func(e *engine.Entity) bool { return e.PartitionKey == "\U0001F600" }},
		{"U+FFFD itself", `{"PartitionKey":"\ufffd","RowKey":"` + "\ufffd" + `"}`,
			func(e *engine.Entity) bool { return e.PartitionKey == "\ufffd" && e.RowKey == "\ufffd" }},
		{"DateTime of 7 digits and an offset", `{"PartitionKey":"p","RowKey":"r","D@odata.type":"Edm.DateTime","D":"2014-08-22T02:50:32.1234567+02:00"}`,
			func(e *engine.Entity) bool {
				d, _ := e.Get("D")
				return FormatTime(d.Ticks()) == "2014-08-22T00:50:32.1234567Z"
			}},
		{"DateTime without fraction", `{"PartitionKey":"p","RowKey":"r","D@odata.type":"Edm.DateTime","D":"2014-08-22T00:50:32Z"}`,
			func(e *engine.Entity) bool { d, _ := e.Get("D"); return d.Type() == engine.TypeDateTime }},
		{"Doubles by name and number", `{"PartitionKey":"p","RowKey":"r","A@odata.type":"Edm.Double","A":"NaN","B@odata.type":"Edm.Double","B":"-Infinity","C@odata.type":"Edm.Double","C":"INF","D@odata.type":"Edm.Double","D":"-1.5e3"}`,
			func(e *engine.Entity) bool {
				a, _ := e.Get("A")
				b, _ := e.Get("B")
				c, _ := e.Get("C")
				d, _ := e.Get("D")
				return math.IsNaN(a.Float()) && math.IsInf(b.Float(), -1) && math.IsInf(c.Float(), 1) && d.Float() == -1500
			}},
		{"NaN without annotation is a string", `{"PartitionKey":"p","RowKey":"r","A":"NaN","B":"Infinity"}`,
			func(e *engine.Entity) bool {
				a, _ := e.Get("A")
				b, _ := e.Get("B")
				return a.Str() == "NaN" && b.Str() == "Infinity"
			}},
		{"keys and Timestamp annotated with their types", `{"PartitionKey@odata.type":"Edm.String","PartitionKey":"p","RowKey@odata.type":null,"RowKey":"r","Timestamp@odata.type":"Edm.DateTime","Timestamp":"2014-08-22T00:50:32Z"}`,
			func(e *engine.Entity) bool { return e.PartitionKey == "p" && e.RowKey == "r" && len(e.Properties) == 0 }},
		{"empty keys, given", `{"PartitionKey":"","RowKey":""}`,
			func(e *engine.Entity) bool { return e.PartitionKey == "" && e.RowKey == "" }},
		{"an escaped backslash before u", `{"PartitionKey":"\\ud800","RowKey":"r"}`,
			func(e *engine.Entity) bool { return e.PartitionKey == `\ud800` }},
	}
	for _, c := range cases {
		e, err := ParseEntityJSON([]byte(c.body))
		if err != nil || !c.check(e) {
			t.Errorf("%s: %+v, %v", c.name, e, err)
		}
	}
}

// TestBadUTF8InRequestsRefused: strings outside the entity (a Delete's
// keys, ids) and msgpack strings, which the msgpack decoder does not
// check, are refused by the decoder or by engine.ValidateCommand.
func TestBadUTF8InRequestsRefused(t *testing.T) {
	for _, req := range []string{
		"{\"op\":\"Delete\",\"partitionKey\":\"p\xff\",\"rowKey\":\"r\",\"ifMatch\":\"*\"}",
		`{"op":"Delete","partitionKey":"p","rowKey":"\udfff","ifMatch":"*"}`,
		"{\"op\":\"Insert\",\"id\":\"\xff\",\"entity\":{\"PartitionKey\":\"p\",\"RowKey\":\"r\"}}",
	} {
		if got := engine.ErrorCode(throughGate([]byte(req), JSON)); got != engine.CodeInvalidInput {
			t.Errorf("%q: got %s, want InvalidInput", req, got)
		}
	}
	bad := "a\xffb"
	for name, r := range map[string]*engine.Request{
		"PartitionKey":  {Op: "Insert", Entity: engine.NewEntity(bad, "r")},
		"RowKey":        {Op: "InsertOrMerge", Entity: engine.NewEntity("p", bad)},
		"property name": {Op: "Insert", Entity: engine.NewEntity("p", "r", engine.Property{Name: bad, Value: engine.Int32(1)})},
		"string value":  {Op: "Insert", Entity: engine.NewEntity("p", "r", engine.Property{Name: "S", Value: engine.String(bad)})},
		"delete key":    {Op: "Delete", PartitionKey: bad, RowKey: "r"},
		"id":            {Op: "Insert", ID: bad, Entity: engine.NewEntity("p", "r")},
	} {
		data, err := EncodeRequestMsgpack(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := engine.ErrorCode(throughGate(data, Msgpack)); got != engine.CodeInvalidInput {
			t.Errorf("msgpack, bad UTF-8 in %s: got %s, want InvalidInput", name, got)
		}
	}
}

// TestParseEntityJSONAt: a body whose keys the URL gives may leave them
// out or repeat them, but not contradict them or make them null.
func TestParseEntityJSONAt(t *testing.T) {
	cases := []struct {
		body, pk, rk string
		want         engine.Code
	}{
		{`{"A":1}`, "p", "r", ""},
		{`{"PartitionKey":"p","RowKey":"r","A":1}`, "p", "r", ""},
		{`{"RowKey":""}`, "p", "", ""},
		{`{"PartitionKey":"O''Brien","RowKey":"a''b"}`, "O'Brien", "a'b", ""}, // as the Go SDK writes them
		{`{"PartitionKey":"O'Brien"}`, "O'Brien", "r", ""},
		{`{"PartitionKey":"q","A":1}`, "p", "r", engine.CodeDuplicatePropertiesSpecified},
		{`{"RowKey":"x"}`, "p", "r", engine.CodeDuplicatePropertiesSpecified},
		{`{"RowKey":"r''"}`, "p", "r", engine.CodeDuplicatePropertiesSpecified},
		{`{"PartitionKey":""}`, "p", "r", engine.CodeDuplicatePropertiesSpecified},
		{`{"PartitionKey":null}`, "p", "r", engine.CodePropertiesNeedValue},
		{`{"A":1,"A":1}`, "p", "r", engine.CodeDuplicatePropertiesSpecified},
	}
	for _, c := range cases {
		e, err := ParseEntityJSONAt([]byte(c.body), c.pk, c.rk)
		if codeOf(err) != c.want {
			t.Errorf("%s at (%q, %q): got %v, want %q", c.body, c.pk, c.rk, err, c.want)
			continue
		}
		if err == nil && (e.PartitionKey != c.pk || e.RowKey != c.rk) {
			t.Errorf("%s: keys (%q, %q), want the URL's", c.body, e.PartitionKey, e.RowKey)
		}
	}
}

// TestMsgpackEntityKeys: a msgpack entity needs "pk" and "rk" (the empty
// string is a key, nil is not) and gives each field once.
func TestMsgpackEntityKeys(t *testing.T) {
	// {"op": "Insert", "entity": <entity>}
	req := func(fields ...any) []byte {
		var b []byte
		b = append(b, 0x82, 0xa2, 'o', 'p', 0xa6, 'I', 'n', 's', 'e', 'r', 't', 0xa6, 'e', 'n', 't', 'i', 't', 'y')
		b = append(b, 0x80|byte(len(fields)/2))
		for _, f := range fields {
			switch f := f.(type) {
			case string:
				b = append(b, 0xa0|byte(len(f)))
				b = append(b, f...)
			case nil:
				b = append(b, 0xc0)
			case []byte: // raw msgpack
				b = append(b, f...)
			}
		}
		return b
	}
	empty := []byte{0x90} // no properties
	cases := []struct {
		name string
		data []byte
		want engine.Code
	}{
		{"both keys", req("pk", "p", "rk", "r", "p", empty), ""},
		{"empty keys", req("pk", "", "rk", "", "p", empty), ""},
		{"no pk", req("rk", "r", "p", empty), engine.CodePropertiesNeedValue},
		{"no rk", req("pk", "p"), engine.CodePropertiesNeedValue},
		{"nil pk", req("pk", nil, "rk", "r"), engine.CodePropertiesNeedValue},
		{"nil rk", req("pk", "p", "rk", nil), engine.CodePropertiesNeedValue},
		{"pk twice", req("pk", "p", "rk", "r", "pk", "q"), engine.CodeDuplicatePropertiesSpecified},
		{"a property twice", req("pk", "p", "rk", "r", "p", []byte{0x92, 0x93, 0xa1, 'A', 0x02, 0x01, 0x93, 0xa1, 'A', 0x02, 0x02}), engine.CodeDuplicatePropertiesSpecified},
		{"bad UTF-8 in a property name", req("pk", "p", "rk", "r", "p", []byte{0x91, 0x93, 0xa1, 0xff, 0x02, 0x01}), engine.CodeInvalidInput},
	}
	for _, c := range cases {
		if got := codeOf(throughGate(c.data, Msgpack)); got != c.want {
			t.Errorf("%s: got %s, want %q", c.name, got, c.want)
		}
	}
}

// codeOf is err's code, "" for none.
func codeOf(err error) engine.Code {
	if err == nil {
		return ""
	}
	return engine.ErrorCode(err)
}

// TestRequestKeys: a Delete or Retrieve by partitionKey and rowKey needs
// both in JSON ("" is a key; missing or null is not); msgpack refuses nil
// and, for clients that leave an empty key out, reads a missing one as "".
// Both encoders write the keys of such requests even when empty.
func TestRequestKeys(t *testing.T) {
	cases := []struct {
		body string
		want engine.Code
	}{
		{`{"op":"Delete","partitionKey":"p","rowKey":"r","ifMatch":"*"}`, ""},
		{`{"op":"Delete","partitionKey":"","rowKey":""}`, ""},
		{`{"op":"Retrieve","partitionKey":"","rowKey":"r"}`, ""},
		{`{"op":"Delete","entity":{"PartitionKey":"p","RowKey":"r"}}`, ""},
		{`{"op":"Delete","rowKey":"r"}`, engine.CodePropertiesNeedValue},
		{`{"op":"Retrieve","partitionKey":"p"}`, engine.CodePropertiesNeedValue},
		{`{"op":"Delete","partitionKey":null,"rowKey":"r"}`, engine.CodePropertiesNeedValue},
		{`{"op":"Insert","rowKey":null,"entity":{"PartitionKey":"p","RowKey":"r"}}`, engine.CodeInvalidInput}, // an Insert takes no rowKey
		{`{"op":"Delete","partitionKey":1,"rowKey":"r"}`, engine.CodeInvalidValueType},
		{`{"op":"Batch","ops":[{"op":"Delete","partitionKey":"p"}]}`, engine.CodePropertiesNeedValue},
	}
	for _, c := range cases {
		_, err := DecodeRequest([]byte(c.body), JSON)
		if codeOf(err) != c.want {
			t.Errorf("%s: got %v, want %q", c.body, err, c.want)
		}
	}
	// {"op": "Delete", "partitionKey": nil, "rowKey": "r"}, and without pk.
	nilPK := []byte{0x83, 0xa2, 'o', 'p', 0xa6, 'D', 'e', 'l', 'e', 't', 'e', 0xac, 'p', 'a', 'r', 't', 'i', 't', 'i', 'o', 'n', 'K', 'e', 'y', 0xc0, 0xa6, 'r', 'o', 'w', 'K', 'e', 'y', 0xa1, 'r'}
	if _, err := DecodeRequest(nilPK, Msgpack); codeOf(err) != engine.CodePropertiesNeedValue {
		t.Errorf("msgpack, nil partitionKey: %v", err)
	}
	noPK := []byte{0x82, 0xa2, 'o', 'p', 0xa6, 'D', 'e', 'l', 'e', 't', 'e', 0xa6, 'r', 'o', 'w', 'K', 'e', 'y', 0xa1, 'r'}
	if r, err := DecodeRequest(noPK, Msgpack); err != nil || r.PartitionKey != "" || r.RowKey != "r" {
		t.Errorf("msgpack, no partitionKey (an older client's empty key): %+v %v", r, err)
	}
	for _, enc := range []Encoding{JSON, Msgpack} {
		for _, r := range []*engine.Request{{Op: "Delete", IfMatch: "*"}, {Op: "Retrieve"}, {Op: "Batch", Ops: []engine.Request{{Op: "Delete"}}}} {
			var data []byte
			var err error
			if enc == JSON {
				data, err = EncodeRequestJSON(r)
			} else {
				data, err = EncodeRequestMsgpack(r)
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecodeRequest(data, enc); err != nil {
				t.Errorf("%s with empty keys, encoding %d: %v (%q)", r.Op, enc, err, data)
			}
		}
	}
}

// TestDeepMsgpackRefused: a msgpack body nested millions of levels deep
// (8 MiB of one-element arrays, the embedded server's largest message)
// is refused by every decoder a client's body reaches, instead of
// overflowing the stack, which ends the process.
func TestDeepMsgpackRefused(t *testing.T) {
	nested := func(prefix ...byte) []byte {
		b := append([]byte(nil), prefix...)
		for range 8<<20 - 64 {
			b = append(b, 0x91) // an array of one element
		}
		return append(b, 0xc0)
	}
	// {"op": "Insert", "filter": [[[…]]]}, {"op": "Query", …}, {"max": …}
	insert := nested(0x82, 0xa2, 'o', 'p', 0xa6, 'I', 'n', 's', 'e', 'r', 't', 0xa6, 'f', 'i', 'l', 't', 'e', 'r')
	query := nested(0x82, 0xa2, 'o', 'p', 0xa5, 'Q', 'u', 'e', 'r', 'y', 0xa6, 'f', 'i', 'l', 't', 'e', 'r')
	feed := nested(0x81, 0xa3, 'm', 'a', 'x')
	if _, err := DecodeRequest(insert, Msgpack); engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Errorf("a deep Insert: %v", err)
	}
	if _, err := DecodeQueryRequest(query, Msgpack); engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Errorf("a deep Query: %v", err)
	}
	if _, err := DecodeChangesRequest(feed, Msgpack); engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Errorf("a deep change feed request: %v", err)
	}
	if IsQuery(nested(0x81, 0xa1, 'x'), Msgpack) {
		t.Error("a deep body is a Query")
	}
	if ErrorEncoding(insert, "") != JSON {
		t.Error("a deep body is one msgpack map")
	}
}
