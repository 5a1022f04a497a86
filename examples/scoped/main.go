// Command scoped is the Azure Table design guide's scoped access with
// shared access signatures (SAS), against a running host and the employee
// directory's table Employees (go run ./examples/directory seed): an
// operator signs a token with the account key; a client holding only the
// token reads what it grants and is refused the rest.
//
//	go run ./examples/scoped sign [-perms r] [-pk Sales] [-for 1h]   the operator: print a SAS URL for Employees
//	go run ./examples/scoped -sas-url <url> list <department>        the client: query a department
//	go run ./examples/scoped -sas-url <url> get <department> <id>    the client: read one employee
//	go run ./examples/scoped -sas-url <url> hire <department> <id> <first> <last>
//	                                                                 the client: insert an employee
//
// sign needs the account key, which it reads from -connection-string (the
// development account's, by default); the client commands use only the
// URL. A refused request exits 1 with the HTTP status and the host's error
// code on stderr ("HTTP 403 AuthorizationFailure: …").
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/cairn-dev/cairn/examples/internal/demo"
)

func main() {
	demo.Main("scoped", func(args []string) error { return demo.WithStatus(run(args)) })
}

// employees is the directory's table: PartitionKey = department, RowKey =
// employee id.
const employees = "Employees"

func run(args []string) error {
	fs := demo.NewFlags("scoped", "sign | list <department> | get <department> <id> | hire <department> <id> <first> <last>")
	var host demo.Host
	host.HTTPFlag(fs, "sign: the account to sign with (its key) and the host's HTTP API")
	perms := fs.String("perms", "r", "sign: what the token grants, of r (query), a (add), u (update), d (delete)")
	pk := fs.String("pk", "Sales", "sign: the one PartitionKey the token covers (spk = epk); \"\" for the whole table")
	valid := fs.Duration("for", time.Hour, "sign: how long the token is valid from now (negative: already expired)")
	sasURL := fs.String("sas-url", "", "list, get, hire: the table's SAS URL, as sign prints it (the client's only credential)")
	cmd, rest, err := demo.Parse(fs, args, map[string]int{"sign": 0, "list": 1, "get": 2, "hire": 4})
	if err != nil {
		return err
	}
	if cmd == "sign" {
		account, err := host.Account()
		if err != nil {
			return err
		}
		u, err := sign(account, *perms, *pk, time.Now().Add(*valid))
		if err != nil {
			return err
		}
		fmt.Println(u)
		return nil
	}
	if *sasURL == "" {
		return fmt.Errorf("%s needs -sas-url (go run ./examples/scoped sign prints one)", cmd)
	}
	// The client holds the URL and nothing else: no account key.
	t, err := aztables.NewClientWithNoCredential(*sasURL, nil)
	if err != nil {
		return err
	}
	ctx, cancel := demo.Context()
	defer cancel()
	switch cmd {
	case "list":
		return list(ctx, t, rest[0])
	case "get":
		return get(ctx, t, rest[0], rest[1])
	default:
		return hire(ctx, t, rest[0], rest[1], rest[2], rest[3])
	}
}

// sign returns a SAS URL for Employees granting perms on partition pk
// (the whole table if pk is "") until expiry, signed with the key of the
// connection string's account. No request is sent: anyone holding the
// account key can sign, and the host checks the signature on each use.
func sign(account demo.Account, perms, pk string, expiry time.Time) (string, error) {
	cred, err := aztables.NewSharedKeyCredential(account.Name, account.Key)
	if err != nil {
		return "", err
	}
	v := aztables.SASSignatureValues{
		TableName:         employees,
		Permissions:       perms,
		ExpiryTime:        expiry.UTC(),
		StartPartitionKey: pk,
		EndPartitionKey:   pk,
	}
	q, err := v.Sign(cred)
	if err != nil {
		return "", err
	}
	// The SDK (aztables v1.4.1) signs the key range but leaves spk and epk
	// out of the query it returns; without them the host computes another
	// string to sign and refuses the token (AuthenticationFailed).
	if pk != "" {
		q += "&" + url.Values{"spk": {pk}, "epk": {pk}}.Encode()
	}
	return account.Endpoint + "/" + employees + "?" + q, nil
}

// employee is an employee as the client reads it.
type employee struct {
	PartitionKey, RowKey string
	FirstName, LastName  string
}

// list queries one department. The host narrows every query to the
// token's key range, so a department outside it lists nobody rather than
// failing: no entity outside the range is ever returned.
func list(ctx context.Context, t *aztables.Client, dept string) error {
	filter := "PartitionKey eq " + demo.Quote(dept)
	fmt.Printf("%s where %s:\n", employees, filter)
	n := 0
	err := demo.Each(ctx, t, demo.Where(filter), func(e employee) error {
		fmt.Printf("  %s/%s  %s %s\n", e.PartitionKey, e.RowKey, e.FirstName, e.LastName)
		n++
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("  (%d)\n", n)
	return nil
}

// get reads one employee by its keys.
func get(ctx context.Context, t *aztables.Client, dept, id string) error {
	resp, err := t.GetEntity(ctx, dept, id, nil)
	if err != nil {
		return err
	}
	var e employee
	if err := json.Unmarshal(resp.Value, &e); err != nil {
		return err
	}
	fmt.Printf("%s %s/%s: %s %s\n", employees, e.PartitionKey, e.RowKey, e.FirstName, e.LastName)
	return nil
}

// hire inserts an employee.
func hire(ctx context.Context, t *aztables.Client, dept, id, first, last string) error {
	e, err := json.Marshal(employee{PartitionKey: dept, RowKey: id, FirstName: first, LastName: last})
	if err != nil {
		return err
	}
	if _, err := t.AddEntity(ctx, e, nil); err != nil {
		return err
	}
	fmt.Printf("%s %s/%s: %s %s hired\n", employees, dept, id, first, last)
	return nil
}
