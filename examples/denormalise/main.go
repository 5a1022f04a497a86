// Command denormalise is the denormalisation pattern of the Azure Table
// design guide, against a running host: table Staff, PartitionKey =
// department, a Department entity (RowKey DEPT, property Manager) beside
// its Employee entities (RowKey EMP_000123), each of which carries a copy
// of its manager's name (ManagerName), so that listing a department's
// employees with their manager is one query. The copies are kept in step
// with the Department by one entity group transaction (a batch).
//
//	go run ./examples/denormalise seed [-n 20]                   create Staff and hire employees (commands over NATS)
//	go run ./examples/denormalise list <department>              the employees with their manager: one query
//	go run ./examples/denormalise change-manager <department> <name>
//	                                                             merge the new name into the Department and every copy, in one batch
//
// The reads go over HTTP with the Azure SDK, the writes over NATS.
// change-manager reads the partition, then merges the Department and each
// Employee under its ETag in one batch: it is applied whole or not at all,
// and a department of more than 99 employees does not fit one batch (100
// operations). It exits 1 with the node's coded error (InvalidInput for
// such a batch, TableNotFound before seed, say) or a connection error
// when no node runs.
package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/examples/internal/demo"
)

func main() { demo.Main("denormalise", run) }

const (
	table = "Staff"
	// departmentKey is the RowKey of a partition's Department entity;
	// every Employee's RowKey starts with employeePrefix.
	departmentKey  = "DEPT"
	employeePrefix = "EMP_"
)

func run(args []string) error {
	fs := demo.NewFlags("denormalise", "seed | list <department> | change-manager <department> <name>")
	var host demo.Host
	host.NATSFlags(fs, "the host's NATS server (seed, change-manager)")
	host.HTTPFlag(fs, "the host's HTTP API")
	n := fs.Int("n", 20, "seed: employees to hire")
	cmd, rest, err := demo.Parse(fs, args, map[string]int{"seed": 0, "list": 1, "change-manager": 2})
	if err != nil {
		return err
	}
	ctx, cancel := demo.Context()
	defer cancel()
	var c *client.Client
	if cmd != "list" {
		nc, err := host.Connect()
		if err != nil {
			return err
		}
		defer nc.Close()
		c = client.New(nc)
	}
	if cmd == "seed" {
		return seed(ctx, c, *n)
	}
	t, err := host.Table(table)
	if err != nil {
		return err
	}
	if cmd == "list" {
		return list(ctx, t, rest[0])
	}
	return changeManager(ctx, c, t, rest[0], rest[1])
}

// seed creates Staff (if needed) and writes each department's partition:
// its Department entity and its employees, each employee with a copy of
// the manager's name. Employee i is in department i mod 3. A partition
// is written in batches of up to engine.MaxBatchOps operations, the
// Department in the first.
func seed(ctx context.Context, c *client.Client, n int) error {
	if _, err := c.CreateTable(ctx, table); err != nil && engine.ErrorCode(err) != engine.CodeTableAlreadyExists {
		return err
	}
	var first, last uint64
	for d, dept := range demo.Departments() {
		ops := []engine.Operation{{Op: engine.OpInsertOrReplace, Entity: engine.NewEntity(dept, departmentKey,
			engine.Property{Name: "EntityType", Value: engine.String("Department")},
			engine.Property{Name: "Manager", Value: engine.String(demo.Manager(d))},
		)}}
		for i := 1; i <= n; i++ {
			if demo.Department(i) != dept {
				continue
			}
			first, last := demo.Name(i)
			ops = append(ops, engine.Operation{Op: engine.OpInsertOrReplace, Entity: engine.NewEntity(dept, employeePrefix+demo.EmployeeID(i),
				engine.Property{Name: "EntityType", Value: engine.String("Employee")},
				engine.Property{Name: "FirstName", Value: engine.String(first)},
				engine.Property{Name: "LastName", Value: engine.String(last)},
				engine.Property{Name: "ManagerName", Value: engine.String(demo.Manager(d))},
			)})
		}
		for len(ops) > 0 {
			k := min(len(ops), engine.MaxBatchOps)
			r, err := c.Batch(ctx, table, ops[:k])
			if err != nil {
				return fmt.Errorf("%s/%s: %w", table, dept, err)
			}
			ops = ops[k:]
			if first == 0 {
				first = r.Seq
			}
			last = r.Seq
		}
	}
	fmt.Printf("table %s: %d departments and %d employees, each employee with its manager's name (journal positions %d to %d)\n", table, len(demo.Departments()), n, first, last)
	return nil
}

// member is an entity of a department's partition as the program reads
// it: the Department has Manager, an Employee has ManagerName.
type member struct {
	PartitionKey, RowKey string
	ETag                 string `json:"odata.etag"`
	FirstName, LastName  string
	Manager, ManagerName string
}

// managerName is the name the entity holds: the Department's own, or an
// Employee's copy.
func (m member) managerName() string {
	if m.RowKey == departmentKey {
		return m.Manager
	}
	return m.ManagerName
}

// position is the journal position of the entity's last write, which its
// ETag names (W/"epoch.position.index").
func (m member) position() (uint64, error) {
	_, v, err := engine.ParseETag(m.ETag)
	return v.Seq, err
}

// position prints a journal position.
func position(p uint64) string { return strconv.FormatUint(p, 10) }

// employeesFilter is the key range of a department's employees: RowKeys
// from "EMP_" up to, not including, "EMP`" (the prefix with its last
// character incremented). The Department entity is outside it.
func employeesFilter(dept string) string {
	r := []rune(employeePrefix)
	r[len(r)-1]++
	return "PartitionKey eq " + demo.Quote(dept) + " and RowKey ge " + demo.Quote(employeePrefix) + " and RowKey lt " + demo.Quote(string(r))
}

// list prints a department's employees with their manager, from the
// copies: one range query, the Department entity is not read.
func list(ctx context.Context, t *aztables.Client, dept string) error {
	filter := employeesFilter(dept)
	ms, err := demo.Query[member](ctx, t, demo.Where(filter))
	if err != nil {
		return err
	}
	fmt.Printf("%s where %s:\n", table, filter)
	tw := demo.Columns()
	names := map[string]int{}
	for _, m := range ms {
		pos, err := m.position()
		if err != nil {
			return err
		}
		names[m.ManagerName]++
		fmt.Fprintf(tw, "  %s\t%s %s\tmanager %s\twritten at position %d\n", m.RowKey, m.FirstName, m.LastName, m.ManagerName, pos)
	}
	tw.Flush()
	fmt.Printf("  (%d employees; ManagerName %s)\n", len(ms), tally(names, strconv.Quote))
	return nil
}

// tally prints how many entities hold each value, values in order.
func tally[K cmp.Ordered](m map[K]int, show func(K) string) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s in %d", show(k), m[k]))
	}
	return strings.Join(parts, ", ")
}

// changeManager reads the department's partition (the Department and its
// employees, one query), then merges the new name into the Department's
// Manager and every Employee's ManagerName in one batch, each operation
// conditional on the ETag just read: if any of them changed in between,
// or the batch is too large, nothing is written. Then it reads the
// partition as of the position before the batch and at the batch's
// position: every entity holds the old name in the first, the new one in
// the second, and no position holds a mix.
func changeManager(ctx context.Context, c *client.Client, t *aztables.Client, dept, name string) error {
	ms, err := demo.Query[member](ctx, t, demo.Where("PartitionKey eq "+demo.Quote(dept)))
	if err != nil {
		return err
	}
	var ops []engine.Operation
	old := ""
	for _, m := range ms {
		prop := "ManagerName"
		if m.RowKey == departmentKey {
			prop, old = "Manager", m.Manager
		} else if !strings.HasPrefix(m.RowKey, employeePrefix) {
			continue
		}
		ops = append(ops, engine.Operation{Op: engine.OpMerge, IfMatch: m.ETag,
			Entity: engine.NewEntity(dept, m.RowKey, engine.Property{Name: prop, Value: engine.String(name)})})
	}
	if old == "" {
		return fmt.Errorf("%s/%s: no Department entity (%s)", table, dept, departmentKey)
	}
	r, err := c.Batch(ctx, table, ops)
	if err != nil {
		return fmt.Errorf("%s/%s: %d operations in one batch: %w", table, dept, len(ops), err)
	}
	fmt.Printf("%s/%s: manager %s -> %s: the Department and %d employees merged in one batch (journal position %d)\n", table, dept, old, name, len(ops)-1, r.Seq)

	// Before: as of the position before the batch. After: at least the
	// batch's position (the read waits until this host has applied it).
	pos := strconv.FormatUint(r.Seq, 10)
	reads := []struct {
		what   string
		header http.Header
	}{
		{"as of position " + strconv.FormatUint(r.Seq-1, 10), http.Header{"X-Cairn-As-Of": {strconv.FormatUint(r.Seq-1, 10)}}},
		{"at position " + pos, http.Header{"X-Cairn-Position": {pos}}},
	}
	for _, rd := range reads {
		ms, err := demo.Query[member](runtime.WithHTTPHeader(ctx, rd.header), t, demo.Where("PartitionKey eq "+demo.Quote(dept)))
		if err != nil {
			return err
		}
		names, written := map[string]int{}, map[uint64]int{}
		for _, m := range ms {
			p, err := m.position()
			if err != nil {
				return err
			}
			names[m.managerName()]++
			written[p]++
		}
		fmt.Printf("  %s: %d entities; the name %s; last written at position %s\n", rd.what, len(ms), tally(names, strconv.Quote), tally(written, position))
	}
	return nil
}
