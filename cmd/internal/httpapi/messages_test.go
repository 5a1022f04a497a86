package httpapi_test

import (
	"context"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
)

// startOutboxServer starts a node that allows messages to orders.> and
// billing.*.created besides Cairn queues.
func startOutboxServer(t *testing.T) *server {
	t.Helper()
	h, _ := nodetest.Start(t, node.Config{OutboxSubjects: []string{"orders.>", "billing.*.created"}})
	return &server{h: h, endpoint: h.HTTPURL() + "/" + httpapi.DevAccountName}
}

// TestMessagesHeader: X-Cairn-Messages puts a write's outbox messages,
// to queues and to allowed subjects, into the journal record of that write
// on every write route; a $batch's go into its one record.
func TestMessagesHeader(t *testing.T) {
	s := startOutboxServer(t)
	s.table(t, "Outbox")
	header := func(msgs string) map[string]string { return map[string]string{httpapi.MessagesHeader: msgs} }
	at := "/Outbox(PartitionKey='p',RowKey='r')"
	steps := []struct {
		name, method, path, body, header string
		want                             []engine.Message
		status                           int
	}{
		{"insert", "POST", "/Outbox", `{"PartitionKey":"p","RowKey":"r","N":1}`,
			`[{"queue":"archive","id":"m1","body":"hello"},{"subject":"orders.created","bodyBase64":"AP8="}]`,
			[]engine.Message{{Queue: "archive", ID: "m1", Body: []byte("hello")}, {Subject: "orders.created", Body: []byte{0, 0xff}}}, http.StatusCreated},
		{"upsert (PUT)", "PUT", at, `{"N":2}`, `[{"subject":"billing.eu.created","body":"{\"n\":2}"}]`,
			[]engine.Message{{Subject: "billing.eu.created", Body: []byte(`{"n":2}`)}}, http.StatusNoContent},
		{"merge", "MERGE", at, `{"M":3}`, `[{"subject":"orders.eu.updated","id":"u-3"}]`,
			[]engine.Message{{Subject: "orders.eu.updated", ID: "u-3"}}, http.StatusNoContent},
		{"a write without the header", "PATCH", at, `{"M":4}`, "", nil, http.StatusNoContent},
		{"delete", "DELETE", at, "", `[{"queue":"archive","body":"gone"}]`,
			[]engine.Message{{Queue: "archive", Body: []byte("gone")}}, http.StatusNoContent},
	}
	for i, st := range steps {
		h := map[string]string{}
		if st.header != "" {
			h = header(st.header)
		}
		if st.method == "DELETE" {
			h["If-Match"] = "*"
		}
		var body []byte
		if st.body != "" {
			body = []byte(st.body)
		}
		resp, b := s.raw(t, st.method, st.path, body, h)
		if resp.StatusCode != st.status || resp.Header.Get(httpapi.PositionHeader) != strconv.Itoa(i+1) {
			t.Fatalf("%s: %d at %q, want %d at %d: %s", st.name, resp.StatusCode, resp.Header.Get(httpapi.PositionHeader), st.status, i+1, b)
		}
	}
	// $batch: the header goes on the batch request itself.
	resp, b := s.raw(t, "POST", "/$batch", batchBody(s, "Outbox", [][3]string{
		{"POST", "Outbox", `{"PartitionKey":"b","RowKey":"1"}`},
		{"PUT", "Outbox(PartitionKey='b',RowKey='2')", `{"V":1}`},
	}), map[string]string{"Content-Type": "multipart/mixed; boundary=batch_b1",
		httpapi.MessagesHeader: `[{"subject":"orders.batched","body":"two"},{"queue":"archive","body":"two"}]`})
	if resp.StatusCode != http.StatusAccepted || strings.Contains(string(b), "HTTP/1.1 4") {
		t.Fatalf("batch: %d %s", resp.StatusCode, b)
	}

	recs := nodetest.Records(t, s.h, "Outbox")
	if len(recs) != len(steps)+1 {
		t.Fatalf("%d records, want %d", len(recs), len(steps)+1)
	}
	for i, st := range steps {
		if !reflect.DeepEqual(recs[i].Messages, st.want) {
			t.Errorf("%s: record %d has messages %+v, want %+v", st.name, i+1, recs[i].Messages, st.want)
		}
	}
	last := recs[len(steps)]
	want := []engine.Message{{Subject: "orders.batched", Body: []byte("two")}, {Queue: "archive", Body: []byte("two")}}
	if len(last.Events) != 2 || !reflect.DeepEqual(last.Messages, want) {
		t.Errorf("batch record: %d events, messages %+v", len(last.Events), last.Messages)
	}
}

// TestMessagesHeaderGoSDK: the Go SDK sends the header on one call with
// policy.WithHTTPHeader, on single writes and transactions alike.
func TestMessagesHeaderGoSDK(t *testing.T) {
	s := startOutboxServer(t)
	c := s.table(t, "Sdk")
	ctx := policy.WithHTTPHeader(context.Background(), http.Header{
		httpapi.MessagesHeader: {`[{"subject":"orders.created","body":"{\"id\":1}"}]`},
	})
	if _, err := c.AddEntity(ctx, entity("p", "1", nil), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SubmitTransaction(ctx, []aztables.TransactionAction{
		{ActionType: aztables.TransactionTypeAdd, Entity: entity("p", "2", nil)},
		{ActionType: aztables.TransactionTypeAdd, Entity: entity("p", "3", nil)},
	}, nil); err != nil {
		t.Fatal(err)
	}
	// Without it, nothing changes.
	if _, err := c.AddEntity(context.Background(), entity("p", "4", nil), nil); err != nil {
		t.Fatal(err)
	}
	want := []engine.Message{{Subject: "orders.created", Body: []byte(`{"id":1}`)}}
	recs := nodetest.Records(t, s.h, "Sdk")
	if len(recs) != 3 || !reflect.DeepEqual(recs[0].Messages, want) || !reflect.DeepEqual(recs[1].Messages, want) || len(recs[1].Events) != 2 || recs[2].Messages != nil {
		t.Fatalf("records: %+v", recs)
	}
}

// TestMessagesHeaderRefused: a header the node cannot take refuses the
// write with its code, and nothing is stored: the first good write
// afterwards is the table's first journal record.
func TestMessagesHeaderRefused(t *testing.T) {
	s := startOutboxServer(t)
	s.table(t, "Refused")
	at := "/Refused(PartitionKey='p',RowKey='r')"
	big := `[{"subject":"orders.big","body":"` + strings.Repeat("x", httpapi.MaxMessagesHeader) + `"}]`
	many := "[" + strings.TrimSuffix(strings.Repeat(`{"queue":"archive"},`, engine.MaxCommandMessages+1), ",") + "]"
	cases := []struct {
		name, header, code string
		status             int
	}{
		{"a bad subject", `[{"subject":"orders..created"}]`, "InvalidInput", 400},
		{"the JetStream API", `[{"subject":"$JS.API.STREAM.DELETE.CAIRN_QUEUES"}]`, "InvalidInput", 400},
		{"an inbox", `[{"subject":"_INBOX.x"}]`, "InvalidInput", 400},
		{"a wildcard", `[{"subject":"orders.*"}]`, "InvalidInput", 400},
		{"outside the allowlist", `[{"subject":"shipping.created"}]`, "InvalidInput", 400},
		{"the node's own prefix", `[{"subject":"cairn.j.Refused.1.kcA"}]`, "InvalidInput", 400},
		{"queue and subject", `[{"queue":"archive","subject":"orders.created"}]`, "InvalidInput", 400},
		{"no destination", `[{"id":"m","body":"x"}]`, "InvalidInput", 400},
		{"a bad queue", `[{"queue":"a.b"}]`, "InvalidInput", 400},
		{"malformed JSON", `[{"subject":"orders.created"`, "InvalidInput", 400},
		{"not an array", `{"subject":"orders.created"}`, "InvalidInput", 400},
		{"an unknown field", `[{"subject":"orders.created","topic":"x"}]`, "InvalidInput", 400},
		{"too large", big, "RequestHeaderFieldsTooLarge", 431},
		{"more messages than a command carries", many, "InvalidInput", 400},
	}
	for _, tc := range cases {
		for _, w := range []struct{ method, path, body string }{
			{"POST", "/Refused", `{"PartitionKey":"p","RowKey":"r"}`},
			{"PUT", at, `{"A":1}`},
			{"MERGE", at, `{"A":1}`},
			{"DELETE", at, ""},
		} {
			h := map[string]string{httpapi.MessagesHeader: tc.header, "If-Match": "*"}
			if w.method != "DELETE" {
				delete(h, "If-Match")
			}
			resp, body := s.raw(t, w.method, w.path, []byte(w.body), h)
			if got := resp.Header.Get("x-ms-error-code"); resp.StatusCode != tc.status || got != tc.code {
				t.Errorf("%s, %s: %d %s, want %d %s: %s", tc.name, w.method, resp.StatusCode, got, tc.status, tc.code, body)
			}
		}
		resp, body := s.raw(t, "POST", "/$batch", batchBody(s, "Refused", [][3]string{{"POST", "Refused", `{"PartitionKey":"p","RowKey":"b"}`}}),
			map[string]string{"Content-Type": "multipart/mixed; boundary=batch_b1", httpapi.MessagesHeader: tc.header})
		if got := resp.Header.Get("x-ms-error-code"); resp.StatusCode != tc.status || got != tc.code {
			t.Errorf("%s, $batch: %d %s, want %d %s: %s", tc.name, resp.StatusCode, got, tc.status, tc.code, body)
		}
	}
	// The header twice, and on requests that are not writes.
	req, err := http.NewRequest("POST", s.endpoint+"/Refused", strings.NewReader(`{"PartitionKey":"p","RowKey":"r"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-ms-date", time.Now().UTC().Format(http.TimeFormat))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add(httpapi.MessagesHeader, `[{"queue":"archive"}]`)
	req.Header.Add(httpapi.MessagesHeader, `[{"queue":"archive"}]`)
	sign(req)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("the header twice: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	ok := map[string]string{httpapi.MessagesHeader: `[{"queue":"archive"}]`}
	for _, r := range []struct{ method, path string }{
		{"GET", "/Refused()"},
		{"GET", at},
		{"POST", "/Tables"},
		{"GET", "/Tables"},
		{"DELETE", "/Tables('Refused')"},
	} {
		body := []byte(nil)
		if r.path == "/Tables" && r.method == "POST" {
			body = []byte(`{"TableName":"Other"}`)
		}
		resp, b := s.raw(t, r.method, r.path, body, ok)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), httpapi.MessagesHeader) {
			t.Errorf("%s %s with the header: %d %s", r.method, r.path, resp.StatusCode, b)
		}
	}
	if _, ok := s.h.Views().Table("Other"); ok {
		t.Error("a table was created by a request the header refused")
	}
	// A shared access signature grants table rights, not messages.
	cred, err := aztables.NewSharedKeyCredential(httpapi.DevAccountName, httpapi.DevAccountKey)
	if err != nil {
		t.Fatal(err)
	}
	sas, err := aztables.SASSignatureValues{TableName: "Refused", Permissions: "raud", ExpiryTime: time.Now().Add(time.Hour)}.Sign(cred)
	if err != nil {
		t.Fatal(err)
	}
	resp, b := s.raw(t, "POST", "/Refused?"+sas, []byte(`{"PartitionKey":"p","RowKey":"r"}`), map[string]string{httpapi.MessagesHeader: `[{"queue":"archive"}]`, "Authorization": ""})
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("x-ms-error-code") != "AuthorizationPermissionMismatch" {
		t.Errorf("with a SAS: %d %s", resp.StatusCode, b)
	}

	// On a part of a $batch the header would be dropped: the batch fails.
	part := strings.ReplaceAll(string(batchBody(s, "Refused", [][3]string{{"POST", "Refused", `{"PartitionKey":"p","RowKey":"b"}`}})),
		"prefer: return-no-content\r\n", "prefer: return-no-content\r\nx-cairn-messages: [{\"queue\":\"archive\"}]\r\n")
	resp, b = s.raw(t, "POST", "/$batch", []byte(part), map[string]string{"Content-Type": "multipart/mixed; boundary=batch_b1"})
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(b), "InvalidInput") || !strings.Contains(string(b), httpapi.MessagesHeader) {
		t.Errorf("the header on a part of a $batch: %d %s", resp.StatusCode, b)
	}

	// Nothing reached the journal: the next write is its first record.
	resp, b = s.raw(t, "POST", "/Refused", []byte(`{"PartitionKey":"p","RowKey":"r"}`), map[string]string{httpapi.MessagesHeader: `[{"subject":"orders.created"}]`})
	if resp.StatusCode != http.StatusCreated || resp.Header.Get(httpapi.PositionHeader) != "1" {
		t.Fatalf("first good write: %d at %q: %s", resp.StatusCode, resp.Header.Get(httpapi.PositionHeader), b)
	}
	if recs := nodetest.Records(t, s.h, "Refused"); len(recs) != 1 || len(recs[0].Messages) != 1 || recs[0].Messages[0].Subject != "orders.created" {
		t.Fatalf("records: %+v", recs)
	}
}

// TestMessagesHeaderDefault: a node without -outbox-subjects takes
// messages to Cairn queues only.
func TestMessagesHeaderDefault(t *testing.T) {
	s := startServer(t, httpapiDefaults)
	s.table(t, "Plain")
	resp, b := s.raw(t, "POST", "/Plain", []byte(`{"PartitionKey":"p","RowKey":"1"}`), map[string]string{httpapi.MessagesHeader: `[{"subject":"orders.created"}]`})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "-outbox-subjects") {
		t.Fatalf("a subject on a node that allows none: %d %s", resp.StatusCode, b)
	}
	resp, b = s.raw(t, "POST", "/Plain", []byte(`{"PartitionKey":"p","RowKey":"1"}`), map[string]string{httpapi.MessagesHeader: `[{"queue":"archive","body":"x"}]`})
	if resp.StatusCode != http.StatusCreated || resp.Header.Get(httpapi.PositionHeader) != "1" {
		t.Fatalf("a queue: %d %s", resp.StatusCode, b)
	}
}
