package wire

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/engine"
)

// sameParse checks that ParseEntityJSON reads data exactly as the
// encoding/json reference does: the same entity, or an error with the same
// code.
func sameParse(t *testing.T, data []byte) {
	t.Helper()
	got, err := ParseEntityJSON(data)
	want, werr := parseEntityJSONDecoded(data)
	if (err == nil) != (werr == nil) {
		t.Fatalf("%q: got %v, reference %v", data, err, werr)
	}
	if err != nil {
		// With several faults, the reference reports whichever its map
		// iteration meets first: ours must be one it can report.
		codes := map[engine.Code]bool{}
		for i := 0; i < 50 && !codes[engine.ErrorCode(err)]; i++ {
			_, werr := parseEntityJSONDecoded(data)
			codes[engine.ErrorCode(werr)] = true
		}
		if !codes[engine.ErrorCode(err)] {
			t.Fatalf("%q: code %s, reference %v (%v / %v)", data, engine.ErrorCode(err), codes, err, werr)
		}
		return
	}
	if got.PartitionKey != want.PartitionKey || got.RowKey != want.RowKey || len(got.Properties) != len(want.Properties) {
		t.Fatalf("%q: %+v, reference %+v", data, got, want)
	}
	for i := range got.Properties {
		g, w := got.Properties[i], want.Properties[i]
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("%q: property %d %#v, reference %#v", data, i, g, w)
		}
	}
}

var entityCases = []string{
	`{"PartitionKey":"p","RowKey":"r","A":1,"B":1.5,"C":"x","D":true,"E":null}`,
	`  {"PartitionKey":"p\u0041","RowKey":"r\"q","Name\u0041":"\u00e9\ud83d\ude00"}  `,
	`{"PartitionKey":"p","PartitionKey":"q","A":1,"A":"two"}`,
	`{"PartitionKey":null,"RowKey":"r"}`,
	`{"PartitionKey":1}`,
	`{"RowKey":true}`,
	`{"A@odata.type":"Edm.Int64","A":"9007199254740993"}`,
	`{"A":"9007199254740993","A@odata.type":"Edm.Int64"}`,
	`{"A@odata.type":null,"A":5}`,
	`{"A@odata.type":5,"A":5}`,
	`{"A@odata.type":"Edm.Int64"}`,
	`{"Timestamp@odata.type":"Edm.DateTime","Timestamp":"x","odata.etag":{"nested":[1,2,{"x":"}"}]}}`,
	`{"A":{"x":1}}`,
	`{"A":[1,2]}`,
	`{"A":5.0,"B":-0,"C":1e3,"D":2147483648,"E":-2147483648,"F":1E+2}`,
	`{"A@odata.type":"Edm.Double","A":"NaN","B@odata.type":"Edm.Double","B":"-Infinity"}`,
	`{"A@odata.type":"Edm.Guid","A":"4185404a-5818-48c3-b9be-f217df0dba6f","B@odata.type":"Edm.Binary","B":"AAEC"}`,
	`{"A@odata.type":"Edm.DateTime","A":"2014-08-22T00:50:32.1234567Z"}`,
	`{"A@odata.type":"Edm.Int32","A":"5"}`,
	`{"A@odata.type":"Edm.Nope","A":"5"}`,
	"{\"A\":\"bad \xff utf8\"}",
	`{}`, `[]`, `null`, `"x"`, `{} {}`, `{"A":1,}`, `{"A" 1}`, ``, `{"A":01}`, `{"A":"\x01"}`,
	`{"A":1}` + strings.Repeat(" ", 3),
}

func TestParseEntityJSONMatchesReference(t *testing.T) {
	for _, c := range entityCases {
		sameParse(t, []byte(c))
	}
	sameParse(t, AppendEntityJSON(nil, allTypes(), `W/"1.1.1"`, FullMetadata))
}

// FuzzParseEntityJSONReference: the fast parser agrees with encoding/json
// on every input.
func FuzzParseEntityJSONReference(f *testing.F) {
	for _, c := range entityCases {
		f.Add([]byte(c))
	}
	f.Add(AppendEntityJSON(nil, allTypes(), `W/"1.1.1"`, MinimalMetadata))
	f.Fuzz(func(t *testing.T, data []byte) { sameParse(t, data) })
}

// benchEntityJSON is a ~1 KB entity as an SDK sends it.
func benchEntityJSON() []byte {
	return []byte(`{"PartitionKey":"p0000001","RowKey":"r0000123","Name":"Jones, Margaret Anne (Sales)","Email":"margaret.jones@contoso.example","Department":"Sales","City":"Springfield","Age":42,"Salary":50123.25,"Hired@odata.type":"Edm.DateTime","Hired":"2012-03-01T09:00:00Z","Serial@odata.type":"Edm.Int64","Serial":"123","Bucket":23,"Notes":"` +
		strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 12) + `"}`)
}

// BenchmarkParseEntityJSON against BenchmarkParseEntityJSONDecoded: the
// scanner against encoding/json.
func BenchmarkParseEntityJSON(b *testing.B) {
	data := benchEntityJSON()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		if _, err := ParseEntityJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseEntityJSONDecoded(b *testing.B) {
	data := benchEntityJSON()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		if _, err := parseEntityJSONDecoded(data); err != nil {
			b.Fatal(err)
		}
	}
}
