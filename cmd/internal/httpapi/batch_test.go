package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

func TestBatch(t *testing.T) {
	s := startServer(t, httpapiDefaults)
	ctx := context.Background()
	c := s.table(t, "Orders")
	if _, err := c.AddEntity(ctx, entity("p", "existing", map[string]any{"V": int32(1)}), nil); err != nil {
		t.Fatal(err)
	}
	_, etag := get(t, c, "p", "existing")
	var ok []aztables.TransactionAction
	for i := 0; i < 98; i++ {
		ok = append(ok, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: entity("p", fmt.Sprintf("%03d", i), map[string]any{"N": int32(i)})})
	}
	ok = append(ok,
		aztables.TransactionAction{ActionType: aztables.TransactionTypeUpdateMerge, Entity: entity("p", "existing", map[string]any{"W": int32(2)}), IfMatch: &etag},
		aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace, Entity: entity("p", "upserted", nil)})
	if _, err := c.SubmitTransaction(ctx, ok, nil); err != nil {
		t.Fatalf("a batch of 100: %v", err)
	}
	if got := list(t, c, &aztables.ListEntitiesOptions{Filter: ptr("PartitionKey eq 'p'")}); len(got) != 100 {
		t.Fatalf("%d entities after the batch, want 100", len(got))
	}
	e, _ := get(t, c, "p", "existing")
	if e.Properties["V"] != int32(1) || e.Properties["W"] != int32(2) {
		t.Fatalf("merged in the batch: %v", e.Properties)
	}

	// A failing batch applies nothing. The SDK reports the failure but
	// loses its code (it reads the 202's body before making the error).
	bad := []aztables.TransactionAction{
		{ActionType: aztables.TransactionTypeAdd, Entity: entity("p", "new1", nil)},
		{ActionType: aztables.TransactionTypeDelete, Entity: entity("p", "000", nil)},
		{ActionType: aztables.TransactionTypeAdd, Entity: entity("p", "001", nil)}, // exists
	}
	if _, err := c.SubmitTransaction(ctx, bad, nil); err == nil {
		t.Fatal("a conflicting batch succeeded")
	}
	if _, err := c.GetEntity(ctx, "p", "new1", nil); code(err) != "ResourceNotFound" {
		t.Fatalf("the failed batch's first insert was applied: %v", err)
	}
	if _, err := c.GetEntity(ctx, "p", "000", nil); err != nil {
		t.Fatalf("the failed batch's delete was applied: %v", err)
	}
	// On the wire: 202, one part naming operation 3 (Content-ID) with the
	// 0-based index prefixed to the message.
	resp, body := s.raw(t, "POST", "/$batch", batchBody(s, "Orders", [][3]string{
		{"POST", "Orders", `{"PartitionKey":"p","RowKey":"new1"}`},
		{"DELETE", "Orders(PartitionKey='p',RowKey='000')", "*"},
		{"POST", "Orders", `{"PartitionKey":"p","RowKey":"001"}`},
	}), map[string]string{"Content-Type": "multipart/mixed; boundary=batch_b1"})
	if resp.StatusCode != http.StatusAccepted || !strings.HasPrefix(string(body), "--batchresponse_") {
		t.Fatalf("failed batch: %d %s", resp.StatusCode, body)
	}
	for _, want := range []string{"HTTP/1.1 409 Conflict", "Content-ID: 3", `"code":"EntityAlreadyExists"`, `"value":"2:`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("%q not in the failed batch's reply:\n%s", want, body)
		}
	}
	// Rules: one partition, at most 100 operations, one table.
	cases := []struct {
		ops  [][3]string
		want []string
	}{
		{[][3]string{{"POST", "Orders", `{"PartitionKey":"p","RowKey":"x"}`}, {"POST", "Orders", `{"PartitionKey":"q","RowKey":"x"}`}},
			[]string{"CommandsInBatchActOnDifferentPartitions", "Content-ID: 2"}},
		{[][3]string{{"POST", "Orders", `{"PartitionKey":"p","RowKey":"x"}`}, {"POST", "Orders", `{"PartitionKey":"p","RowKey":"x"}`}},
			[]string{"InvalidDuplicateRow", "Content-ID: 2", `"value":"1:`}},
		{[][3]string{{"POST", "Orders", `{"PartitionKey":"p","RowKey":"x"}`}, {"POST", "Other", `{"PartitionKey":"p","RowKey":"y"}`}},
			[]string{"one table", "Content-ID: 2"}},
		{[][3]string{{"DELETE", "Orders(PartitionKey='p',RowKey='000')", ""}},
			[]string{"MissingRequiredHeader"}},
		{[][3]string{{"POST", "Missing", `{"PartitionKey":"p","RowKey":"x"}`}},
			[]string{"TableNotFound", "Content-ID: 1", "HTTP/1.1 404"}},
		{manyInserts(101), []string{"100"}},
	}
	for i, tc := range cases {
		_, body := s.raw(t, "POST", "/$batch", batchBody(s, "Orders", tc.ops), map[string]string{"Content-Type": "multipart/mixed; boundary=batch_b1"})
		for _, want := range tc.want {
			if !strings.Contains(string(body), want) {
				t.Errorf("case %d: %q not in\n%s", i, want, body)
			}
		}
	}
	if n := len(list(t, c, nil)); n != 100 {
		t.Fatalf("%d entities after the failed batches, want 100", n)
	}
}

func manyInserts(n int) [][3]string {
	var ops [][3]string
	for i := 0; i < n; i++ {
		ops = append(ops, [3]string{"POST", "Orders", fmt.Sprintf(`{"PartitionKey":"p","RowKey":"m%d"}`, i)})
	}
	return ops
}

// batchBody frames operations (verb, resource, body; for DELETE the
// If-Match) as the JavaScript SDK does: lowercase headers, no
// Content-Length, blank lines around parts.
func batchBody(s *server, table string, ops [][3]string) []byte {
	var b strings.Builder
	b.WriteString("--batch_b1\r\ncontent-type: multipart/mixed; boundary=changeset_c1\r\n\r\n\r\n")
	for _, op := range ops {
		b.WriteString("--changeset_c1\r\ncontent-type: application/http\r\ncontent-transfer-encoding: binary\r\n\r\n")
		fmt.Fprintf(&b, "%s %s/%s HTTP/1.1\r\naccept: application/json\r\ncontent-type: application/json\r\n", op[0], s.endpoint, op[1])
		body := op[2]
		switch op[0] {
		case "POST":
			b.WriteString("prefer: return-no-content\r\n")
		case "DELETE":
			if body != "" {
				fmt.Fprintf(&b, "if-match: %s\r\n", body)
			}
			body = ""
		}
		fmt.Fprintf(&b, "\r\n%s\r\n\r\n", body)
	}
	b.WriteString("--changeset_c1--\r\n\r\n--batch_b1--\r\n")
	return []byte(b.String())
}

func TestBatchReplyParts(t *testing.T) {
	s := startServer(t, httpapiDefaults)
	s.table(t, "Orders")
	body := strings.ReplaceAll(string(batchBody(s, "Orders", [][3]string{
		{"POST", "Orders", `{"PartitionKey":"p","RowKey":"a"}`},
		{"PUT", "Orders(PartitionKey='p',RowKey='b')", `{"V":1}`},
	})), "prefer: return-no-content\r\n", "")
	resp, reply := s.raw(t, "POST", "/$batch", []byte(body), map[string]string{"Content-Type": "multipart/mixed; boundary=batch_b1"})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %s", resp.StatusCode, reply)
	}
	got := regexp.MustCompile(`HTTP/1.1 \d+`).FindAllString(string(reply), -1)
	if strings.Join(got, ",") != "HTTP/1.1 201,HTTP/1.1 204" || strings.Count(string(reply), "ETag: W/") != 2 || !strings.Contains(string(reply), `"RowKey":"a"`) {
		t.Fatalf("reply parts %v:\n%s", got, reply)
	}
}
