package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
)

// readSkeletonChild is the HTTP benchmark's point read with the Tables
// protocol's own work and no Cairn code: net/http, each GET's SharedKeyLite
// signature checked (its date within 15 minutes, an HMAC-SHA256 keyed with
// the development account's key, the keyed hashes pooled as a host pools
// them), the keys read from the path, and the entity's stored JSON found in
// a Go map of the point-read workload's n rows and written with a Tables
// answer's headers. What it leaves out is what a table store adds: an
// ordered index, snapshots, routing, the JSON made from stored properties.
func readSkeletonChild(n int) error {
	stored := make(map[string][]byte, n)
	for _, r := range makeRows(n, byBatch) {
		stored[r.pk+"\x00"+r.rk] = r.body
	}
	key, err := base64.StdEncoding.DecodeString(httpapi.DevAccountKey)
	if err != nil {
		return err
	}
	macs := sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	return serveFloor(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !signedLite(r, &macs) {
			http.Error(w, "the signature does not match", http.StatusForbidden)
			return
		}
		pk, rk, ok := pathKeys(r.URL.Path)
		body := stored[pk+"\x00"+rk]
		if !ok || body == nil {
			http.Error(w, "no such entity", http.StatusNotFound)
			return
		}
		floorHeaders(w)
		w.Header()["Content-Type"] = []string{"application/json;odata=nometadata;streaming=true;charset=utf-8"}
		_, _ = w.Write(body)
	}))
}

// signedLite reports whether r carries a SharedKeyLite signature of the
// development account over its date and resource, dated within 15 minutes.
func signedLite(r *http.Request, macs *sync.Pool) bool {
	cred, ok := strings.CutPrefix(r.Header.Get("Authorization"), "SharedKeyLite "+httpapi.DevAccountName+":")
	if !ok {
		return false
	}
	got, err := base64.StdEncoding.DecodeString(cred)
	if err != nil {
		return false
	}
	date := r.Header.Get("x-ms-date")
	when, err := http.ParseTime(date)
	if err != nil || time.Since(when).Abs() > 15*time.Minute {
		return false
	}
	resource, _, _ := strings.Cut(r.RequestURI, "?")
	m := macs.Get().(hash.Hash)
	defer macs.Put(m)
	m.Reset()
	m.Write([]byte(date + "\n/" + httpapi.DevAccountName + resource))
	var sum [sha256.Size]byte
	return hmac.Equal(m.Sum(sum[:0]), got)
}

// pathKeys reads the keys of a decoded path ending in
// "(PartitionKey='…',RowKey='…')", whose keys hold no quote.
func pathKeys(path string) (pk, rk string, ok bool) {
	_, rest, ok := strings.Cut(path, "(PartitionKey='")
	if !ok {
		return "", "", false
	}
	pk, rest, ok = strings.Cut(rest, "',RowKey='")
	if !ok {
		return "", "", false
	}
	rk, ok = strings.CutSuffix(rest, "')")
	return pk, rk, ok
}
