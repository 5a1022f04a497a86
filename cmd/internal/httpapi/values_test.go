package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/engine"
)

// valuePath is the path of an entity's value (upload) or of the value a
// property refers to (download, prop not empty).
func valuePath(table, pk, rk, prop string) string {
	p := "/" + table + "(PartitionKey='" + pk + "',RowKey='" + rk + "')/$value"
	if prop != "" {
		p += "/" + prop
	}
	return p
}

// upload puts a value through the HTTP door and returns its reference.
func (s *server) upload(t testing.TB, table, pk, rk string, body []byte) string {
	t.Helper()
	resp, b := s.raw(t, http.MethodPut, valuePath(table, pk, rk, ""), body, map[string]string{"Content-Type": "application/octet-stream"})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %s %s", resp.Status, b)
	}
	var got struct {
		Reference string `json:"reference"`
		Size      int64  `json:"size"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Reference != resp.Header.Get(httpapi.ValueHeader) || !strings.HasPrefix(got.Reference, engine.ValueRefPrefix) || got.Size != int64(len(body)) {
		t.Fatalf("upload answered %s with %s: %s", b, httpapi.ValueHeader, resp.Header.Get(httpapi.ValueHeader))
	}
	return got.Reference
}

func randomBytes(t testing.TB, n int) []byte {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestValues: a value larger than an entity may be goes up, an entity
// refers to it, and it comes back byte for byte; the references that do
// not name a value of the entity are refused with nothing stored.
func TestValues(t *testing.T) {
	s := startServer(t, httpapiDefaults)
	ctx := context.Background()
	c := s.table(t, "Photos")
	s.catalogSettled(t)
	data := randomBytes(t, 3<<20+5)
	ref := s.upload(t, "photos", "Sales", "emp1", data) // any spelling of the table
	if _, err := c.AddEntity(ctx, entity("Sales", "emp1", map[string]any{"Photo": ref, "Name": "Ann"}), nil); err != nil {
		t.Fatal(err)
	}
	resp, got := s.raw(t, http.MethodGet, valuePath("Photos", "Sales", "emp1", "Photo"), nil, nil)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, data) {
		t.Fatalf("download: %s, %d bytes; want the %d uploaded", resp.Status, len(got), len(data))
	}
	if resp.Header.Get("Content-Type") != "application/octet-stream" || resp.ContentLength != int64(len(data)) {
		t.Fatalf("download headers: %v", resp.Header)
	}
	// Copied into another entity: it names nothing there.
	_, err := c.AddEntity(ctx, entity("Sales", "emp2", map[string]any{"Photo": ref}), nil)
	if code(err) != "InvalidInput" || !strings.Contains(err.Error(), "names no value of the entity") {
		t.Fatalf("a reference copied into another entity: %v", err)
	}
	// Into another table: the same.
	other := s.table(t, "Other")
	s.catalogSettled(t)
	if _, err := other.AddEntity(ctx, entity("Sales", "emp1", map[string]any{"Photo": ref}), nil); code(err) != "InvalidInput" {
		t.Fatalf("a reference copied into another table: %v", err)
	}
	// Malformed, in a single write and in a batch.
	bad := engine.ValueRefPrefix + "not-an-id"
	if _, err := c.UpsertEntity(ctx, entity("Sales", "emp3", map[string]any{"Photo": bad}), nil); code(err) != "InvalidInput" {
		t.Fatalf("a malformed reference: %v", err)
	}
	ops := []aztables.TransactionAction{
		{ActionType: aztables.TransactionTypeAdd, Entity: entity("Sales", "emp4", map[string]any{"X": "y"})},
		{ActionType: aztables.TransactionTypeAdd, Entity: entity("Sales", "emp5", map[string]any{"Photo": bad})},
	}
	if _, err := c.SubmitTransaction(ctx, ops, nil); err == nil || !strings.Contains(err.Error(), "1:property Photo") {
		t.Fatalf("a batch with a malformed reference: %v", err)
	}
	for _, rk := range []string{"emp2", "emp3", "emp4", "emp5"} {
		if _, err := c.GetEntity(ctx, "Sales", rk, nil); status(err) != http.StatusNotFound {
			t.Fatalf("%s stored after a refusal: %v", rk, err)
		}
	}
	// Kept by a replace, and by a merge that does not name it.
	if _, err := c.UpdateEntity(ctx, entity("Sales", "emp1", map[string]any{"Photo": ref, "Name": "Ann B"}), &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeReplace}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateEntity(ctx, entity("Sales", "emp1", map[string]any{"Age": int32(40)}), &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeMerge}); err != nil {
		t.Fatal(err)
	}
	// Downloads refused: a property that is not a reference, one absent,
	// an entity absent, a table absent.
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{valuePath("Photos", "Sales", "emp1", "Name"), 400, "InvalidInput"},
		{valuePath("Photos", "Sales", "emp1", "Nope"), 400, "InvalidInput"},
		{valuePath("Photos", "Sales", "nobody", "Photo"), 404, "ResourceNotFound"},
		{valuePath("Nothing", "Sales", "emp1", "Photo"), 404, "TableNotFound"},
		{valuePath("Photos", "Sales", "emp1", ""), 405, ""},
		{"/Photos()/$value", 400, ""},
		{"/Photos(PartitionKey='Sales',RowKey='emp1')/$valuex", 400, ""},
	} {
		resp, b := s.raw(t, http.MethodGet, tc.path, nil, nil)
		if resp.StatusCode != tc.status || tc.code != "" && resp.Header.Get("x-ms-error-code") != tc.code {
			t.Errorf("GET %s: %s %s; want %d %s", tc.path, resp.Status, b, tc.status, tc.code)
		}
	}
	// Uploads refused: a table absent, a bad key.
	for _, path := range []string{valuePath("Nothing", "p", "r", ""), "/Photos(PartitionKey='a%01',RowKey='r')/$value"} {
		resp, b := s.raw(t, http.MethodPut, path, []byte("x"), nil)
		if resp.StatusCode/100 != 4 {
			t.Errorf("PUT %q: %s %s", path, resp.Status, b)
		}
	}
}

// TestValueAuthorization: an upload is authorised as a write of the
// entity, a download as a point read of it.
func TestValueAuthorization(t *testing.T) {
	s := startServer(t, httpapiDefaults)
	ctx := context.Background()
	c := s.table(t, "Staff")
	s.catalogSettled(t)
	ref := s.upload(t, "Staff", "Sales", "1", []byte("photo"))
	if _, err := c.AddEntity(ctx, entity("Sales", "1", map[string]any{"Photo": ref}), nil); err != nil {
		t.Fatal(err)
	}
	// Unsigned, and signed with another key.
	for _, h := range []map[string]string{
		{"Authorization": ""},
		{"Authorization": "SharedKey " + httpapi.DevAccountName + ":AAAA"},
	} {
		for _, m := range []string{http.MethodPut, http.MethodGet} {
			path := valuePath("Staff", "Sales", "1", "")
			if m == http.MethodGet {
				path = valuePath("Staff", "Sales", "1", "Photo")
			}
			resp, b := s.raw(t, m, path, []byte("x"), h)
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s %s with %v: %s %s", m, path, h, resp.Status, b)
			}
		}
	}
	sas := func(perms, pk string) string {
		v := aztables.SASSignatureValues{TableName: "Staff", Permissions: perms, ExpiryTime: time.Now().Add(time.Hour), StartPartitionKey: pk, EndPartitionKey: pk}
		q, err := v.Sign(credential(t))
		if err != nil {
			t.Fatal(err)
		}
		return q + "&spk=" + pk + "&epk=" + pk
	}
	send := func(method, path, query string, body io.Reader) *http.Response {
		req, err := http.NewRequest(method, s.endpoint+path+"?"+query, body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		method, path, perms, pk string
		want                    int
	}{
		{http.MethodGet, valuePath("Staff", "Sales", "1", "Photo"), "r", "Sales", 200},
		{http.MethodGet, valuePath("Staff", "Sales", "1", "Photo"), "r", "HR", 403},
		{http.MethodGet, valuePath("Staff", "Sales", "1", "Photo"), "au", "Sales", 403},
		{http.MethodPut, valuePath("Staff", "Sales", "2", ""), "a", "Sales", 201},
		{http.MethodPut, valuePath("Staff", "Sales", "2", ""), "u", "Sales", 201},
		{http.MethodPut, valuePath("Staff", "Sales", "2", ""), "rd", "Sales", 403},
		{http.MethodPut, valuePath("Staff", "Sales", "2", ""), "au", "HR", 403},
	} {
		if resp := send(tc.method, tc.path, sas(tc.perms, tc.pk), strings.NewReader("x")); resp.StatusCode != tc.want {
			t.Errorf("%s %s with sp=%s on %s: %s; want %d", tc.method, tc.path, tc.perms, tc.pk, resp.Status, tc.want)
		}
	}
}

// pattern is an endless reader of pseudo-random bytes that hashes what
// it gives.
type pattern struct {
	r    *rand.ChaCha8
	left int64
	sum  interface{ Write([]byte) (int, error) }
}

func (p *pattern) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	n, _ := p.r.Read(b)
	p.sum.Write(b[:n])
	p.left -= int64(n)
	return n, nil
}

// TestValueStreamed: a value of 64 MiB goes up chunked, with no
// Content-Length, and comes back equal; one past the node's limit is
// refused and leaves nothing.
func TestValueStreamed(t *testing.T) {
	const size = 64 << 20
	api := httpapiDefaults
	api.MaxValue = size
	s := startServer(t, api)
	ctx := context.Background()
	c := s.table(t, "Big")
	s.catalogSettled(t)
	put := func(n int64) *http.Response {
		h := sha256.New()
		req, err := http.NewRequest(http.MethodPut, s.endpoint+valuePath("Big", "p", "r", ""), &pattern{r: rand.NewChaCha8([32]byte{1}), left: n, sum: h})
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("x-ms-date", time.Now().UTC().Format(http.TimeFormat))
		sign(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := put(size)
	var up struct{ Reference string }
	if err := json.NewDecoder(resp.Body).Decode(&up); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %s, %v", resp.Status, err)
	}
	resp.Body.Close()
	if _, err := c.AddEntity(ctx, entity("p", "r", map[string]any{"V": up.Reference}), nil); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, s.endpoint+valuePath("Big", "p", "r", "V"), nil)
	req.Header.Set("x-ms-date", time.Now().UTC().Format(http.TimeFormat))
	sign(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.New()
	_, _ = io.Copy(want, &pattern{r: rand.NewChaCha8([32]byte{1}), left: size, sum: io.Discard})
	got := sha256.New()
	n, err := io.Copy(got, resp.Body)
	resp.Body.Close()
	if err != nil || n != size || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Fatalf("download: %d bytes, %v; want the %d uploaded, equal", n, err, size)
	}
	resp = put(size + 1)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("an upload past the limit: %s", resp.Status)
	}
}
