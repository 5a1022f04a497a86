package demo

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"time"
)

// apiVersion is the Tables API version the signed requests name, the
// one the Azure SDK sends.
const apiVersion = "2019-02-02"

// Sign signs req with the account's key, as the Azure SDK signs its own
// requests but for a request the SDK has no call for (a large value's
// upload or download, docs/VALUES.md): SharedKey over the method, the
// Content-Type, the date and the canonical resource, "/<account><path>"
// with the path as sent (which holds the account's name again on a
// host that serves several accounts at one address). It sets x-ms-date
// and x-ms-version; req must not change after it.
func (a Account) Sign(req *http.Request) error {
	key, err := base64.StdEncoding.DecodeString(a.Key)
	if err != nil {
		return fmt.Errorf("connection string: AccountKey is not base64: %w", err)
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	req.Header.Set("x-ms-date", date)
	req.Header.Set("x-ms-version", apiVersion)
	resource := "/" + a.Name + req.URL.EscapedPath()
	if comp := req.URL.Query().Get("comp"); comp != "" {
		resource += "?comp=" + comp
	}
	toSign := req.Method + "\n" + req.Header.Get("Content-MD5") + "\n" + req.Header.Get("Content-Type") + "\n" + date + "\n" + resource
	m := hmac.New(sha256.New, key)
	m.Write([]byte(toSign))
	req.Header.Set("Authorization", "SharedKey "+a.Name+":"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	return nil
}
