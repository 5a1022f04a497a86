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
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "denormalise:", err)
		os.Exit(1)
	}
}

const (
	table = "Staff"
	// departmentKey is the RowKey of a partition's Department entity;
	// every Employee's RowKey starts with employeePrefix.
	departmentKey  = "DEPT"
	employeePrefix = "EMP_"
)

var (
	departments = []string{"Sales", "Marketing", "Engineering"}
	managers    = []string{"Grace Evans", "Hugo Wilson", "Emma Taylor"}
	firstNames  = []string{"Anna", "Ben", "Chloe", "David", "Emma", "Farid", "Grace", "Hugo"}
	lastNames   = []string{"Jones", "Smith", "Johnson", "Brown", "Taylor", "Jordan", "Wilson", "Evans"}
)

func run(args []string) error {
	fs := flag.NewFlagSet("denormalise", flag.ContinueOnError)
	natsURL := fs.String("nats-url", nats.DefaultURL, "the host's NATS server (seed, change-manager)")
	conn := fs.String("connection-string", "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;", "the host's HTTP API")
	n := fs.Int("n", 20, "seed: employees to hire")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: denormalise [flags] seed | list <department> | change-manager <department> <name>\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("name a command")
	}
	// Flags may also follow the command ("seed -n 300").
	cmd := fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return err
	}
	rest := fs.Args()
	want := map[string]int{"seed": 0, "list": 1, "change-manager": 2}
	if w, ok := want[cmd]; !ok {
		fs.Usage()
		return fmt.Errorf("unknown command %q", cmd)
	} else if len(rest) != w {
		fs.Usage()
		return fmt.Errorf("%s takes %d arguments, not %d", cmd, w, len(rest))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c *client.Client
	if cmd != "list" {
		nc, err := nats.Connect(*natsURL)
		if err != nil {
			return err
		}
		defer nc.Close()
		c = client.New(nc)
	}
	if cmd == "seed" {
		return seed(ctx, c, *n)
	}
	svc, err := aztables.NewServiceClientFromConnectionString(*conn, nil)
	if err != nil {
		return err
	}
	t := svc.NewClient(table)
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
	for d, dept := range departments {
		ops := []engine.Operation{{Op: engine.OpInsertOrReplace, Entity: engine.NewEntity(dept, departmentKey,
			engine.Property{Name: "EntityType", Value: engine.String("Department")},
			engine.Property{Name: "Manager", Value: engine.String(managers[d])},
		)}}
		for i := 1; i <= n; i++ {
			if departments[i%len(departments)] != dept {
				continue
			}
			ops = append(ops, engine.Operation{Op: engine.OpInsertOrReplace, Entity: engine.NewEntity(dept, fmt.Sprintf("%s%06d", employeePrefix, i),
				engine.Property{Name: "EntityType", Value: engine.String("Employee")},
				engine.Property{Name: "FirstName", Value: engine.String(firstNames[i%8])},
				engine.Property{Name: "LastName", Value: engine.String(lastNames[(i+i/8)%8])},
				engine.Property{Name: "ManagerName", Value: engine.String(managers[d])},
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
	fmt.Printf("table %s: %d departments and %d employees, each employee with its manager's name (journal positions %d to %d)\n", table, len(departments), n, first, last)
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

// query returns the entities matching filter, in key order.
func query(ctx context.Context, t *aztables.Client, filter string) ([]member, error) {
	var out []member
	pager := t.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, raw := range page.Entities {
			var m member
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, err
			}
			out = append(out, m)
		}
	}
	return out, nil
}

// quote is an OData string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// employeesFilter is the key range of a department's employees: RowKeys
// from "EMP_" up to, not including, "EMP`" (the prefix with its last
// character incremented). The Department entity is outside it.
func employeesFilter(dept string) string {
	r := []rune(employeePrefix)
	r[len(r)-1]++
	return "PartitionKey eq " + quote(dept) + " and RowKey ge " + quote(employeePrefix) + " and RowKey lt " + quote(string(r))
}

// list prints a department's employees with their manager, from the
// copies: one range query, the Department entity is not read.
func list(ctx context.Context, t *aztables.Client, dept string) error {
	filter := employeesFilter(dept)
	ms, err := query(ctx, t, filter)
	if err != nil {
		return err
	}
	fmt.Printf("%s where %s:\n", table, filter)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
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
	ms, err := query(ctx, t, "PartitionKey eq "+quote(dept))
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
		ms, err := query(runtime.WithHTTPHeader(ctx, rd.header), t, "PartitionKey eq "+quote(dept))
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
