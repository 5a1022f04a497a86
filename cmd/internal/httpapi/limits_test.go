package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
)

// stalledRequest sends a signed POST whose body announces length bytes
// but delivers only first, then nothing: the server must answer without
// the rest. It returns the response and the response body.
func (s *server) stalledRequest(t *testing.T, path string, length int64, first string) (*http.Response, string) {
	t.Helper()
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint+path, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("x-ms-date", time.Now().UTC().Format(http.TimeFormat))
	req.Header.Set("Accept", "application/json;odata=nometadata")
	req.Header.Set("Content-Type", "application/json")
	sign(req)
	go func() { _, _ = pw.Write([]byte(first)) }()
	// A transport of its own: the stalled connection is not reused.
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestSlowBodyRefused: a body that stops arriving is answered with
// OperationTimedOut once BodyTimeout passes, and nothing is stored.
func TestSlowBodyRefused(t *testing.T) {
	s := startServer(t, httpapi.Config{BodyTimeout: 200 * time.Millisecond})
	resp, body := s.stalledRequest(t, "/Tables", 1000, `{"TableName":"Slow`)
	if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("x-ms-error-code") != "OperationTimedOut" {
		t.Fatalf("status %d, code %q: %s", resp.StatusCode, resp.Header.Get("x-ms-error-code"), body)
	}
	if resp, _ := s.raw(t, http.MethodGet, "/Tables('Slow')", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the table exists: %d", resp.StatusCode)
	}
}

// TestAnnouncedBodyTooLarge: a Content-Length over MaxBody is refused at
// once, before any of the body is read or any buffer of that size made.
func TestAnnouncedBodyTooLarge(t *testing.T) {
	s := startServer(t, httpapi.Config{})
	resp, body := s.stalledRequest(t, "/Tables", 1<<30, `{`)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Header.Get("x-ms-error-code") != "RequestBodyTooLarge" {
		t.Fatalf("status %d, code %q: %s", resp.StatusCode, resp.Header.Get("x-ms-error-code"), body)
	}
}

// TestMetricsLabelsOnlyExistingTables: requests naming tables that do not
// exist, or an existing one in another spelling, add no series to
// /metrics; label values stay one series per table.
func TestMetricsLabelsOnlyExistingTables(t *testing.T) {
	s := startServer(t, httpapi.Config{})
	s.table(t, "Present")
	ghost := "Ghost" + strings.Repeat("x", 10000)
	for _, path := range []string{"/Tables('" + ghost + "')", "/" + ghost + "(PartitionKey='a',RowKey='b')", "/Tables('pRESENT')", "/present()"} {
		s.raw(t, http.MethodGet, path, nil, nil)
	}
	m := metrics(t, s.h)
	if strings.Contains(m, "Ghost") || strings.Contains(m, "pRESENT") || strings.Contains(m, `table="present"`) {
		t.Fatalf("/metrics names a table that does not exist or a spelling of one:\n%s", m)
	}
	if !strings.Contains(m, `table="Present"`) {
		t.Fatalf("/metrics does not name the table:\n%s", m)
	}
}

// TestFilterTooLong: a $filter over the limit is a coded 400.
func TestFilterTooLong(t *testing.T) {
	s := startServer(t, httpapi.Config{})
	s.table(t, "Filtered")
	filter := "RowKey eq '" + strings.Repeat("a", 17<<10) + "'"
	resp, body := s.raw(t, http.MethodGet, "/Filtered()?$filter="+url.QueryEscape(filter), nil, nil)
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("x-ms-error-code") != "InvalidInput" || !strings.Contains(string(body), "at most") {
		t.Fatalf("status %d, code %q: %s", resp.StatusCode, resp.Header.Get("x-ms-error-code"), body)
	}
}
