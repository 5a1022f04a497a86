package node_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/commit"
)

// contosoKey is the key of the second account of the accounts tests.
var contosoKey = base64.StdEncoding.EncodeToString([]byte("contoso's key, 32 bytes at least"))

// accountService returns an SDK client of account name with key on h.
func accountService(t *testing.T, h *node.Node, name, key string) *aztables.ServiceClient {
	t.Helper()
	cred, err := aztables.NewSharedKeyCredential(name, key)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := aztables.NewServiceClientWithSharedKey(h.HTTPURL()+"/"+name, cred, &aztables.ClientOptions{ClientOptions: azcore.ClientOptions{
		InsecureAllowCredentialWithHTTP: true,
		Retry:                           policy.RetryOptions{MaxRetries: -1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// azCode is the Azure error code of an SDK error ("" if none).
func azCode(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

func tableNames(t *testing.T, svc *aztables.ServiceClient) []string {
	t.Helper()
	var names []string
	p := svc.NewListTablesPager(nil)
	for p.More() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range page.Tables {
			names = append(names, *tb.Name)
		}
	}
	return names
}

func owner(t *testing.T, c *aztables.Client, pk, rk string) string {
	t.Helper()
	r, err := c.GetEntity(context.Background(), pk, rk, nil)
	if err != nil {
		t.Fatalf("get (%s, %s): %v", pk, rk, err)
	}
	if i := strings.Index(string(r.Value), `"Owner":"`); i >= 0 {
		rest := string(r.Value)[i+len(`"Owner":"`):]
		return rest[:strings.IndexByte(rest, '"')]
	}
	t.Fatalf("no Owner in %s", r.Value)
	return ""
}

// TestAccountsAreNamespaces: two accounts with a table of the same name
// each see only their own, over HTTP and NATS, and no spelling of a name
// reaches the other's; the namespaces survive a restart (the catalog's
// version 2 records), and the quota of tables counts per account.
func TestAccountsAreNamespaces(t *testing.T) {
	ctx := context.Background()
	contoso, err := httpapi.ParseAccount("contoso:" + contosoKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := node.Config{
		DataDir: t.TempDir(),
		API:     httpapi.Config{Accounts: []httpapi.Account{contoso}},
		Commit:  commit.Config{MaxTablesPerAccount: 3},
	}
	h, stop := nodetest.Start(t, cfg)
	dev := accountService(t, h, httpapi.DevAccountName, httpapi.DevAccountKey)
	con := accountService(t, h, "contoso", contosoKey)

	for _, svc := range []*aztables.ServiceClient{dev, con} {
		if _, err := svc.CreateTable(ctx, "Employees", nil); err != nil {
			t.Fatalf("each account creates its own Employees: %v", err)
		}
	}
	if _, err := con.CreateTable(ctx, "Private", nil); err != nil {
		t.Fatal(err)
	}
	put := func(svc *aztables.ServiceClient, table, who string) {
		t.Helper()
		body := []byte(`{"PartitionKey":"p","RowKey":"1","Owner":"` + who + `"}`)
		if _, err := svc.NewClient(table).UpsertEntity(ctx, body, nil); err != nil {
			t.Fatalf("%s writes %s: %v", who, table, err)
		}
	}
	put(dev, "Employees", "dev")
	put(con, "Employees", "contoso")
	put(con, "Private", "contoso")
	if got := owner(t, dev.NewClient("Employees"), "p", "1"); got != "dev" {
		t.Fatalf("the development account reads %q's entity", got)
	}
	if got := owner(t, con.NewClient("Employees"), "p", "1"); got != "contoso" {
		t.Fatalf("contoso reads %q's entity", got)
	}
	if got := tableNames(t, dev); !slices.Equal(got, []string{"Employees"}) {
		t.Fatalf("the development account lists %v", got)
	}
	if got := tableNames(t, con); !slices.Equal(got, []string{"Employees", "Private"}) {
		t.Fatalf("contoso lists %v", got)
	}
	// The development account cannot reach contoso's table by any name.
	if _, err := dev.NewClient("Private").GetEntity(ctx, "p", "1", nil); azCode(err) != "TableNotFound" {
		t.Fatalf("dev reads contoso's Private: %v", err)
	}
	for _, name := range []string{"contoso.Private", "contoso.Employees"} {
		if _, err := dev.NewClient(name).GetEntity(ctx, "p", "1", nil); azCode(err) != "InvalidInput" {
			t.Fatalf("dev reads %s: %v", name, err)
		}
		if _, err := dev.NewClient(name).UpsertEntity(ctx, []byte(`{"PartitionKey":"p","RowKey":"1","Owner":"dev"}`), nil); azCode(err) != "InvalidInput" {
			t.Fatalf("dev writes %s: %v", name, err)
		}
		if _, err := dev.CreateTable(ctx, name, nil); azCode(err) != "InvalidInput" {
			t.Fatalf("dev creates %s: %v", name, err)
		}
		if _, err := dev.DeleteTable(ctx, name, nil); azCode(err) != "InvalidInput" {
			t.Fatalf("dev deletes %s: %v", name, err)
		}
	}
	// A batch naming the other account's table through the path.
	tx := []aztables.TransactionAction{{ActionType: aztables.TransactionTypeInsertReplace, Entity: []byte(`{"PartitionKey":"p","RowKey":"2","Owner":"dev"}`)}}
	if _, err := dev.NewClient("contoso.Private").SubmitTransaction(ctx, tx, nil); err == nil {
		t.Fatal("dev's batch on contoso.Private succeeded")
	}

	// Over NATS: the subject names the account.
	nc := nodetest.Connect(t, h)
	devc, conc := client.New(nc), client.New(nc, client.WithAccount("contoso"))
	e, _, err := conc.Retrieve(ctx, "Private", "p", "1")
	if err != nil || e.Properties[0].Value.Str() != "contoso" {
		t.Fatalf("contoso retrieves its Private over NATS: %v %v", e, err)
	}
	if _, _, err := devc.Retrieve(ctx, "Private", "p", "1"); engine.ErrorCode(err) != engine.CodeTableNotFound {
		t.Fatalf("dev retrieves contoso's Private over NATS: %v", err)
	}
	if _, err := conc.InsertOrReplace(ctx, "Employees", engine.NewEntity("p", "3", engine.Property{Name: "Owner", Value: engine.String("contoso")})); err != nil {
		t.Fatal(err)
	}
	if _, _, err := devc.Retrieve(ctx, "Employees", "p", "3"); engine.ErrorCode(err) != engine.CodeResourceNotFound {
		t.Fatalf("contoso's write over NATS shows in dev's table: %v", err)
	}
	// Queues are the development account's: another account's write may
	// not carry a message to one (its functions act on the development
	// account's tables), and nothing is stored.
	if _, err := conc.Insert(ctx, "Employees", engine.NewEntity("q", "1"),
		client.WithMessages(engine.Message{Queue: "archive", Body: []byte(`{"from":"Employees","to":"Loot"}`)})); engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Fatalf("contoso's message to a queue: %v", err)
	}
	if _, _, err := conc.Retrieve(ctx, "Employees", "q", "1"); engine.ErrorCode(err) != engine.CodeResourceNotFound {
		t.Fatalf("the refused write was stored: %v", err)
	}
	// Errors name a table as its account sees it.
	if _, err := conc.Insert(ctx, "Nope", engine.NewEntity("p", "1")); engine.ErrorCode(err) != engine.CodeTableNotFound || strings.Contains(err.Error(), "contoso.") {
		t.Fatalf("contoso's write to a missing table: %v", err)
	}
	tables, err := conc.ListTables(ctx)
	if err != nil || len(tables) != 2 || tables[0].Name != "Employees" || tables[1].Name != "Private" {
		t.Fatalf("contoso lists over NATS %+v %v", tables, err)
	}
	if _, err := devc.CreateTable(ctx, "contoso.Sneaky"); engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Fatalf("dev creates contoso.Sneaky over NATS: %v", err)
	}
	if _, _, err := client.New(nc, client.WithAccount("No-Such")).Retrieve(ctx, "Employees", "p", "1"); err == nil {
		t.Fatal("a subject with an invalid account name was served")
	}
	// The long form of the development account is the same namespace.
	r, err := devc.Do(ctx, "cairn.cmd."+engine.DevAccount+".Employees", &engine.Request{Op: "Retrieve", PartitionKey: "p", RowKey: "1"})
	if err != nil || r.Entity == nil || r.Entity.Properties[0].Value.Str() != "dev" {
		t.Fatalf("dev's long subject: %+v %v", r, err)
	}

	// Quota: contoso has 2 of 3; a third passes, a fourth is refused, and
	// the development account's count is its own.
	if _, err := con.CreateTable(ctx, "Third", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := con.CreateTable(ctx, "Fourth", nil); azCode(err) != string(engine.CodeTableQuotaExceeded) {
		t.Fatalf("contoso's fourth table: %v", err)
	}
	if got := tableNames(t, con); len(got) != 3 {
		t.Fatalf("the refused table exists: %v", got)
	}
	if _, err := dev.CreateTable(ctx, "Second", nil); err != nil {
		t.Fatalf("the development account's quota is its own: %v", err)
	}

	// Deleting dev's Employees leaves contoso's.
	if _, err := dev.DeleteTable(ctx, "Employees", nil); err != nil {
		t.Fatal(err)
	}
	if got := owner(t, con.NewClient("Employees"), "p", "1"); got != "contoso" {
		t.Fatalf("contoso's Employees after dev's delete: %q", got)
	}

	// A restart replays the catalog into the same namespaces.
	stop()
	h, _ = nodetest.Start(t, cfg)
	dev = accountService(t, h, httpapi.DevAccountName, httpapi.DevAccountKey)
	con = accountService(t, h, "contoso", contosoKey)
	if got := tableNames(t, dev); !slices.Equal(got, []string{"Second"}) {
		t.Fatalf("after restart the development account lists %v", got)
	}
	if got := tableNames(t, con); !slices.Equal(got, []string{"Employees", "Private", "Third"}) {
		t.Fatalf("after restart contoso lists %v", got)
	}
	if got := owner(t, con.NewClient("Private"), "p", "1"); got != "contoso" {
		t.Fatalf("after restart contoso's Private holds %q's entity", got)
	}
	if resp, err := http.Get(h.HTTPURL() + "/contoso/Tables"); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("unsigned request to contoso: %v %v", resp, err)
	}
}

// TestAccountLoadNamesItsTables: an account's $load names its tables as the
// account sees them ("Orders"), not by their full names inside Cairn
// ("contoso.Orders"), with or without ?table=.
func TestAccountLoadNamesItsTables(t *testing.T) {
	contoso, err := httpapi.ParseAccount("contoso:" + contosoKey)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := nodetest.Start(t, node.Config{DataDir: t.TempDir(), API: httpapi.Config{Accounts: []httpapi.Account{contoso}}})
	if _, err := accountService(t, h, "contoso", contosoKey).CreateTable(context.Background(), "Orders", nil); err != nil {
		t.Fatal(err)
	}
	for _, query := range []string{"", "?table=Orders"} {
		req, err := http.NewRequest(http.MethodGet, h.HTTPURL()+"/contoso/$load"+query, nil)
		if err != nil {
			t.Fatal(err)
		}
		date := time.Now().UTC().Format(http.TimeFormat)
		req.Header.Set("x-ms-date", date)
		key, _ := base64.StdEncoding.DecodeString(contosoKey)
		m := hmac.New(sha256.New, key)
		m.Write([]byte(date + "\n/contoso" + req.URL.EscapedPath()))
		req.Header.Set("Authorization", "SharedKeyLite contoso:"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"table":"Orders"`) || strings.Contains(string(b), "contoso.") {
			t.Errorf("$load%s: %d %s", query, resp.StatusCode, b)
		}
	}
}
