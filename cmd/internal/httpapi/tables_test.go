package httpapi_test

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

func TestTables(t *testing.T) {
	s := startServer(t, httpapiDefaults)
	ctx := context.Background()
	svc := s.service(t, "")
	names := []string{"Alpha", "beta", "Gamma", "delta1", "Epsilon"}
	for _, n := range names {
		if _, err := svc.CreateTable(ctx, n, nil); err != nil {
			t.Fatalf("create %s: %v", n, err)
		}
	}
	if _, err := svc.CreateTable(ctx, "ALPHA", nil); code(err) != "TableAlreadyExists" || status(err) != http.StatusConflict {
		t.Fatalf("create a table again (other case): %v", err)
	}
	if _, err := svc.CreateTable(ctx, "1bad", nil); code(err) != "InvalidInput" && code(err) != "OutOfRangeInput" {
		t.Fatalf("create a badly named table: %v", err)
	}
	// Paged by $top: every table once, in order.
	var got []string
	pages := 0
	p := svc.NewListTablesPager(&aztables.ListTablesOptions{Top: ptr(int32(2))})
	for p.More() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, tb := range page.Tables {
			got = append(got, *tb.Name)
		}
	}
	want := append([]string(nil), names...)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") || pages != 3 {
		t.Fatalf("tables %v in %d pages, want %v in 3", got, pages, want)
	}
	// Filtered.
	p = svc.NewListTablesPager(&aztables.ListTablesOptions{Filter: ptr("TableName ge 'a' and TableName lt 'c'")})
	page, err := p.NextPage(ctx)
	if err != nil || len(page.Tables) != 1 || *page.Tables[0].Name != "beta" {
		t.Fatalf("filtered list: %v %v", page.Tables, err)
	}
	if _, err := svc.DeleteTable(ctx, "gamma", nil); err != nil {
		t.Fatalf("delete (other case): %v", err)
	}
	s.catalogSettled(t)
	if _, err := svc.DeleteTable(ctx, "Gamma", nil); code(err) != "TableNotFound" || status(err) != http.StatusNotFound {
		t.Fatalf("delete a missing table: %v", err)
	}
	if _, err := svc.NewClient("Gamma").GetEntity(ctx, "p", "r", nil); code(err) != "TableNotFound" {
		t.Fatalf("read from a deleted table: %v", err)
	}
	// Created again: empty.
	if _, err := svc.CreateTable(ctx, "Gamma", nil); err != nil {
		t.Fatal(err)
	}
	// One table by name, and the listing with full metadata.
	resp, body := s.raw(t, "GET", "/Tables('alpha')", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"TableName":"Alpha"`) {
		t.Fatalf("get a table: %d %s", resp.StatusCode, body)
	}
	if resp, _ := s.raw(t, "GET", "/Tables('Nope')", nil, nil); resp.StatusCode != http.StatusNotFound || resp.Header.Get("x-ms-error-code") != "TableNotFound" {
		t.Fatalf("get a missing table: %d", resp.StatusCode)
	}
	resp, body = s.raw(t, "GET", "/Tables?$top=1", nil, map[string]string{"Accept": "application/json;odata=fullmetadata"})
	for _, want := range []string{`"odata.type":"devstoreaccount1.Tables"`, `"odata.editLink":"Tables('Alpha')"`, `"TableName":"Alpha"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("%s not in %s", want, body)
		}
	}
	if next := resp.Header.Get("x-ms-continuation-NextTableName"); next != "Epsilon" {
		t.Errorf("NextTableName %q", next)
	}
	// Not implemented, and unsupported verbs, say so.
	for _, c := range []struct{ method, path, code string }{
		{"GET", "/?restype=service&comp=properties", "NotImplemented"},
		{"PUT", "/Tables", "UnsupportedHttpVerb"},
		{"GET", "/Alpha?comp=acl", "NotImplemented"},
		{"PUT", "/Alpha?comp=acl", "NotImplemented"},
		{"GET", "/Alpha?comp=acl&$format=application/atom%2Bxml", "NotImplemented"}, // asked for XML: still told what is missing
		{"GET", "/Alpha?comp=other", "NotImplemented"},
		{"GET", "/Alpha(PartitionKey='a')", "InvalidUri"},
	} {
		resp, body := s.raw(t, c.method, c.path, nil, nil)
		if resp.Header.Get("x-ms-error-code") != c.code {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, body)
		}
	}
}

func TestAuthentication(t *testing.T) {
	s := startServer(t, httpapiDefaults)
	ctx := context.Background()
	wrong := "QmFkS2V5QmFkS2V5QmFkS2V5QmFkS2V5QmFkS2V5QmFkS2V5QmFkS2V5QmFkS2V5QmFkS2V5QmFkS2V5QmFkS2V5"
	if _, err := s.service(t, wrong).CreateTable(ctx, "Nope", nil); status(err) != http.StatusForbidden || code(err) != "AuthenticationFailed" {
		t.Fatalf("a wrong key: %v", err)
	}
	// SharedKey (the SDK signs SharedKeyLite).
	resp, body := s.raw(t, "POST", "/Tables", []byte(`{"TableName":"Signed"}`), nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("SharedKey create: %d %s", resp.StatusCode, body)
	}
	for _, h := range []map[string]string{
		{"Authorization": ""},
		{"Authorization": "SharedKey " + "devstoreaccount1:AAAA"},
		{"Authorization": "Bearer xyz"},
		{"x-ms-date": "Mon, 02 Jan 2006 15:04:05 GMT"}, // signed, but too old
	} {
		resp, body := s.raw(t, "GET", "/Tables", nil, h)
		if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%v: %d %s", h, resp.StatusCode, body)
		}
		if resp.Header.Get("x-ms-error-code") == "" || !strings.Contains(string(body), "odata.error") {
			t.Fatalf("%v: no Azure error: %s", h, body)
		}
	}
	// The signature covers the path: a request replayed on another path fails.
	resp, _ = s.raw(t, "GET", "/Tables", nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("signed list: %d", resp.StatusCode)
	}
}
