package node_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"maps"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/admin"
)

// sharedKey signs a request to path (as sent) for account with key
// (base64), as a Tables API client signs: SharedKey over the method, the
// content type, the date and "/<account><path>", or SharedKeyLite over
// the date and the resource.
func sharedKey(scheme, account, key, method, path, contentType string, date time.Time) map[string]string {
	d := date.UTC().Format(http.TimeFormat)
	k, _ := base64.StdEncoding.DecodeString(key)
	m := hmac.New(sha256.New, k)
	resource := "/" + account + strings.SplitN(path, "?", 2)[0]
	if scheme == "SharedKeyLite" {
		m.Write([]byte(d + "\n" + resource))
	} else {
		m.Write([]byte(method + "\n\n" + contentType + "\n" + d + "\n" + resource))
	}
	h := map[string]string{"x-ms-date": d, "Authorization": scheme + " " + account + ":" + base64.StdEncoding.EncodeToString(m.Sum(nil))}
	if contentType != "" {
		h["Content-Type"] = contentType
	}
	return h
}

// TestHTTPTriggerAccountAuth: a route whose auth is "account" takes a
// request signed with its account's key (SharedKey, SharedKeyLite) or an
// account SAS granting the method, and the function sees the caller
// but neither the signature nor the SAS; every other credential is
// refused, coded, and the function does not run: none, a wrong or stale
// signature, another account's, a function key, a table's SAS, an SAS
// without the method's permission or entities, an expired one.
func TestHTTPTriggerAccountAuth(t *testing.T) {
	contoso, err := httpapi.ParseAccount("contoso:" + contosoKey)
	if err != nil {
		t.Fatal(err)
	}
	th := startNode(t, node.Config{API: httpapi.Config{Accounts: []httpapi.Account{contoso}}})
	fr := th.h.Functions()
	var invocations atomic.Int32
	var seen atomic.Pointer[[4]string] // caller, query, Authorization header, trigger id
	m := functions.Manifest{Name: "report", Trigger: functions.Trigger{HTTP: &functions.HTTPTrigger{
		Account: "contoso",
		Routes: []functions.Route{
			{Method: "GET", Path: "/sales/{day}", Auth: functions.AuthAccount},
			{Method: "POST", Path: "/sales/{day}", Auth: functions.AuthAccount},
		}}}}
	if err := fr.Register(m, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		invocations.Add(1)
		req := inv.Trigger().HTTP
		auth := ""
		for k, v := range req.Header {
			if strings.EqualFold(k, "Authorization") {
				auth = strings.Join(v, ",")
			}
		}
		seen.Store(&[4]string{req.Caller, req.Query, auth, inv.Trigger().ID})
		return inv.SetOutput([]byte("day " + req.Params["day"]))
	})); err != nil {
		t.Fatal(err)
	}
	base := th.h.HTTPURL()
	ok := func(what, method, path string, header map[string]string, caller, query string) {
		t.Helper()
		st, _, body := fnCall(t, base, method, path, header, "")
		if st != http.StatusOK || body != "day 7" {
			t.Fatalf("%s: %d %s", what, st, body)
		}
		s := seen.Load()
		if s[0] != caller || s[1] != query || s[2] != "" {
			t.Fatalf("%s: the function saw caller %q, query %q, Authorization %q", what, s[0], s[1], s[2])
		}
	}
	now := time.Now()
	ok("SharedKey", "GET", "/fn/report/sales/7?x=1", sharedKey("SharedKey", "contoso", contosoKey, "GET", "/fn/report/sales/7", "", now), "account:contoso", "x=1")
	ok("SharedKeyLite", "POST", "/fn/report/sales/7", sharedKey("SharedKeyLite", "contoso", contosoKey, "POST", "/fn/report/sales/7", "", now), "account:contoso", "")
	ok("SharedKey with a content type", "POST", "/fn/report/sales/7", sharedKey("SharedKey", "contoso", contosoKey, "POST", "/fn/report/sales/7", "application/json", now), "account:contoso", "")

	cred, err := aztables.NewSharedKeyCredential("contoso", contosoKey)
	if err != nil {
		t.Fatal(err)
	}
	accountSAS := func(perms aztables.AccountSASPermissions, rt aztables.AccountSASResourceTypes, expiry time.Time) string {
		t.Helper()
		q, err := aztables.AccountSASSignatureValues{Protocol: aztables.SASProtocolHTTPSandHTTP, ExpiryTime: expiry,
			Permissions: perms.String(), Services: "t", ResourceTypes: rt.String()}.Sign(cred)
		if err != nil {
			t.Fatal(err)
		}
		return q.Encode()
	}
	hour := now.Add(time.Hour)
	objects := aztables.AccountSASResourceTypes{Object: true}
	readSAS := accountSAS(aztables.AccountSASPermissions{Read: true}, objects, hour)
	ok("an account SAS granting reads", "GET", "/fn/report/sales/7?x=1&"+readSAS, nil, "sas:contoso", "x=1")
	ok("an account SAS granting adds", "POST", "/fn/report/sales/7?"+accountSAS(aztables.AccountSASPermissions{Add: true}, objects, hour)+"&y=2", nil, "sas:contoso", "y=2")

	// An Idempotency-Key is scoped to the caller: the key's holder, or
	// one shared access signature, never another's.
	idOf := func(header map[string]string, query string) string {
		t.Helper()
		h := map[string]string{"Idempotency-Key": "same"}
		maps.Copy(h, header)
		if st, _, body := fnCall(t, base, "GET", "/fn/report/sales/7?"+query, h, ""); st != http.StatusOK {
			t.Fatalf("a call with an Idempotency-Key: %d %s", st, body)
		}
		return seen.Load()[3]
	}
	signedID := idOf(sharedKey("SharedKeyLite", "contoso", contosoKey, "GET", "/fn/report/sales/7", "", now), "")
	sasID := idOf(nil, readSAS)
	otherSASID := idOf(nil, accountSAS(aztables.AccountSASPermissions{Read: true, List: true}, objects, hour))
	if signedID == sasID || sasID == otherSASID || sasID != idOf(nil, readSAS) || signedID != idOf(sharedKey("SharedKey", "contoso", contosoKey, "GET", "/fn/report/sales/7", "", now), "") {
		t.Fatalf("trigger ids of one Idempotency-Key: key %s, an SAS %s, another SAS %s", signedID, sasID, otherSASID)
	}

	tableSAS, err := aztables.SASSignatureValues{Protocol: aztables.SASProtocolHTTPSandHTTP, ExpiryTime: hour, TableName: "Sales",
		Permissions: aztables.SASPermissions{Read: true, Add: true}.String()}.Sign(cred)
	if err != nil {
		t.Fatal(err)
	}
	devKey := sharedKey("SharedKey", httpapi.DevAccountName, httpapi.DevAccountKey, "GET", "/fn/report/sales/7", "", now)
	wrongKey := sharedKey("SharedKey", "contoso", httpapi.DevAccountKey, "GET", "/fn/report/sales/7", "", now)
	stale := sharedKey("SharedKey", "contoso", contosoKey, "GET", "/fn/report/sales/7", "", now.Add(-20*time.Minute))
	otherPath := sharedKey("SharedKey", "contoso", contosoKey, "GET", "/fn/report/sales/8", "", now)
	_, keyText := newFunctionKey(t, th, "report", "k")
	before := invocations.Load()
	for _, c := range []struct {
		name, method, path string
		header             map[string]string
		status             int
		code               string
	}{
		{"nothing", "GET", "/fn/report/sales/7", nil, 401, "AuthenticationFailed"},
		{"a function key", "GET", "/fn/report/sales/7", map[string]string{functions.KeyHeader: keyText}, 401, "AuthenticationFailed"},
		{"another account's signature", "GET", "/fn/report/sales/7", devKey, 401, "AuthenticationFailed"},
		{"a signature with another key", "GET", "/fn/report/sales/7", wrongKey, 401, "AuthenticationFailed"},
		{"a signature 20 minutes old", "GET", "/fn/report/sales/7", stale, 401, "AuthenticationFailed"},
		{"a signature of another path", "GET", "/fn/report/sales/7", otherPath, 401, "AuthenticationFailed"},
		{"a malformed Authorization", "GET", "/fn/report/sales/7", map[string]string{"Authorization": "Bearer x"}, 401, "InvalidAuthenticationInfo"},
		{"an SAS granting reads, for a POST", "POST", "/fn/report/sales/7?" + readSAS, nil, 403, "AuthorizationPermissionMismatch"},
		{"an SAS of tables, not entities", "GET", "/fn/report/sales/7?" + accountSAS(aztables.AccountSASPermissions{Read: true}, aztables.AccountSASResourceTypes{Container: true}, hour), nil, 403, "AuthorizationFailure"},
		{"a table's SAS", "GET", "/fn/report/sales/7?" + tableSAS, nil, 403, "AuthorizationFailure"},
		{"an expired SAS", "GET", "/fn/report/sales/7?" + accountSAS(aztables.AccountSASPermissions{Read: true}, objects, now.Add(-time.Minute)), nil, 401, "AuthenticationFailed"},
		{"an SAS tampered with", "GET", "/fn/report/sales/7?" + strings.Replace(readSAS, "sp=r", "sp=rwd", 1), nil, 401, "AuthenticationFailed"},
	} {
		st, _, body := fnCall(t, base, c.method, c.path, c.header, "")
		if st != c.status || nodetest.ErrorCode(body) != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, st, body, c.status, c.code)
		}
	}
	if n := invocations.Load() - before; n != 0 {
		t.Fatalf("refused calls ran the function %d times", n)
	}
}

// TestFunctionKeyInForceWhenAnswered: the operators' API answers a key's
// creation or revocation once the node that took it checks calls
// against the change, so a call right after the answer is taken with a
// new key and refused with a revoked one, every time.
func TestFunctionKeyInForceWhenAnswered(t *testing.T) {
	th := startNode(t, node.Config{})
	m := functions.Manifest{Name: "ping", Trigger: functions.Trigger{HTTP: &functions.HTTPTrigger{
		RatePerKey: functions.MaxRate, Routes: []functions.Route{{Method: "GET", Path: "/"}}}}}
	if err := th.h.Functions().Register(m, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		return inv.SetOutput([]byte("pong"))
	})); err != nil {
		t.Fatal(err)
	}
	base := th.h.HTTPURL()
	for i := range 20 {
		id, key := newFunctionKey(t, th, "ping", "k")
		if st, _, body := fnCall(t, base, "GET", "/fn/ping/", map[string]string{functions.KeyHeader: key}, ""); st != http.StatusOK {
			t.Fatalf("round %d: a call right after the key's creation: %d %s", i, st, body)
		}
		resp := operatorDo(t, th.h.OperatorToken(), "DELETE", base+admin.Prefix+"functions/ping/keys/"+id, nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("round %d: revoke: %d", i, resp.StatusCode)
		}
		if st, _, body := fnCall(t, base, "GET", "/fn/ping/", map[string]string{functions.KeyHeader: key}, ""); st != http.StatusUnauthorized {
			t.Fatalf("round %d: a call right after the key's revocation: %d %s", i, st, body)
		}
	}
}
