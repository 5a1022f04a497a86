package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
)

var httpapiDefaults = httpapi.Config{}

func get(t *testing.T, c *aztables.Client, pk, rk string) (aztables.EDMEntity, azcore.ETag) {
	t.Helper()
	r, err := c.GetEntity(context.Background(), pk, rk, nil)
	if err != nil {
		t.Fatalf("get (%s, %s): %v", pk, rk, err)
	}
	var e aztables.EDMEntity
	if err := json.Unmarshal(r.Value, &e); err != nil {
		t.Fatal(err)
	}
	return e, r.ETag
}

func TestEntityOperations(t *testing.T) {
	s := startServer(t, httpapiDefaults)
	ctx := context.Background()
	c := s.table(t, "Employees")

	add, err := c.AddEntity(ctx, entity("Sales", "1", map[string]any{"Name": "Ann", "Age": int32(30)}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if add.ETag == "" || !bytes.Contains(add.Value, []byte(`"Name":"Ann"`)) {
		t.Fatalf("insert reply: etag %q, body %s", add.ETag, add.Value)
	}
	if _, err := c.AddEntity(ctx, entity("Sales", "1", nil), nil); code(err) != "EntityAlreadyExists" || status(err) != http.StatusConflict {
		t.Fatalf("insert twice: %v", err)
	}
	e, etag := get(t, c, "Sales", "1")
	if etag != add.ETag || e.Properties["Name"] != "Ann" || e.Properties["Age"] != int32(30) || time.Time(e.Timestamp).IsZero() {
		t.Fatalf("get: %+v %q", e, etag)
	}

	// Merge with the ETag keeps Age; a stale ETag is refused.
	up, err := c.UpdateEntity(ctx, entity("Sales", "1", map[string]any{"Email": "ann@x"}), &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeMerge})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateEntity(ctx, entity("Sales", "1", map[string]any{"Email": "old"}), &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace}); code(err) != "UpdateConditionNotSatisfied" || status(err) != http.StatusPreconditionFailed {
		t.Fatalf("replace with a stale ETag: %v", err)
	}
	e, etag = get(t, c, "Sales", "1")
	if etag != up.ETag || e.Properties["Email"] != "ann@x" || e.Properties["Age"] != int32(30) {
		t.Fatalf("after merge: %+v", e.Properties)
	}
	// Replace drops the other properties.
	if _, err := c.UpdateEntity(ctx, entity("Sales", "1", map[string]any{"Name": "Ann B"}), &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace}); err != nil {
		t.Fatal(err)
	}
	if e, _ = get(t, c, "Sales", "1"); len(e.Properties) != 1 || e.Properties["Name"] != "Ann B" {
		t.Fatalf("after replace: %+v", e.Properties)
	}
	// Update of a missing entity: 404; upserts create it.
	if _, err := c.UpdateEntity(ctx, entity("Sales", "2", nil), &aztables.UpdateEntityOptions{IfMatch: ptr(azcore.ETagAny), UpdateMode: aztables.UpdateModeMerge}); code(err) != "ResourceNotFound" {
		t.Fatalf("update a missing entity: %v", err)
	}
	for _, mode := range []aztables.UpdateMode{aztables.UpdateModeMerge, aztables.UpdateModeReplace} {
		if _, err := c.UpsertEntity(ctx, entity("Sales", "2", map[string]any{"Mode": string(mode)}), &aztables.UpsertEntityOptions{UpdateMode: mode}); err != nil {
			t.Fatalf("upsert %s: %v", mode, err)
		}
	}
	if e, _ = get(t, c, "Sales", "2"); e.Properties["Mode"] != string(aztables.UpdateModeReplace) {
		t.Fatalf("after upserts: %+v", e.Properties)
	}
	// Delete needs the current ETag (or *).
	_, etag = get(t, c, "Sales", "2")
	if _, err := c.DeleteEntity(ctx, "Sales", "2", &aztables.DeleteEntityOptions{IfMatch: &add.ETag}); code(err) != "UpdateConditionNotSatisfied" {
		t.Fatalf("delete with a stale ETag: %v", err)
	}
	if _, err := c.DeleteEntity(ctx, "Sales", "2", &aztables.DeleteEntityOptions{IfMatch: &etag}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetEntity(ctx, "Sales", "2", nil); code(err) != "ResourceNotFound" || status(err) != http.StatusNotFound {
		t.Fatalf("get a deleted entity: %v", err)
	}
	if _, err := c.DeleteEntity(ctx, "Sales", "2", nil); code(err) != "ResourceNotFound" {
		t.Fatalf("delete a missing entity: %v", err)
	}
	// Insert with return-no-content (raw: the SDK always asks for content).
	resp, body := s.raw(t, "POST", "/Employees", []byte(`{"PartitionKey":"Sales","RowKey":"3"}`), map[string]string{"Prefer": "return-no-content"})
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Preference-Applied") != "return-no-content" || resp.Header.Get("ETag") == "" || len(body) != 0 {
		t.Fatalf("insert without content: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	// A retry with the same x-ms-client-request-id is answered from the
	// first attempt, not refused as a conflict.
	retry := map[string]string{"x-ms-client-request-id": "3d2c9a4e-retry"}
	first, _ := s.raw(t, "POST", "/Employees", []byte(`{"PartitionKey":"Sales","RowKey":"4"}`), retry)
	again, body := s.raw(t, "POST", "/Employees", []byte(`{"PartitionKey":"Sales","RowKey":"4"}`), retry)
	if first.StatusCode != http.StatusCreated || again.StatusCode != http.StatusCreated || again.Header.Get("ETag") != first.Header.Get("ETag") {
		t.Fatalf("retried insert: %d then %d %s", first.StatusCode, again.StatusCode, body)
	}
	// A key with a quote, addressed in the URL (the SDK doubles quotes in
	// the body of inserts, so the entity is written raw).
	resp, body = s.raw(t, "POST", "/Employees", []byte(`{"PartitionKey":"O'Brien","RowKey":"a'b"}`), nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("insert with quotes: %d %s", resp.StatusCode, body)
	}
	if _, etag := get(t, c, "O'Brien", "a'b"); etag == "" {
		t.Fatal("no ETag for a quoted key")
	}
	// Bad input gets Azure's errors.
	for _, tc := range []struct{ body, code string }{
		{`{"PartitionKey":"a/b","RowKey":"1"}`, "OutOfRangeInput"},
		{`{"PartitionKey":"a","RowKey":"1","Big":"` + string(bytes.Repeat([]byte("x"), 70000)) + `"}`, "PropertyValueTooLarge"},
		{`{"PartitionKey":"a","RowKey":"1","N":"x","N@odata.type":"Edm.Int64"}`, "InvalidInput"},
		{`not json`, "InvalidInput"},
	} {
		resp, body := s.raw(t, "POST", "/Employees", []byte(tc.body), nil)
		if got := resp.Header.Get("x-ms-error-code"); got != tc.code || resp.StatusCode < 400 {
			t.Errorf("%.60s: %d %s %s", tc.body, resp.StatusCode, got, body)
		}
	}
}

// TestEdmTypes round-trips every Edm type exactly through the SDK.
func TestEdmTypes(t *testing.T) {
	s := startServer(t, httpapiDefaults)
	ctx := context.Background()
	c := s.table(t, "Types")
	when := time.Date(2014, 8, 22, 0, 50, 32, 123456700, time.UTC) // 100 ns precision
	props := map[string]any{
		"S":   "text ü",
		"I32": int32(-2147483648),
		"I64": aztables.EDMInt64(1<<53 + 1),
		"Max": aztables.EDMInt64(math.MaxInt64),
		"D":   1.5,
		"B":   true,
		"T":   aztables.EDMDateTime(when),
		"G":   aztables.EDMGUID("4185404a-5818-48c3-b9be-f217df0dba6f"),
		"Bin": aztables.EDMBinary{0, 1, 2, 0xff},
	}
	if _, err := c.AddEntity(ctx, entity("p", "r", props), nil); err != nil {
		t.Fatal(err)
	}
	// A whole-number Double: the SDK would send 5 (read as Int32), so it
	// is annotated by hand.
	whole := []byte(`{"PartitionKey":"p","RowKey":"whole","W":5.0,"W@odata.type":"Edm.Double","Neg":-0.0,"Neg@odata.type":"Edm.Double","Inf":"Infinity","Inf@odata.type":"Edm.Double"}`)
	if _, err := c.AddEntity(ctx, whole, nil); err != nil {
		t.Fatal(err)
	}
	// The SDK drops values annotated Edm.Double (full metadata annotates
	// every double), so full metadata is checked for the other types.
	for _, format := range []aztables.MetadataFormat{aztables.MetadataFormatMinimal, aztables.MetadataFormatFull} {
		got := list(t, c, &aztables.ListEntitiesOptions{Filter: ptr("RowKey eq 'r'"), Format: &format})
		if len(got) != 1 {
			t.Fatalf("%s: %d entities", format, len(got))
		}
		for k, want := range props {
			v := got[0].Properties[k]
			if tm, ok := v.(aztables.EDMDateTime); ok {
				if !time.Time(tm).Equal(when) {
					t.Errorf("%s: %s = %v, want %v", format, k, time.Time(tm), when)
				}
				continue
			}
			if _, isDouble := want.(float64); isDouble && format == aztables.MetadataFormatFull {
				continue
			}
			if !equal(v, want) {
				t.Errorf("%s: %s = %#v, want %#v", format, k, v, want)
			}
		}
	}
	// The SDK decodes each entity into a map and encodes it again before
	// handing it over, which turns 5.0 into 5 (then read as Int32), and it
	// ignores Edm.Double annotations (needed for Infinity): the type is
	// checked on the wire, the value through the SDK.
	whl := list(t, c, &aztables.ListEntitiesOptions{Filter: ptr("RowKey eq 'whole'")})
	if w := whl[0].Properties["W"]; w != int32(5) && w != 5.0 {
		t.Errorf("whole-number double read back as %#v", w)
	}
	_, body := s.raw(t, "GET", "/Types(PartitionKey='p',RowKey='whole')", nil, nil)
	for _, want := range []string{`"W":5.0`, `"Inf@odata.type":"Edm.Double","Inf":"Infinity"`, `"Neg":-0.0`} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("%s not in %s", want, body)
		}
	}
	// Typed filter literals select by type.
	for filter, n := range map[string]int{
		"I64 eq 9007199254740993L":                         1,
		"I64 eq 9007199254740992L":                         0,
		"T eq datetime'2014-08-22T00:50:32.1234567Z'":      1,
		"T eq datetime'2014-08-22T00:50:32.1234568Z'":      0,
		"G eq guid'4185404a-5818-48c3-b9be-f217df0dba6f'":  1,
		"Bin eq X'000102ff'":                               1,
		"D gt 1.4 and D lt 1.6 and B eq true and S ne 'x'": 1,
		"I32 lt 0":       1,
		"W eq 5.0":       1,
		"W eq 5":         0, // Int32 5 is not the Double 5.0, as in Azure
		"S eq 1":         0,
		"Missing eq 'x'": 0,
	} {
		if got := list(t, c, &aztables.ListEntitiesOptions{Filter: ptr(filter)}); len(got) != n {
			t.Errorf("%s: %d entities, want %d", filter, len(got), n)
		}
	}
}

func equal(a, b any) bool {
	if x, ok := a.(aztables.EDMBinary); ok {
		y, ok := b.(aztables.EDMBinary)
		return ok && bytes.Equal(x, y)
	}
	return a == b
}

// Point reads write their answers into pooled buffers: reads of entities
// of different sizes at once, some larger than a buffer kept, each get
// their own entity whole.
func TestConcurrentPointReadsOwnAnswers(t *testing.T) {
	s := startServer(t, httpapiDefaults)
	c := s.table(t, "Answers")
	ctx := context.Background()
	sizes := []int{0, 10, 3000, 5000, 70 << 10, 200 << 10}
	props := func(i int) map[string]any { // n bytes in properties of at most 30,000
		m := map[string]any{}
		for n, k := sizes[i], 0; n > 0; k++ {
			m[fmt.Sprint("V", k)] = strings.Repeat(string(rune('a'+i)), min(n, 30000))
			n -= 30000
		}
		return m
	}
	for i := range sizes {
		if _, err := c.AddEntity(ctx, entity("p", fmt.Sprint(i), props(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for j := range 30 {
				i := (w + j) % len(sizes)
				r, err := c.GetEntity(ctx, "p", fmt.Sprint(i), nil)
				if err != nil {
					t.Error(err)
					return
				}
				var got aztables.EDMEntity
				if err := json.Unmarshal(r.Value, &got); err != nil {
					t.Error(err)
					return
				}
				if want := props(i); fmt.Sprint(got.Properties) != fmt.Sprint(want) {
					t.Errorf("entity %d: its properties are not its own", i)
					return
				}
			}
		})
	}
	wg.Wait()
}
