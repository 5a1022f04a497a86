package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
)

// sasClient returns an SDK client for table authorised only by sas.
func (s *server) sasClient(t *testing.T, table, sas string) *aztables.Client {
	t.Helper()
	c, err := aztables.NewClientWithNoCredential(s.endpoint+"/"+table+"?"+sas, s.clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func credential(t *testing.T) *aztables.SharedKeyCredential {
	cred, err := aztables.NewSharedKeyCredential(httpapi.DevAccountName, httpapi.DevAccountKey)
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// TestServiceSAS: a table's shared access signature grants its permissions
// on its table and key range, until it expires.
func TestServiceSAS(t *testing.T) {
	s := startServer(t, httpapiDefaults)
	ctx := context.Background()
	c := s.table(t, "Staff")
	for _, pk := range []string{"HR", "Sales", "Tech"} {
		for _, rk := range []string{"1", "2"} {
			if _, err := c.AddEntity(ctx, entity(pk, rk, nil), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	sign := func(v aztables.SASSignatureValues) string {
		v.TableName = "Staff"
		if v.ExpiryTime.IsZero() {
			v.ExpiryTime = time.Now().Add(time.Hour)
		}
		q, err := v.Sign(credential(t))
		if err != nil {
			t.Fatal(err)
		}
		// The SDK signs the key range but leaves it out of the query.
		vals := url.Values{}
		for k, x := range map[string]string{"spk": v.StartPartitionKey, "srk": v.StartRowKey, "epk": v.EndPartitionKey, "erk": v.EndRowKey} {
			if x != "" {
				vals.Set(k, x)
			}
		}
		if len(vals) > 0 {
			q += "&" + vals.Encode()
		}
		return q
	}
	// Read-only, Sales only.
	ro := s.sasClient(t, "Staff", sign(aztables.SASSignatureValues{Permissions: "r", StartPartitionKey: "Sales", EndPartitionKey: "Sales"}))
	if got := keysOf(list(t, ro, nil)); strings.Join(got, ",") != "Sales/1,Sales/2" {
		t.Fatalf("a SAS for Sales lists %v", got)
	}
	if _, err := ro.GetEntity(ctx, "Sales", "1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ro.GetEntity(ctx, "HR", "1", nil); status(err) != http.StatusForbidden {
		t.Fatalf("read outside the key range: %v", err)
	}
	if _, err := ro.AddEntity(ctx, entity("Sales", "3", nil), nil); code(err) != "AuthorizationPermissionMismatch" {
		t.Fatalf("insert with a read-only SAS: %v", err)
	}
	// Add and update, a key range ending inside a partition.
	rw := s.sasClient(t, "Staff", sign(aztables.SASSignatureValues{Permissions: "rau", StartPartitionKey: "HR", StartRowKey: "2", EndPartitionKey: "Sales", EndRowKey: "1"}))
	if _, err := rw.UpsertEntity(ctx, entity("HR", "2", map[string]any{"X": int32(1)}), nil); err != nil {
		t.Fatalf("upsert inside the range: %v", err)
	}
	if _, err := rw.UpsertEntity(ctx, entity("HR", "1", nil), nil); status(err) != http.StatusForbidden {
		t.Fatalf("upsert before the range: %v", err)
	}
	if _, err := rw.DeleteEntity(ctx, "HR", "2", nil); code(err) != "AuthorizationPermissionMismatch" {
		t.Fatalf("delete without d: %v", err)
	}
	if got := keysOf(list(t, rw, nil)); strings.Join(got, ",") != "HR/2,Sales/1" {
		t.Fatalf("the range HR/2..Sales/1 lists %v", got)
	}
	// Another table, an expired or tampered signature, a table operation.
	if _, err := s.sasClient(t, "Other", sign(aztables.SASSignatureValues{Permissions: "r"})).GetEntity(ctx, "a", "b", nil); status(err) != http.StatusForbidden {
		t.Fatalf("a SAS used on another table: %v", err)
	}
	expired := sign(aztables.SASSignatureValues{Permissions: "r", StartTime: time.Now().Add(-2 * time.Hour), ExpiryTime: time.Now().Add(-time.Hour)})
	if _, err := s.sasClient(t, "Staff", expired).GetEntity(ctx, "Sales", "1", nil); code(err) != "AuthenticationFailed" {
		t.Fatalf("an expired SAS: %v", err)
	}
	tampered := strings.Replace(sign(aztables.SASSignatureValues{Permissions: "r"}), "sp=r", "sp=rd", 1)
	if _, err := s.sasClient(t, "Staff", tampered).DeleteEntity(ctx, "Sales", "1", nil); code(err) != "AuthenticationFailed" {
		t.Fatalf("a SAS with widened permissions: %v", err)
	}
	// Signed, but tied to a stored access policy, which the host cannot
	// keep or revoke: refused, however valid its own fields.
	policy := sign(aztables.SASSignatureValues{Permissions: "r", Identifier: "readers"})
	if !strings.Contains(policy, "si=readers") {
		t.Fatalf("the SDK left the policy out of %s", policy)
	}
	if _, err := s.sasClient(t, "Staff", policy).GetEntity(ctx, "Sales", "1", nil); code(err) != "AuthenticationFailed" {
		t.Fatalf("a SAS naming a stored access policy: %v", err)
	}
}

// TestAccountSAS: an account SAS may manage tables when it grants them.
func TestAccountSAS(t *testing.T) {
	s := startServer(t, httpapiDefaults)
	ctx := context.Background()
	sign := func(perms aztables.AccountSASPermissions, rt aztables.AccountSASResourceTypes) string {
		q, err := aztables.AccountSASSignatureValues{Protocol: aztables.SASProtocolHTTPSandHTTP, ExpiryTime: time.Now().Add(time.Hour),
			Permissions: perms.String(), Services: "t", ResourceTypes: rt.String()}.Sign(credential(t))
		if err != nil {
			t.Fatal(err)
		}
		return q.Encode()
	}
	svc := func(sas string) *aztables.ServiceClient {
		c, err := aztables.NewServiceClientWithNoCredential(s.endpoint+"?"+sas, s.clientOptions())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	all := svc(sign(aztables.AccountSASPermissions{Read: true, Write: true, List: true, Create: true, Add: true, Delete: true},
		aztables.AccountSASResourceTypes{Container: true, Object: true}))
	if _, err := all.CreateTable(ctx, "ViaSAS", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := all.NewClient("ViaSAS").AddEntity(ctx, entity("a", "b", nil), nil); err != nil {
		t.Fatal(err)
	}
	readOnly := svc(sign(aztables.AccountSASPermissions{Read: true, List: true}, aztables.AccountSASResourceTypes{Object: true}))
	if _, err := readOnly.CreateTable(ctx, "Nope", nil); status(err) != http.StatusForbidden {
		t.Fatalf("create a table without c and srt=c: %v", err)
	}
	if _, err := readOnly.NewClient("ViaSAS").GetEntity(ctx, "a", "b", nil); err != nil {
		t.Fatal(err)
	}
	httpsOnly, err := aztables.AccountSASSignatureValues{Protocol: aztables.SASProtocolHTTPS, ExpiryTime: time.Now().Add(time.Hour),
		Permissions: "r", Services: "t", ResourceTypes: "o"}.Sign(credential(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc(httpsOnly.Encode()).NewClient("ViaSAS").GetEntity(ctx, "a", "b", nil); status(err) != http.StatusForbidden {
		t.Fatalf("an https-only SAS over http: %v", err)
	}
}
