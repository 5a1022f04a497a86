package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/operator"
)

// door sends a request to the Tables API's operator door with the
// authorization auth ("" for none) and returns the status, headers and
// body.
func door(t *testing.T, s *server, method, path, auth string, body []byte, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.h.HTTPURL()+httpapi.OperatorPrefix+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Accept", "application/json;odata=minimalmetadata")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// TestOperatorDoor: the Tables API behind the operator token answers as
// the signed API does, writes through the same committer (ETags,
// validation), and refuses requests without the token.
func TestOperatorDoor(t *testing.T) {
	s := startServer(t, httpapi.Config{})
	bearer := "Bearer " + s.h.OperatorToken()
	acct := httpapi.DevAccountName + "/"

	// Without the token, or with another, nothing is created.
	for _, auth := range []string{"", "Bearer wrong-token-0123456789", "SharedKey " + httpapi.DevAccountName + ":c2ln"} {
		st, _, b := door(t, s, "POST", acct+"Tables", auth, []byte(`{"TableName":"Door"}`), nil)
		var e struct{ Code string }
		if st != http.StatusUnauthorized || json.Unmarshal(b, &e) != nil || e.Code != operator.CodeAuthenticationFailed {
			t.Fatalf("create without the token (%q): %d %s", auth, st, b)
		}
	}
	if resp, b := s.raw(t, "GET", "/Tables('Door')", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a refused create made the table: %d %s", resp.StatusCode, b)
	}
	// A foreign web page is refused even with the token.
	if st, _, _ := door(t, s, "GET", acct+"Tables", bearer, nil, map[string]string{"Origin": "https://evil.example"}); st != http.StatusForbidden {
		t.Fatalf("foreign origin: %d, want 403", st)
	}

	st, h, b := door(t, s, "POST", acct+"Tables", bearer, []byte(`{"TableName":"Door"}`), map[string]string{"x-ms-client-request-id": "console-1"})
	if st != http.StatusCreated || h.Get("X-Ms-Request-Id") == "" || h.Get("X-Ms-Client-Request-Id") != "console-1" {
		t.Fatalf("create: %d %v %s", st, h, b)
	}
	st, h, b = door(t, s, "POST", acct+"Door", bearer, []byte(`{"PartitionKey":"p","RowKey":"r","N":1,"Big@odata.type":"Edm.Int64","Big":"9007199254740993"}`), map[string]string{"Prefer": "return-no-content"})
	if st != http.StatusNoContent || h.Get("ETag") == "" {
		t.Fatalf("insert: %d %s", st, b)
	}
	etag := h.Get("ETag")

	// The same entity, the same JSON as the signed API's.
	_, _, viaDoor := door(t, s, "GET", acct+"Door(PartitionKey='p',RowKey='r')", bearer, nil, nil)
	resp, viaKey := s.raw(t, "GET", "/Door(PartitionKey='p',RowKey='r')", nil, nil)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(viaDoor, viaKey) {
		t.Fatalf("retrieve through the door:\n%s\nsigned:\n%s", viaDoor, viaKey)
	}
	_, _, qDoor := door(t, s, "GET", acct+"Door()?$filter=N%20eq%201", bearer, nil, nil)
	_, qKey := s.raw(t, "GET", "/Door()?$filter=N%20eq%201", nil, nil)
	if !bytes.Equal(qDoor, qKey) {
		t.Fatalf("query through the door:\n%s\nsigned:\n%s", qDoor, qKey)
	}

	// Writes go through the committer: a replace with the ETag succeeds,
	// one with the stale ETag is refused and stores nothing.
	if st, _, b := door(t, s, "PUT", acct+"Door(PartitionKey='p',RowKey='r')", bearer, []byte(`{"PartitionKey":"p","RowKey":"r","N":2}`), map[string]string{"If-Match": etag}); st != http.StatusNoContent {
		t.Fatalf("replace with the ETag: %d %s", st, b)
	}
	st, _, b = door(t, s, "PUT", acct+"Door(PartitionKey='p',RowKey='r')", bearer, []byte(`{"PartitionKey":"p","RowKey":"r","N":3}`), map[string]string{"If-Match": etag})
	if st != http.StatusPreconditionFailed || !bytes.Contains(b, []byte("UpdateConditionNotSatisfied")) {
		t.Fatalf("replace with a stale ETag: %d %s", st, b)
	}
	// Bad input is a coded error and stores nothing.
	st, _, b = door(t, s, "POST", acct+"Door", bearer, []byte(`{"PartitionKey":"p","RowKey":"bad","N@odata.type":"Edm.Int32","N":"x"}`), nil)
	if st != http.StatusBadRequest || !bytes.Contains(b, []byte(`"code"`)) {
		t.Fatalf("bad entity: %d %s", st, b)
	}
	if resp, _ := s.raw(t, "GET", "/Door(PartitionKey='p',RowKey='bad')", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a refused insert was stored: %d", resp.StatusCode)
	}
	var got struct{ N int }
	_, _, b = door(t, s, "GET", acct+"Door(PartitionKey='p',RowKey='r')", bearer, nil, nil)
	if json.Unmarshal(b, &got) != nil || got.N != 2 {
		t.Fatalf("after the refused writes: %s, want N 2", b)
	}
	for _, path := range []string{"Bad_Account/Tables", "/Tables", "x/Tables"} {
		if st, _, b := door(t, s, "GET", path, bearer, nil, nil); st != http.StatusBadRequest || !bytes.Contains(b, []byte(`"code"`)) {
			t.Errorf("GET %s: %d %s, want a coded 400", path, st, b)
		}
	}
	if st, _, b := door(t, s, "DELETE", acct+"Tables('Door')", bearer, nil, nil); st != http.StatusNoContent {
		t.Fatalf("delete table: %d %s", st, b)
	}
}
