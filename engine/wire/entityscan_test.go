package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cairn-dev/cairn/engine"
)

// sameParse checks that ParseEntityJSON (less the keys' presence, checked
// after: parseEntity) reads data exactly as the encoding/json reference
// does: the same entity and keys given, or an error with a code the
// reference can give.
func sameParse(t *testing.T, data []byte) {
	t.Helper()
	got, gotKeys, err := parseEntity(data)
	want, wantKeys, werr := parseEntityJSONReference(data)
	if dataAfterObject(data) {
		// The reference's json.Decoder.More ignores data after the
		// object that starts with '}' or ']'; the scanner refuses all.
		if engine.ErrorCode(err) != engine.CodeInvalidInput {
			t.Fatalf("%q: data after the object: got %v, want InvalidInput", data, err)
		}
		return
	}
	if (err == nil) != (werr == nil) {
		t.Fatalf("%q: got %v, reference %v", data, err, werr)
	}
	if err != nil {
		// With several faults, the reference reports whichever it visits
		// first: ours must be one it can report.
		// (Every start is tried on objects of up to 100 names, a sample on
		// larger ones.)
		codes := map[engine.Code]bool{engine.ErrorCode(werr): true}
		n := max(memberCount(data), 1)
		step := max(n/100, 1)
		for i := 0; i < n && !codes[engine.ErrorCode(err)]; i += step {
			_, _, werr := parseEntityJSONReferenceFrom(data, i)
			codes[engine.ErrorCode(werr)] = true
		}
		if !codes[engine.ErrorCode(err)] {
			t.Fatalf("%q: code %s, reference %v (%v / %v)", data, engine.ErrorCode(err), codes, err, werr)
		}
		return
	}
	if gotKeys != wantKeys || got.PartitionKey != want.PartitionKey || got.RowKey != want.RowKey || len(got.Properties) != len(want.Properties) {
		t.Fatalf("%q: %+v, reference %+v", data, got, want)
	}
	for i := range got.Properties {
		g, w := got.Properties[i], want.Properties[i]
		if g.Name != w.Name || g.Value.Type() != w.Value.Type() || !g.Value.Equal(w.Value) {
			t.Fatalf("%q: property %d %q %#v, reference %q %#v", data, i, g.Name, g.Value, w.Name, w.Value)
		}
	}
}

// memberCount returns the number of distinct names in data's object.
func memberCount(data []byte) int {
	var m map[string]json.RawMessage
	json.Unmarshal(data, &m)
	return len(m)
}

// dataAfterObject reports whether data holds more than white space after
// its first JSON value.
func dataAfterObject(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	var v json.RawMessage
	if dec.Decode(&v) != nil {
		return false
	}
	return len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")) > 0
}

var entityCases = []string{
	`{"PartitionKey":"p","RowKey":"r","A":1,"B":1.5,"C":"x","D":true,"E":null}`,
	`  {"PartitionKey":"p\u0041","RowKey":"r\"q","Name\u0041":"\u00e9\ud83d\ude00"}  `,
	`{"PartitionKey":"p","PartitionKey":"q","A":1,"A":"two"}`,
	`{"PartitionKey":null,"RowKey":"r"}`,
	`{"PartitionKey":1}`,
	`{"RowKey":true}`,
	`{"PartitionKey":{}}`,
	`{"A@odata.type":"Edm.Int64","A":"9007199254740993"}`,
	`{"A":"9007199254740993","A@odata.type":"Edm.Int64"}`,
	`{"A@odata.type":null,"A":5}`,
	`{"A@odata.type":5,"A":5}`,
	`{"A@odata.type":5,"A":null}`,
	`{"A@odata.type":"Edm.Int64"}`,
	`{"A@odata.type":"Edm.Int64","A":null}`,
	`{"A@odata.type":"Edm.Int64","A@odata.type":"Edm.Int32","A":"5"}`,
	`{"A\u0040odata.type":"Edm.\u0049nt64","A":"5"}`,
	`{"@odata.type":"Edm.Int64","":"5"}`,
	`{"A@odata.type@odata.type":"x","A@odata.type":"Edm.Int32","A":1}`,
	`{"PartitionKey@odata.type":"Edm.Int32","PartitionKey":"p","odata.x@odata.type":1}`,
	`{"Timestamp@odata.type":"Edm.DateTime","Timestamp":"x","odata.etag":{"nested":[1,2,{"x":"}"}]}}`,
	`{"Timestamp@odata.type":7}`,
	`{"A":{"x":1}}`,
	`{"A":[1,2]}`,
	`{"A":[1],"A":2}`,
	`{"A":5.0,"B":-0,"C":1e3,"D":2147483648,"E":-2147483648,"F":1E+2,"G":-0.0,"H":1e400,"I":1e-400}`,
	`{"A":12345678901,"B":-2147483649,"C":0.1e1,"D":-1.5E-3}`,
	`{"A@odata.type":"Edm.Double","A":"NaN","B@odata.type":"Edm.Double","B":"-Infinity"}`,
	`{"A@odata.type":"Edm.Double","A":"INF","B@odata.type":"Edm.Double","B":"0x1p4","C@odata.type":"Edm.Double","C":"nan"}`,
	`{"A@odata.type":"Edm.Double","A":1e400}`,
	`{"A@odata.type":"Edm.Double","A":true}`,
	`{"A@odata.type":"Edm.Guid","A":"4185404a-5818-48c3-b9be-f217df0dba6f","B@odata.type":"Edm.Binary","B":"AAEC"}`,
	`{"A@odata.type":"Edm.Binary","A":"AAE","B@odata.type":"Edm.Binary","B":"AA\r\n==","C@odata.type":"Edm.Binary","C":""}`,
	`{"A@odata.type":"Edm.Binary","A":5}`,
	`{"A@odata.type":"Edm.DateTime","A":"2014-08-22T00:50:32.1234567Z"}`,
	`{"A@odata.type":"Edm.DateTime","A":"2014-08-22T00:50:32.123456789123+02:00","B@odata.type":"Edm.DateTime","B":"2014-08-22T00:50:32"}`,
	`{"A@odata.type":"Edm.DateTime","A":1}`,
	`{"A@odata.type":"Edm.Int32","A":"5"}`,
	`{"A@odata.type":"Edm.Int32","A":-0,"B@odata.type":"Edm.Int32","B":5.0}`,
	`{"A@odata.type":"Edm.Int64","A":1e3}`,
	`{"A@odata.type":"Edm.Int64","A":"+5","B@odata.type":"Edm.Int64","B":-9223372036854775808}`,
	`{"A@odata.type":"Edm.Int64","A":false}`,
	`{"A@odata.type":"Edm.String","A":5}`,
	`{"A@odata.type":"Edm.Boolean","A":"true"}`,
	`{"A@odata.type":"Edm.Nope","A":"5"}`,
	`{"A@odata.type":"Edm.Nope","A":{}}`,
	`{"A@odata.type":"","A":"5"}`,
	"{\"A\":\"bad \xff utf8 \xed\xa0\x80 \xf0\x9f\x98\"}",
	"{\"\xff\":1,\"\\ufffd\":2}",
	`{"A":"\ud800","B":"\udc00\ud800x","C":"\ud83d\u0041","D":"\ud83d\ude00\ude00","E":"\/\b\f\n\r\t\\"}`,
	`{}`, `[]`, `null`, `"x"`, `{} {}`, `{"A":1,}`, `{"A" 1}`, ``, ` `, `{"A":01}`, `{"A":"\x01"}`,
	`{"A":1.}`, `{"A":-}`, `{"A":1e}`, `{"A":.5}`, `{"A":tru}`, `{"A":nul}`, `{"A":"\x"}`, `{"A":"\u12"}`,
	`{"A":1`, `{"A"`, `{`, `{"A":"x`, `{"A":[1,]}`, `{"A":{"b"}}`, `{"A":{,}}`,
	`{"A":1}` + strings.Repeat(" ", 3),
	`{"A":1}}`, `{"A":1}]x`, `{"PartitionKey":1} }`, `{"A":1} x`, "{\"A\":1}\x00",
}

func TestParseEntityJSONMatchesReference(t *testing.T) {
	for _, c := range entityCases {
		sameParse(t, []byte(c))
	}
	sameParse(t, AppendEntityJSON(nil, allTypes(), `W/"1.1.1"`, FullMetadata))
	sameParse(t, benchEntityJSON())
}

// TestParseEntityJSONDepth: nesting is bounded where encoding/json bounds
// it.
func TestParseEntityJSONDepth(t *testing.T) {
	for _, n := range []int{maxJSONDepth - 2, maxJSONDepth - 1, maxJSONDepth, maxJSONDepth + 1} {
		for _, open := range []string{"[", `{"x":`} {
			close := "]"
			if open != "[" {
				close = "}"
			}
			data := `{"odata.x":` + strings.Repeat(open, n) + strings.Repeat(close, n) + `}`
			sameParse(t, []byte(data))
		}
	}
}

// TestParseEntityJSONManyMembers: a large object reads as the reference
// reads it, and in time; one with repeated names is refused by both.
func TestParseEntityJSONManyMembers(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"PartitionKey":"p","RowKey":"r"`)
	for i := range 50000 {
		fmt.Fprintf(&b, `,"P%d":%d`, i, i)
		if i%5 > 0 {
			fmt.Fprintf(&b, `,"P%d@odata.type":"Edm.Int64"`, i)
		}
	}
	b.WriteString(`}`)
	if _, err := ParseEntityJSON([]byte(b.String())); err != nil {
		t.Fatalf("50,000 distinct members: %v", err)
	}
	sameParse(t, []byte(b.String()))
	b.Reset()
	b.WriteString(`{"PartitionKey":"p"`)
	for i := range 100000 {
		fmt.Fprintf(&b, `,"P%d":%d,"P%d@odata.type":"Edm.Int64"`, i%5000, i, i%4000)
	}
	b.WriteString(`}`)
	sameParse(t, []byte(b.String()))
	b.Reset()
	b.WriteString(`{"PartitionKey":"p"`)
	for i := range 100000 {
		fmt.Fprintf(&b, `,"P%d":%d`, i%5000, i)
		if i%3 == 0 {
			fmt.Fprintf(&b, `,"P%d@odata.type":"Edm.Int64"`, i%5000)
		}
	}
	b.WriteString(`}`)
	sameParse(t, []byte(b.String()))
}

// TestParseEntityJSONGenerated compares the parsers on many generated
// entities, valid and not.
func TestParseEntityJSONGenerated(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range n {
		sameParse(t, genEntity(r))
	}
}

// Pieces of generated entities: names, and values for properties and
// annotations.
var (
	genNames = []string{
		`PartitionKey`, `RowKey`, `Timestamp`, `odata.etag`, `odata.type`, `A`, `B`, `a`, `A1`, ``, `Név`,
		`A@odata.type`, `B@odata.type`, `A\u0040odata.type`, `Timestamp@odata.type`, `odata.x@odata.type`,
		`PartitionKey@odata.type`, `A@odata.type@odata.type`, `@odata.type`, `C@odata.type`, "\xff", `\ufffd`,
		`\u0041`, `Row\u004bey`,
	}
	genTypes = []string{
		`"Edm.String"`, `"Edm.Boolean"`, `"Edm.Int32"`, `"Edm.Int64"`, `"Edm.Double"`, `"Edm.DateTime"`,
		`"Edm.Guid"`, `"Edm.Binary"`, `"Edm.\u0053tring"`, `"Edm.Decimal"`, `""`, `null`, `1`, `true`, `{}`, `["Edm.Int32"]`,
	}
	genValues = []string{
		`"s"`, `""`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9\ud83d\ude00"`, `"\ud800"`, `"\udc00"`, `"\ud83d\u0041"`,
		"\"\xff\xfe\"", "\"\xe2\x82\"", `"é"`, `"NaN"`, `"Infinity"`, `"-Infinity"`, `"INF"`, `"-INF"`, `"inf"`,
		`"0x1p4"`, `"+5"`, `" 5"`, `"1_000"`, `"5"`, `"-0"`, `"1e3"`, `"9223372036854775807"`, `"9223372036854775808"`,
		`"2014-08-22T00:50:32.1234567Z"`, `"2014-08-22T00:50:32Z"`, `"2014-08-22T00:50:32+02:00"`, `"2014-02-30T00:00:00Z"`,
		`"2014-08-22T00:50:32"`, `"4185404a-5818-48c3-b9be-f217df0dba6f"`, `"4185404A-5818-48C3-B9BE-F217DF0DBA6F"`,
		`"AAEC"`, `"AAE"`, `"AA=="`, `"AA\r\n=="`, `"!!"`, `"true"`,
		`0`, `-0`, `5`, `5.0`, `-0.0`, `1e3`, `1E+2`, `1e-2`, `2147483647`, `2147483648`, `-2147483648`, `-2147483649`,
		`12345678901`, `9223372036854775807`, `9223372036854775808`, `-9223372036854775808`, `1e400`, `-1e400`, `1e-400`,
		`0.1`, `123456789012345678901234567890`, `true`, `false`, `null`, `{}`, `[]`, `{"a":[1,{"b":null}]}`, `[1,"x",[true]]`,
	}
	genSpace = []string{``, ``, ``, ` `, "\n\t", "\r "}
)

// genEntity generates an entity object, sometimes broken.
func genEntity(r *rand.Rand) []byte {
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	var b []byte
	b = append(b, pick(genSpace)...)
	b = append(b, '{')
	n := r.IntN(8)
	many := r.IntN(10) == 0
	if many {
		n = 30 + r.IntN(20) // past the members ParseEntityJSON sorts by insertion
	}
	// Repeated names are refused: most entities have none, so that the
	// rest of the rules is compared too.
	repeats := r.IntN(4) == 0
	used := map[string]bool{}
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		name := pick(genNames)
		for !repeats && used[name] && len(used) < len(genNames)/2 {
			name = pick(genNames)
		}
		if !repeats && used[name] || many && r.IntN(2) == 0 {
			name = fmt.Sprintf("P%d", i)
		}
		used[name] = true
		b = append(b, pick(genSpace)...)
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"')
		b = append(b, pick(genSpace)...)
		b = append(b, ':')
		b = append(b, pick(genSpace)...)
		if strings.HasSuffix(name, "type") && r.IntN(4) > 0 {
			b = append(b, pick(genTypes)...)
		} else {
			b = append(b, pick(genValues)...)
		}
		b = append(b, pick(genSpace)...)
	}
	b = append(b, '}')
	b = append(b, pick(genSpace)...)
	switch r.IntN(20) {
	case 0: // cut short
		b = b[:r.IntN(len(b))]
	case 1: // a byte changed
		const bytes = "{}[]\":,\\0-.eE \x01\xff"
		b[r.IntN(len(b))] = bytes[r.IntN(len(bytes))]
	case 2: // data after
		b = append(b, pick([]string{"}", "]", "x", "{}", "\x00"})...)
	}
	return b
}

// FuzzParseEntityJSONReference: ParseEntityJSON agrees with the
// encoding/json reference on every input.
func FuzzParseEntityJSONReference(f *testing.F) {
	for _, c := range entityCases {
		f.Add([]byte(c))
	}
	f.Add(AppendEntityJSON(nil, allTypes(), `W/"1.1.1"`, MinimalMetadata))
	f.Add(benchEntityJSON())
	r := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		f.Add(genEntity(r))
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameParse(t, data) })
}

// FuzzUnquote: a JSON string's value is what encoding/json reads, and a
// string that encoding/json would read with U+FFFD for bad UTF-8 or a lone
// surrogate escape is refused.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{``, `abc`, `\u00e9\ud83d\ude00`, `\ud800\ud800`, `\udc00`, "\xff\xed\xa0\x80", `\"\\\/\b\f\n\r\t`,
		`\ud83d\u0041`, `\ud83d`, `\ud83dx`, `\\ud800`, "\xc3\xa9", "\xc3", `\ufffd`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		quoted := append(append([]byte{'"'}, body...), '"')
		var want string
		werr := json.Unmarshal(quoted, &want)
		if werr == nil && (!utf8.Valid(quoted) || hasLoneSurrogate(quoted)) {
			werr = errors.New("refused by Cairn")
		}
		s := jsonScanner{data: quoted}
		v, ok := s.str()
		// An inner quote ends the string early: then it is not one string.
		whole := ok && s.pos == len(quoted)
		if whole != (werr == nil) {
			t.Fatalf("%q: scanner ok=%v at %d, encoding/json %v", quoted, ok, s.pos, werr)
		}
		if whole && string(v.str()) != want {
			t.Fatalf("%q: %q, encoding/json %q", quoted, v.str(), want)
		}
	})
}

// benchEntityJSON is a ~1 KB entity as an SDK sends it.
func benchEntityJSON() []byte {
	return []byte(`{"PartitionKey":"p0000001","RowKey":"r0000123","Name":"Jones, Margaret Anne (Sales)","Email":"margaret.jones@contoso.example","Department":"Sales","City":"Springfield","Age":42,"Salary":50123.25,"Hired@odata.type":"Edm.DateTime","Hired":"2012-03-01T09:00:00Z","Serial@odata.type":"Edm.Int64","Serial":"123","Bucket":23,"Notes":"` +
		strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 12) + `"}`)
}

// BenchmarkParseEntityJSON against BenchmarkParseEntityJSONReference: the
// scanner against encoding/json.
func BenchmarkParseEntityJSON(b *testing.B) {
	data := benchEntityJSON()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseEntityJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseEntityJSONReference(b *testing.B) {
	data := benchEntityJSON()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, _, err := parseEntityJSONReference(data); err != nil {
			b.Fatal(err)
		}
	}
}
