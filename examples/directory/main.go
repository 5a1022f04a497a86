// Command directory is the employee directory of the Azure Table design
// guide with its secondary indexes and a per-department aggregate kept by
// Cairn as declared projections (projections/*.json), against a running
// host: table Employees, PartitionKey = department, RowKey = employee id.
//
//	go run ./examples/directory seed [-n 20]          create Employees and hire employees (commands over NATS)
//	go run ./examples/directory find-email <email>    the email index, then the employee by its keys
//	go run ./examples/directory by-lastname <prefix>  a key range of the last-name index
//	go run ./examples/directory departments           the per-department aggregate
//	go run ./examples/directory change-email <old> <new>
//	                                                  change an address, then read the index at the write's position
//
// The reads and change-email go over HTTP with the Azure SDK. It exits 1
// with the node's coded error (TableNotFound before seed or before the
// projections are deployed, say) or a connection error when no node runs.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/examples/internal/demo"
)

func main() { demo.Main("directory", run) }

// The source table and the projections declared on it.
const (
	employees = "Employees"
	byEmail   = "EmployeesByEmail"
	byLast    = "EmployeesByLastName"
	perDept   = "EmployeesPerDept"
)

func run(args []string) error {
	fs := demo.NewFlags("directory", "seed | find-email <email> | by-lastname <prefix> | departments | change-email <old> <new>")
	var host demo.Host
	host.NATSFlags(fs, "the host's NATS server (seed)")
	host.HTTPFlag(fs, "the host's HTTP API")
	n := fs.Int("n", 20, "seed: employees to hire")
	cmd, rest, err := demo.Parse(fs, args, map[string]int{"seed": 0, "find-email": 1, "by-lastname": 1, "departments": 0, "change-email": 2})
	if err != nil {
		return err
	}
	ctx, cancel := demo.Context()
	defer cancel()
	if cmd == "seed" {
		nc, err := host.Connect()
		if err != nil {
			return err
		}
		defer nc.Close()
		return seed(ctx, client.New(nc), *n)
	}
	svc, err := host.Tables()
	if err != nil {
		return err
	}
	switch cmd {
	case "find-email":
		return findEmail(ctx, svc, rest[0])
	case "by-lastname":
		return byLastName(ctx, svc, rest[0])
	case "departments":
		return listDepartments(ctx, svc)
	default:
		return changeEmail(ctx, svc, rest[0], rest[1])
	}
}

// employee i of the sample company (package demo): a unique address for
// the first 64, a salary in steps of 100.
func employee(i int) *engine.Entity {
	first, last := demo.Name(i)
	email := strings.ToLower(first + "." + last)
	if i >= 64 {
		email += fmt.Sprint(i / 64)
	}
	return engine.NewEntity(demo.Department(i), demo.EmployeeID(i),
		engine.Property{Name: "FirstName", Value: engine.String(first)},
		engine.Property{Name: "LastName", Value: engine.String(last)},
		engine.Property{Name: "Email", Value: engine.String(email + "@contoso.com")},
		engine.Property{Name: "Salary", Value: engine.Int64(int64(40000 + (i*3700)%45000))},
	)
}

// seed creates Employees (if needed) and hires n employees over NATS.
func seed(ctx context.Context, c *client.Client, n int) error {
	if _, err := c.CreateTable(ctx, employees); err != nil && engine.ErrorCode(err) != engine.CodeTableAlreadyExists {
		return err
	}
	var seq uint64
	for i := 1; i <= n; i++ {
		r, err := c.InsertOrReplace(ctx, employees, employee(i))
		if err != nil {
			return err
		}
		seq = r.Seq
	}
	fmt.Printf("table %s: %d employees hired (journal position %d)\n", employees, n, seq)
	return nil
}

// indexEntry is an index entity as the directory reads it.
type indexEntry struct {
	PartitionKey, RowKey             string
	SourcePartitionKey, SourceRowKey string
	FirstName, LastName, Email       string
}

// findEmail is the inter-partition secondary index pattern: a point query
// on the index's partition (the address), then the employee by the keys
// the index entity carries.
func findEmail(ctx context.Context, svc *aztables.ServiceClient, email string) error {
	hits, err := demo.Query[indexEntry](ctx, svc.NewClient(byEmail), demo.Where("PartitionKey eq "+demo.Quote(email)))
	if err != nil {
		return err
	}
	if len(hits) == 0 {
		return fmt.Errorf("%s: no employee has this address", email)
	}
	for _, h := range hits {
		fmt.Printf("%s: %s -> %s/%s (%s %s)\n", byEmail, h.PartitionKey, h.SourcePartitionKey, h.SourceRowKey, h.FirstName, h.LastName)
		resp, err := svc.NewClient(employees).GetEntity(ctx, h.SourcePartitionKey, h.SourceRowKey, nil)
		if err != nil {
			return err
		}
		var e aztables.EDMEntity
		if err := json.Unmarshal(resp.Value, &e); err != nil {
			return err
		}
		fmt.Printf("%s %s/%s: %s %s, %s, salary %s\n", employees, e.PartitionKey, e.RowKey,
			e.Properties["FirstName"], e.Properties["LastName"], e.Properties["Email"], number(e.Properties["Salary"]))
	}
	return nil
}

// byLastName is a range query on the last-name index: its PartitionKey is
// "LastName|FirstName", so the names starting with prefix are the keys
// from prefix up to the prefix with its last character incremented. The
// index carries the address, so the employees themselves are not read.
func byLastName(ctx context.Context, svc *aztables.ServiceClient, prefix string) error {
	filter := ""
	if prefix != "" {
		r := []rune(prefix)
		r[len(r)-1]++
		filter = "PartitionKey ge " + demo.Quote(prefix) + " and PartitionKey lt " + demo.Quote(string(r))
	}
	hits, err := demo.Query[indexEntry](ctx, svc.NewClient(byLast), demo.Where(filter))
	if err != nil {
		return err
	}
	fmt.Printf("%s where %s:\n", byLast, filter)
	tw := demo.Columns()
	for _, h := range hits {
		fmt.Fprintf(tw, "  %s\t%s/%s\t%s\n", h.PartitionKey, h.SourcePartitionKey, h.SourceRowKey, h.Email)
	}
	tw.Flush()
	fmt.Printf("  (%d)\n", len(hits))
	return nil
}

// listDepartments reads the aggregate: one entity per department
// (PartitionKey = department, RowKey ""), kept exact with every write to
// Employees instead of summed by a scan at each read.
func listDepartments(ctx context.Context, svc *aztables.ServiceClient) error {
	groups, err := demo.Query[aztables.EDMEntity](ctx, svc.NewClient(perDept), demo.Where(""))
	if err != nil {
		return err
	}
	tw := demo.Columns()
	fmt.Fprintln(tw, "DEPARTMENT\tEMPLOYEES\tTOTAL SALARY\tMIN\tMAX")
	for _, g := range groups {
		p := g.Properties
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", g.PartitionKey, number(p["Employees"]), number(p["TotalSalary"]), number(p["MinSalary"]), number(p["MaxSalary"]))
	}
	return tw.Flush()
}

// number prints a numeric property as the SDK decoded it.
func number(v any) string {
	switch x := v.(type) {
	case aztables.EDMInt64:
		return fmt.Sprint(int64(x))
	case float64:
		return fmt.Sprint(x)
	case nil:
		return "-"
	}
	return fmt.Sprint(v)
}

// changeEmail finds the employee through the email index, changes the
// address with a Merge, and reads the index for the new address sending
// the write's journal position (X-Cairn-Position): the read waits until
// the host's view (and so its projections, which move with the source)
// has reached the write, whichever host answers it.
func changeEmail(ctx context.Context, svc *aztables.ServiceClient, old, updated string) error {
	hits, err := demo.Query[indexEntry](ctx, svc.NewClient(byEmail), demo.Where("PartitionKey eq "+demo.Quote(old)))
	if err != nil {
		return err
	}
	if len(hits) != 1 {
		return fmt.Errorf("%s: %d employees have this address, want 1", old, len(hits))
	}
	h := hits[0]
	patch, _ := json.Marshal(map[string]string{"PartitionKey": h.SourcePartitionKey, "RowKey": h.SourceRowKey, "Email": updated})
	var resp *http.Response
	wctx := runtime.WithCaptureResponse(ctx, &resp)
	if _, err := svc.NewClient(employees).UpdateEntity(wctx, patch, &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeMerge, IfMatch: new(azcore.ETagAny)}); err != nil {
		return err
	}
	pos := resp.Header.Get("X-Cairn-Position")
	fmt.Printf("%s %s/%s: Email %s (journal position %s)\n", employees, h.SourcePartitionKey, h.SourceRowKey, updated, pos)

	rctx := runtime.WithHTTPHeader(ctx, http.Header{"X-Cairn-Position": {pos}})
	for _, addr := range []string{updated, old} {
		hits, err := demo.Query[indexEntry](rctx, svc.NewClient(byEmail), demo.Where("PartitionKey eq "+demo.Quote(addr)))
		if err != nil {
			return err
		}
		fmt.Printf("%s at position %s: %s -> ", byEmail, pos, addr)
		if len(hits) == 0 {
			fmt.Println("nobody")
		}
		for _, h := range hits {
			fmt.Printf("%s/%s (%s %s)\n", h.SourcePartitionKey, h.SourceRowKey, h.FirstName, h.LastName)
		}
	}
	return nil
}
