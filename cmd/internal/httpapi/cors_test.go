package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/cmd/internal/cors"
	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
)

// preflight sends a browser's CORS preflight for a signed POST.
func preflight(t *testing.T, url, origin string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("OPTIONS", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,x-ms-date")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func accessControl(h http.Header) []string {
	var names []string
	for k := range h {
		if strings.HasPrefix(k, "Access-Control-") {
			names = append(names, k)
		}
	}
	return names
}

// TestCORSOff: without -cors-origins no preflight is answered, no
// Access-Control-* header is sent, and a simple cross-origin write (a SAS
// in the query string, signed with the public development key, as any web
// page could make it) is refused with nothing written; the SDK, which
// sends no Origin, is served as before.
func TestCORSOff(t *testing.T) {
	s := startServer(t, httpapiDefaults)
	c := s.table(t, "Guarded")
	resp := preflight(t, s.endpoint+"/Guarded", "https://evil.example")
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("x-ms-error-code") != "CorsPreflightFailure" || len(accessControl(resp.Header)) > 0 {
		t.Fatalf("preflight without CORS: %d %v", resp.StatusCode, resp.Header)
	}
	sas, err := aztables.SASSignatureValues{TableName: "Guarded", Permissions: "a", ExpiryTime: time.Now().Add(time.Hour)}.Sign(credential(t))
	if err != nil {
		t.Fatal(err)
	}
	// What a <form method=post enctype=text/plain> sends: a simple request.
	req, err := http.NewRequest("POST", s.endpoint+"/Guarded?"+sas, bytes.NewReader(entity("web", "1", nil)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Origin", "https://evil.example")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("x-ms-error-code") != "OriginNotAllowed" || len(accessControl(resp.Header)) > 0 {
		t.Fatalf("simple cross-origin insert: %d %v", resp.StatusCode, resp.Header)
	}
	if got := list(t, c, nil); len(got) != 0 {
		t.Fatalf("the refused cross-origin insert wrote %d entities", len(got))
	}
	// The same request without Origin (a program, not a page) is served:
	// the origin is what refused it.
	req, err = http.NewRequest("POST", s.endpoint+"/Guarded?"+sas, bytes.NewReader(entity("sdk", "1", nil)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || len(accessControl(resp.Header)) > 0 {
		t.Fatalf("insert without Origin: %d %v", resp.StatusCode, resp.Header)
	}
	if _, err := c.GetEntity(context.Background(), "sdk", "1", nil); err != nil {
		t.Fatal(err)
	}
}

// TestCORSOrigins: with -cors-origins the preflight answers the configured
// origins only, naming them (never echoing another), and their requests
// carry Access-Control-Allow-Origin; "*" is answered as "*".
func TestCORSOrigins(t *testing.T) {
	origins, err := cors.Parse([]string{"https://app.example"})
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, httpapi.Config{CORS: origins})
	s.table(t, "Shared")
	resp := preflight(t, s.endpoint+"/Shared", "https://app.example")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") || resp.Header.Get("Access-Control-Allow-Headers") == "" {
		t.Fatalf("preflight from a configured origin: %d %v", resp.StatusCode, resp.Header)
	}
	resp = preflight(t, s.endpoint+"/Shared", "https://evil.example")
	if resp.StatusCode != http.StatusForbidden || len(accessControl(resp.Header)) > 0 {
		t.Fatalf("preflight from another origin: %d %v", resp.StatusCode, resp.Header)
	}
	resp, body := s.raw(t, "POST", "/Shared", entity("app", "1", nil), map[string]string{"Origin": "https://app.example"})
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("insert from a configured origin: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, _ = s.raw(t, "POST", "/Shared", entity("evil", "1", nil), map[string]string{"Origin": "https://evil.example"})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("signed insert from another origin: %d", resp.StatusCode)
	}

	any, err := cors.Parse([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	w := startServer(t, httpapi.Config{CORS: any})
	resp = preflight(t, w.endpoint+"/Tables", "https://anywhere.example")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("preflight with *: %d %v", resp.StatusCode, resp.Header)
	}
}
