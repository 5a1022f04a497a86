package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestBadInputRefused: bad entity input gets a coded 400 and stores
// nothing, on every write route: the first write that succeeds afterwards
// is the table's first journal record (X-Cairn-Position 1).
func TestBadInputRefused(t *testing.T) {
	s := startServer(t, httpapiDefaults)
	ctx := context.Background()
	c := s.table(t, "Bad")
	at := "/Bad(PartitionKey='p',RowKey='r')"
	cases := []struct {
		name, method, path, body, code string
	}{
		{"bad UTF-8 in PartitionKey", "POST", "/Bad", "{\"PartitionKey\":\"p\xff\",\"RowKey\":\"r\"}", "InvalidInput"},
		{"bad UTF-8 in RowKey", "POST", "/Bad", "{\"PartitionKey\":\"p\",\"RowKey\":\"\xc3\"}", "InvalidInput"},
		{"bad UTF-8 in a name", "POST", "/Bad", "{\"PartitionKey\":\"p\",\"RowKey\":\"r\",\"N\xff\":1}", "InvalidInput"},
		{"bad UTF-8 in a value", "PUT", at, "{\"S\":\"\xed\xa0\x80\"}", "InvalidInput"},
		{"a lone surrogate", "PATCH", at, `{"S":"\ud800"}`, "InvalidInput"},
		{"bad UTF-8 in the URL's key", "PUT", "/Bad(PartitionKey='p%FF',RowKey='r')", `{"A":1}`, "InvalidInput"},
		{"a surrogate's UTF-8 in the URL's key", "MERGE", "/Bad(PartitionKey='p',RowKey='%ED%A0%80')", `{"A":1}`, "InvalidInput"},
		{"no PartitionKey", "POST", "/Bad", `{"RowKey":"r","A":1}`, "PropertiesNeedValue"},
		{"no RowKey", "POST", "/Bad", `{"PartitionKey":"p"}`, "PropertiesNeedValue"},
		{"no keys", "POST", "/Bad", `{"A":1}`, "PropertiesNeedValue"},
		{"PartitionKey null", "POST", "/Bad", `{"PartitionKey":null,"RowKey":"r"}`, "PropertiesNeedValue"},
		{"RowKey null in an update", "PUT", at, `{"RowKey":null,"A":1}`, "PropertiesNeedValue"},
		{"a property twice", "POST", "/Bad", `{"PartitionKey":"p","RowKey":"r","A":1,"A":2}`, "DuplicatePropertiesSpecified"},
		{"RowKey twice", "POST", "/Bad", `{"PartitionKey":"p","RowKey":"r","RowKey":"s"}`, "DuplicatePropertiesSpecified"},
		{"body key against the URL's", "PUT", at, `{"PartitionKey":"q","A":1}`, "DuplicatePropertiesSpecified"},
		{"body RowKey against the URL's", "MERGE", at, `{"PartitionKey":"p","RowKey":"s"}`, "DuplicatePropertiesSpecified"},
		{"DateTime of 8 digits", "POST", "/Bad", `{"PartitionKey":"p","RowKey":"r","D@odata.type":"Edm.DateTime","D":"2014-08-22T00:50:32.12345678Z"}`, "InvalidInput"},
		{"DateTime without a zone", "PUT", at, `{"D@odata.type":"Edm.DateTime","D":"2014-08-22T00:50:32"}`, "InvalidInput"},
		{"Double of nan", "POST", "/Bad", `{"PartitionKey":"p","RowKey":"r","F@odata.type":"Edm.Double","F":"nan"}`, "InvalidInput"},
		{"PartitionKey annotated Int32", "POST", "/Bad", `{"PartitionKey@odata.type":"Edm.Int32","PartitionKey":"p","RowKey":"r"}`, "InvalidInput"},
		{"Timestamp annotated String", "PUT", at, `{"Timestamp@odata.type":"Edm.String","Timestamp":"x"}`, "InvalidInput"},
	}
	for _, tc := range cases {
		resp, body := s.raw(t, tc.method, tc.path, []byte(tc.body), nil)
		if got := resp.Header.Get("x-ms-error-code"); resp.StatusCode != http.StatusBadRequest || got != tc.code {
			t.Errorf("%s: %d %s, want 400 %s: %s", tc.name, resp.StatusCode, got, tc.code, body)
		}
		if !strings.Contains(string(body), `"code":"`+tc.code+`"`) {
			t.Errorf("%s: the error body does not carry the code: %s", tc.name, body)
		}
	}
	// The same in a batch: the operation fails, the batch applies nothing.
	for _, op := range [][3]string{
		{"POST", "Bad", `{"PartitionKey":"p"}`},
		{"POST", "Bad", `{"PartitionKey":"p","RowKey":"y","A":1,"A":1}`},
		{"PUT", "Bad(PartitionKey='p',RowKey='y')", `{"RowKey":"z"}`},
		{"PUT", "Bad(PartitionKey='p',RowKey='y')", "{\"S\":\"\xff\"}"},
	} {
		_, body := s.raw(t, "POST", "/$batch", batchBody(s, "Bad", [][3]string{{"POST", "Bad", `{"PartitionKey":"p","RowKey":"x"}`}, op}),
			map[string]string{"Content-Type": "multipart/mixed; boundary=batch_b1"})
		if !strings.Contains(string(body), "HTTP/1.1 400") || !strings.Contains(string(body), "Content-ID: 2") {
			t.Errorf("batch with %s: not refused at operation 2:\n%s", op[2], body)
		}
	}
	if got := list(t, c, nil); len(got) != 0 {
		t.Fatalf("refused writes stored %d entities: %+v", len(got), got)
	}
	// Nothing reached the journal: the next write is its first record.
	resp, body := s.raw(t, "POST", "/Bad", []byte(`{"PartitionKey":"","RowKey":""}`), nil)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("X-Cairn-Position") != "1" {
		t.Fatalf("first good write: %d position %q %s", resp.StatusCode, resp.Header.Get("X-Cairn-Position"), body)
	}

	// The edges that stay valid: empty keys given explicitly (above), keys
	// in the body equal to the URL's, or doubled quotes as the Go SDK sends
	// them.
	if resp, body := s.raw(t, "GET", "/Bad(PartitionKey='',RowKey='')", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("the entity with empty keys: %d %s", resp.StatusCode, body)
	}
	if resp, body := s.raw(t, "PUT", at, []byte(`{"PartitionKey":"p","RowKey":"r","S":"\ufffd"}`), nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("upsert with the URL's keys in the body: %d %s", resp.StatusCode, body)
	}
	if resp, body := s.raw(t, "PUT", "/Bad(PartitionKey='O''Brien',RowKey='r')", []byte(`{"PartitionKey":"O''Brien","RowKey":"r","A":1}`), nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("upsert with the URL's key, quotes doubled in the body: %d %s", resp.StatusCode, body)
	}
	if e, _ := get(t, c, "O'Brien", "r"); e.Properties["A"] != int32(1) {
		t.Fatalf("read back: %+v", e)
	}
	// (The Go SDK doubles quotes in the key before it writes body and URL,
	// so the two agree, on a key with the quotes doubled.)
	if _, err := c.UpsertEntity(ctx, entity("X'Y", "a'b", map[string]any{"A": int32(1)}), nil); err != nil {
		t.Fatalf("SDK upsert of a key with quotes: %v", err)
	}
}

// TestSelectRefused: a $select with an empty item or a name that cannot
// be a property's is a coded 400, on retrieves and queries.
func TestSelectRefused(t *testing.T) {
	s := startServer(t, httpapiDefaults)
	s.table(t, "Sel")
	if resp, body := s.raw(t, "POST", "/Sel", []byte(`{"PartitionKey":"p","RowKey":"r","A":1,"B":2}`), nil); resp.StatusCode != http.StatusCreated {
		t.Fatalf("insert: %d %s", resp.StatusCode, body)
	}
	for _, sel := range []string{"A,,B", "A,", ",A", "A.B", "1A", "A-B", "odata.etag", "A%20B", "%FF", strings.Repeat("a", 256)} {
		for _, path := range []string{"/Sel(PartitionKey='p',RowKey='r')", "/Sel()"} {
			resp, body := s.raw(t, "GET", path+"?$select="+sel, nil, nil)
			if got := resp.Header.Get("x-ms-error-code"); resp.StatusCode != http.StatusBadRequest || got != "InvalidQueryParameterValue" {
				t.Errorf("%s?$select=%.20s: %d %s %s", path, sel, resp.StatusCode, got, body)
			}
		}
	}
	for _, sel := range []string{"A", "A,B", " A , B ", "*", "_x,RowKey,Timestamp", strings.Repeat("a", 255)} {
		resp, body := s.raw(t, "GET", "/Sel(PartitionKey='p',RowKey='r')?$select="+strings.ReplaceAll(sel, " ", "%20"), nil, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("$select=%.20s: %d %s", sel, resp.StatusCode, body)
		}
	}
}
