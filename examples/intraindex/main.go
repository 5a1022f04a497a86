// Command intraindex is the intra-partition secondary index pattern of the
// Azure Table design guide, against a running Cairn host: in table
// EmployeesIdx (PartitionKey = department) each employee is stored twice,
// under RowKey empid_<id> and under RowKey email_<address>, each copy with
// all the employee's properties, so that either lookup is one point read.
// Every change writes both copies in one batch (an entity group
// transaction, one partition), so the copies never disagree.
//
//	go run ./examples/intraindex seed [-n 12]                 create EmployeesIdx and hire n employees, one batch each
//	go run ./examples/intraindex by-id <dept> <id>            the employee by id: a point read of empid_<id>
//	go run ./examples/intraindex by-email <dept> <email>      the employee by address: a point read of email_<email>
//	go run ./examples/intraindex partition <dept>             the partition, both kinds of copy, in key order
//	go run ./examples/intraindex change-email [-if-match <etag>] <dept> <id> <email>
//	                                                          replace empid_, delete the old email_, insert the new, in one batch
//	go run ./examples/intraindex leave <dept> <id>            delete both copies in one batch
//
// The batches go over NATS (engine/client), the reads over HTTP with the
// Azure SDK. change-email and leave make their batch conditional on the
// ETag of the empid_ copy they read (or the one -if-match names, the ETag
// of an earlier read): if another writer changed the employee meanwhile,
// the host refuses the batch (UpdateConditionNotSatisfied) and writes
// nothing. A new address another employee of the department already has
// is refused too (EntityAlreadyExists): the email_ copies are a unique
// index. It exits 1 with the node's coded error on stderr.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/examples/internal/demo"
)

func main() { demo.Main("intraindex", run) }

// The table, and the RowKey prefixes of its two copies of an employee.
const (
	table       = "EmployeesIdx"
	idPrefix    = "empid_"
	emailPrefix = "email_"
)

func run(args []string) error {
	fs := demo.NewFlags("intraindex", "seed | by-id <dept> <id> | by-email <dept> <email> | partition <dept> | change-email <dept> <id> <email> | leave <dept> <id>")
	var host demo.Host
	host.NATSFlags(fs, "the host's NATS server (seed, change-email, leave)")
	host.HTTPFlag(fs, "the host's HTTP API")
	n := fs.Int("n", 12, "seed: employees to hire")
	ifMatch := fs.String("if-match", "", "change-email: the ETag of an earlier read to make the change conditional on (default: the ETag read now)")
	cmd, rest, err := demo.Parse(fs, args, map[string]int{"seed": 0, "by-id": 2, "by-email": 2, "partition": 1, "change-email": 3, "leave": 2})
	if err != nil {
		return err
	}
	ctx, cancel := demo.Context()
	defer cancel()
	t, err := host.Table(table)
	if err != nil {
		return err
	}
	switch cmd {
	case "by-id":
		return show(ctx, t, rest[0], idPrefix+rest[1])
	case "by-email":
		return show(ctx, t, rest[0], emailPrefix+rest[1])
	case "partition":
		return listPartition(ctx, t, rest[0])
	}
	nc, err := host.Connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	c := client.New(nc)
	switch cmd {
	case "seed":
		return seed(ctx, c, *n)
	case "change-email":
		return changeEmail(ctx, c, t, rest[0], rest[1], rest[2], *ifMatch)
	default:
		return leave(ctx, c, t, rest[0], rest[1])
	}
}

// employee is one copy of an employee as the example reads it.
type employee struct {
	PartitionKey, RowKey                   string
	EmployeeId, FirstName, LastName, Email string
}

func (e employee) String() string {
	return fmt.Sprintf("%s %s %s, %s", e.EmployeeId, e.FirstName, e.LastName, e.Email)
}

// copyOf is the copy of e under RowKey rk: every copy carries all the
// employee's properties, so a lookup by either key is one read.
func (e employee) copyOf(rk string) *engine.Entity {
	return engine.NewEntity(e.PartitionKey, rk,
		engine.Property{Name: "EmployeeId", Value: engine.String(e.EmployeeId)},
		engine.Property{Name: "FirstName", Value: engine.String(e.FirstName)},
		engine.Property{Name: "LastName", Value: engine.String(e.LastName)},
		engine.Property{Name: "Email", Value: engine.String(e.Email)},
	)
}

// hire is employee i of the sample company (package demo), with an
// address made of the name.
func hire(i int) employee {
	first, last := demo.Name(i)
	return employee{
		PartitionKey: demo.Department(i),
		EmployeeId:   demo.EmployeeID(i),
		FirstName:    first,
		LastName:     last,
		Email:        strings.ToLower(first+"."+last) + "@contoso.com",
	}
}

// seed creates the table (if needed) and hires n employees, each with one
// batch inserting both of its copies: a hire that fails leaves neither.
func seed(ctx context.Context, c *client.Client, n int) error {
	if _, err := c.CreateTable(ctx, table); err != nil && engine.ErrorCode(err) != engine.CodeTableAlreadyExists {
		return err
	}
	var seq uint64
	for i := 1; i <= n; i++ {
		e := hire(i)
		r, err := c.Batch(ctx, table, []engine.Operation{
			{Op: engine.OpInsert, Entity: e.copyOf(idPrefix + e.EmployeeId)},
			{Op: engine.OpInsert, Entity: e.copyOf(emailPrefix + e.Email)},
		})
		if err != nil {
			return fmt.Errorf("hire %s/%s: %w", e.PartitionKey, e.EmployeeId, err)
		}
		seq = r.Seq
	}
	fmt.Printf("table %s: %d employees hired, %d entities, one batch each (journal position %d)\n", table, n, 2*n, seq)
	return nil
}

// read is a point read of one copy over HTTP: the copy and its ETag.
func read(ctx context.Context, t *aztables.Client, pk, rk string) (employee, string, error) {
	resp, err := t.GetEntity(ctx, pk, rk, nil)
	if err != nil {
		return employee{}, "", fmt.Errorf("%s %s/%s: %w", table, pk, rk, demo.Coded(err))
	}
	var e employee
	if err := json.Unmarshal(resp.Value, &e); err != nil {
		return employee{}, "", err
	}
	return e, string(resp.ETag), nil
}

// show is a lookup: one point read, whichever copy names the key.
func show(ctx context.Context, t *aztables.Client, dept, rk string) error {
	e, etag, err := read(ctx, t, dept, rk)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s/%s: %s (ETag %s)\n", table, dept, rk, e, etag)
	return nil
}

// listPartition prints a department's partition in key order: the email_
// copies, then the empid_ copies, each employee once under each.
func listPartition(ctx context.Context, t *aztables.Client, dept string) error {
	filter := "PartitionKey eq " + demo.Quote(dept)
	fmt.Printf("%s where %s:\n", table, filter)
	tw := demo.Columns()
	count := 0
	err := demo.Each(ctx, t, demo.Where(filter), func(e employee) error {
		fmt.Fprintf(tw, "  %s	%s\n", e.RowKey, e)
		count++
		return nil
	})
	if err != nil {
		return demo.Coded(err)
	}
	tw.Flush()
	fmt.Printf("  (%d)\n", count)
	return nil
}

// changeEmail reads the employee's empid_ copy and, in one batch on its
// partition, replaces it with the new address, deletes the copy under the
// old address and inserts one under the new. The replace is conditional
// on the ETag of the read (or ifMatch, an earlier read's): if the
// employee changed since, the batch is refused and nothing is written.
// The delete needs no ETag of its own: only these batches write the
// copies, so while empid_ is as read, so is the email_ copy it names.
// Then it reads both addresses at the batch's journal position.
func changeEmail(ctx context.Context, c *client.Client, t *aztables.Client, dept, id, email, ifMatch string) error {
	e, etag, err := read(ctx, t, dept, idPrefix+id)
	if err != nil {
		return err
	}
	fmt.Printf("read %s %s/%s%s: %s (ETag %s)\n", table, dept, idPrefix, id, e, etag)
	if ifMatch == "" {
		ifMatch = etag
	}
	old := e.Email
	e.Email = email
	ops := []engine.Operation{
		{Op: engine.OpReplace, Entity: e.copyOf(idPrefix + id), IfMatch: ifMatch},
		{Op: engine.OpDelete, Entity: engine.NewEntity(dept, emailPrefix+old), IfMatch: "*"},
		{Op: engine.OpInsert, Entity: e.copyOf(emailPrefix + email)},
	}
	r, err := c.Batch(ctx, table, ops)
	if err != nil {
		return fmt.Errorf("batch refused, nothing written: %w", err)
	}
	fmt.Printf("batch on %s/%s, if %s%s is still %s: journal position %d\n", table, dept, idPrefix, id, ifMatch, r.Seq)
	for _, op := range ops {
		fmt.Printf("  %-8s %s\n", op.Op, op.Entity.RowKey)
	}
	// Read at the batch's position, so that any host answers with a view
	// that includes it (X-Cairn-Position).
	pos := strconv.FormatUint(r.Seq, 10)
	rctx := runtime.WithHTTPHeader(ctx, http.Header{"X-Cairn-Position": {pos}})
	for _, addr := range []string{email, old} {
		fmt.Printf("at position %s: %s%s -> ", pos, emailPrefix, addr)
		got, _, err := read(rctx, t, dept, emailPrefix+addr)
		switch {
		case err == nil:
			fmt.Println(got)
		case engine.ErrorCode(err) == engine.CodeResourceNotFound:
			fmt.Println(engine.CodeResourceNotFound)
		default:
			return err
		}
	}
	return nil
}

// leave deletes both copies of an employee in one batch, conditional on
// the ETag of the empid_ copy read first.
func leave(ctx context.Context, c *client.Client, t *aztables.Client, dept, id string) error {
	e, etag, err := read(ctx, t, dept, idPrefix+id)
	if err != nil {
		return err
	}
	r, err := c.Batch(ctx, table, []engine.Operation{
		{Op: engine.OpDelete, Entity: engine.NewEntity(dept, idPrefix+id), IfMatch: etag},
		{Op: engine.OpDelete, Entity: engine.NewEntity(dept, emailPrefix+e.Email), IfMatch: "*"},
	})
	if err != nil {
		return fmt.Errorf("batch refused, nothing written: %w", err)
	}
	fmt.Printf("%s/%s: %s%s and %s%s deleted in one batch (journal position %d)\n", table, dept, idPrefix, id, emailPrefix, e.Email, r.Seq)
	return nil
}
