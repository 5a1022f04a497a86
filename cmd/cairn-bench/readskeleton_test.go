package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
)

// The point read's protocol skeleton must do the protocol's work, not
// answer anything: a read signed as the benchmark's client signs is
// accepted and its keys read; a tampered, stale or other scheme's
// signature is refused.
func TestReadSkeletonChecks(t *testing.T) {
	key, _ := base64.StdEncoding.DecodeString(httpapi.DevAccountKey)
	macs := &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}
	path := "/" + httpapi.DevAccountName + "/Floor(PartitionKey='p0000001',RowKey='r0000002')"
	signed := func(date time.Time, scheme, tamper string) *http.Request {
		r := httptest.NewRequest("GET", path, nil)
		d := date.UTC().Format(http.TimeFormat)
		r.Header.Set("x-ms-date", d)
		m := hmac.New(sha256.New, key)
		m.Write([]byte(d + "\n/" + httpapi.DevAccountName + path + tamper))
		r.Header.Set("Authorization", scheme+" "+httpapi.DevAccountName+":"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
		return r
	}
	if !signedLite(signed(time.Now(), "SharedKeyLite", ""), macs) {
		t.Fatal("a well-signed read was refused")
	}
	for name, r := range map[string]*http.Request{
		"tampered":   signed(time.Now(), "SharedKeyLite", "x"),
		"stale":      signed(time.Now().Add(-20*time.Minute), "SharedKeyLite", ""),
		"SharedKey":  signed(time.Now(), "SharedKey", ""),
		"not signed": httptest.NewRequest("GET", path, nil),
	} {
		if signedLite(r, macs) {
			t.Errorf("%s: accepted", name)
		}
	}
	pk, rk, ok := pathKeys("/a/Floor(PartitionKey='p0000001',RowKey='r0000002')")
	if !ok || pk != "p0000001" || rk != "r0000002" {
		t.Errorf("pathKeys: %q %q %v", pk, rk, ok)
	}
	if _, _, ok := pathKeys("/a/Floor()"); ok {
		t.Error("pathKeys read keys from a path without any")
	}
}
