// Command entitytypes is the heterogeneous entity types pattern of the
// Azure Table design guide, against a running host: table Departments,
// PartitionKey = department, and in each department's partition one
// Department entity (RowKey DEPT) beside its Employee entities (RowKey
// EMP_000123). Each entity says its kind twice: in an EntityType property
// and in its RowKey's prefix.
//
//	go run ./examples/entitytypes seed [-n 20]                 create Departments, one batch per department (commands over NATS)
//	go run ./examples/entitytypes partition <department>       one query: both kinds of one partition
//	go run ./examples/entitytypes kind <department> <kind> [-by property|key]
//	                                                           one kind (Department or Employee), by EntityType or by RowKey
//	go run ./examples/entitytypes cost <department>            the four filters, with the entities each made the host walk
//
// The reads go over HTTP with the Azure SDK. cost reads the host's
// /metrics, which needs the operator token (-operator-token, else
// $CAIRN_OPERATOR_TOKEN, else the file data/operator.token). It exits 1
// with the node's coded error (TableNotFound before seed, say) or a
// connection error when no node runs.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/examples/internal/demo"
)

func main() { demo.Main("entitytypes", run) }

const (
	table = "Departments"
	// The two kinds: their EntityType values and their RowKeys. Every
	// Employee RowKey starts with employeePrefix; the one Department
	// entity of a partition has the RowKey departmentKey.
	kindDepartment = "Department"
	kindEmployee   = "Employee"
	departmentKey  = "DEPT"
	employeePrefix = "EMP_"
)

func run(args []string) error {
	fs := demo.NewFlags("entitytypes", "seed | partition <department> | kind <department> <Department|Employee> | cost <department>")
	var host demo.Host
	host.NATSFlags(fs, "the host's NATS server (seed)")
	host.HTTPFlag(fs, "the host's HTTP API")
	token := fs.String("operator-token", "", "cost: the host's operator token (default: $CAIRN_OPERATOR_TOKEN, else the file data/operator.token)")
	n := fs.Int("n", 20, "seed: employees to hire")
	by := fs.String("by", "property", "kind: tell the kinds apart by the EntityType property or by the RowKey")
	cmd, rest, err := demo.Parse(fs, args, map[string]int{"seed": 0, "partition": 1, "kind": 2, "cost": 1})
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
	t, err := host.Table(table)
	if err != nil {
		return err
	}
	switch cmd {
	case "partition":
		return partition(ctx, t, rest[0])
	case "kind":
		f, err := kindFilter(rest[0], rest[1], *by)
		if err != nil {
			return err
		}
		return listKind(ctx, t, f, rest[1])
	default:
		account, err := host.Account()
		if err != nil {
			return err
		}
		return cost(ctx, t, account, *token, rest[0])
	}
}

// seed creates Departments (if needed) and writes each department's
// partition in one batch: its Department entity and its employees, two
// kinds in one entity group transaction. Employee i is in department
// i mod 3; names come from short lists, so they repeat.
func seed(ctx context.Context, c *client.Client, n int) error {
	if _, err := c.CreateTable(ctx, table); err != nil && engine.ErrorCode(err) != engine.CodeTableAlreadyExists {
		return err
	}
	var first, last uint64
	for d, dept := range demo.Departments() {
		ops := []engine.Operation{{Op: engine.OpInsertOrReplace, Entity: engine.NewEntity(dept, departmentKey,
			engine.Property{Name: "EntityType", Value: engine.String(kindDepartment)},
			engine.Property{Name: "Manager", Value: engine.String(demo.Manager(d))},
			engine.Property{Name: "Floor", Value: engine.Int32(int32(d + 1))},
		)}}
		for i := 1; i <= n; i++ {
			if demo.Department(i) != dept {
				continue
			}
			first, last := demo.Name(i)
			ops = append(ops, engine.Operation{Op: engine.OpInsertOrReplace, Entity: engine.NewEntity(dept, employeePrefix+demo.EmployeeID(i),
				engine.Property{Name: "EntityType", Value: engine.String(kindEmployee)},
				engine.Property{Name: "FirstName", Value: engine.String(first)},
				engine.Property{Name: "LastName", Value: engine.String(last)},
			)})
		}
		r, err := c.Batch(ctx, table, ops)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", table, dept, err)
		}
		if first == 0 {
			first = r.Seq
		}
		last = r.Seq
	}
	fmt.Printf("table %s: %d departments and %d employees, one batch per department (journal positions %d to %d)\n", table, len(demo.Departments()), n, first, last)
	return nil
}

// entity is either kind as the example reads it: the properties of the
// other kind are simply absent.
type entity struct {
	PartitionKey, RowKey, EntityType string
	Manager                          string
	Floor                            int32
	FirstName, LastName              string
}

// describe prints an entity by its EntityType.
func (e entity) describe() string {
	switch e.EntityType {
	case kindDepartment:
		return fmt.Sprintf("manager %s, floor %d", e.Manager, e.Floor)
	case kindEmployee:
		return e.FirstName + " " + e.LastName
	}
	return "an entity of no kind this program knows"
}

// partition lists a department's partition: one query, both kinds, in
// RowKey order (DEPT sorts before EMP_).
func partition(ctx context.Context, t *aztables.Client, dept string) error {
	filter := "PartitionKey eq " + demo.Quote(dept)
	es, err := demo.Query[entity](ctx, t, demo.Where(filter))
	if err != nil {
		return err
	}
	kinds := map[string]int{}
	for _, e := range es {
		kinds[e.EntityType]++
	}
	fmt.Printf("%s where %s: %d entities, %d %s and %d %s\n", table, filter, len(es), kinds[kindDepartment], kindDepartment, kinds[kindEmployee], kindEmployee)
	tw := demo.Columns()
	for _, e := range es {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", e.RowKey, e.EntityType, e.describe())
	}
	return tw.Flush()
}

// kindFilter is the filter of one kind of a department's partition, by
// the EntityType property (checked on every entity of the partition) or
// by the RowKey (a point read for the Department, a key range for the
// Employees: the keys from "EMP_" up to, not including, "EMP`", the
// prefix with its last character incremented).
func kindFilter(dept, kind, by string) (string, error) {
	pk := "PartitionKey eq " + demo.Quote(dept)
	if kind != kindDepartment && kind != kindEmployee {
		return "", fmt.Errorf("kind %q: want %s or %s", kind, kindDepartment, kindEmployee)
	}
	switch by {
	case "property":
		return pk + " and EntityType eq " + demo.Quote(kind), nil
	case "key":
		if kind == kindDepartment {
			return pk + " and RowKey eq " + demo.Quote(departmentKey), nil
		}
		r := []rune(employeePrefix)
		r[len(r)-1]++
		return pk + " and RowKey ge " + demo.Quote(employeePrefix) + " and RowKey lt " + demo.Quote(string(r)), nil
	}
	return "", fmt.Errorf("-by %q: want property or key", by)
}

// listKind prints the entities of one kind.
func listKind(ctx context.Context, t *aztables.Client, filter, kind string) error {
	es, err := demo.Query[entity](ctx, t, demo.Where(filter))
	if err != nil {
		return err
	}
	fmt.Printf("%s where %s: %d %s\n", table, filter, len(es), kind)
	tw := demo.Columns()
	for _, e := range es {
		if e.EntityType != kind { // cannot happen: the filter chose them
			return fmt.Errorf("%s/%s is a %q, not a %s", e.PartitionKey, e.RowKey, e.EntityType, kind)
		}
		fmt.Fprintf(tw, "  %s\t%s\n", e.RowKey, e.describe())
	}
	return tw.Flush()
}

// cost runs the four filters of a department's partition and prints, for
// each, the entities returned and the entities the host walked to answer
// (cairn_query_examined_total in /metrics, read before and after). The
// counter is the host's, so another client's queries at the same time
// would count too.
func cost(ctx context.Context, t *aztables.Client, account demo.Account, token, dept string) error {
	host, err := account.HostURL()
	if err != nil {
		return err
	}
	if token, err = operatorToken(token); err != nil {
		return err
	}
	tw := demo.Columns()
	fmt.Fprintln(tw, "FILTER\tRETURNED\tEXAMINED")
	for _, kind := range []string{kindDepartment, kindEmployee} {
		for _, by := range []string{"property", "key"} {
			filter, _ := kindFilter(dept, kind, by)
			before, err := examined(ctx, host, token)
			if err != nil {
				return err
			}
			es, err := demo.Query[entity](ctx, t, demo.Where(filter))
			if err != nil {
				return err
			}
			after, err := examined(ctx, host, token)
			if err != nil {
				return err
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\n", filter, len(es), after-before)
		}
	}
	return tw.Flush()
}

// operatorToken is the flag's token, else $CAIRN_OPERATOR_TOKEN, else the
// token a host started in this directory keeps in data/operator.token.
func operatorToken(flagged string) (string, error) {
	if flagged != "" {
		return flagged, nil
	}
	if env := os.Getenv("CAIRN_OPERATOR_TOKEN"); env != "" {
		return env, nil
	}
	token, err := demo.ReadOperatorToken("data/operator.token")
	if err != nil {
		return "", fmt.Errorf("cost reads /metrics, which needs the operator token: -operator-token, $CAIRN_OPERATOR_TOKEN or %w", err)
	}
	return token, nil
}

// examined reads cairn_query_examined_total from the host's /metrics.
func examined(ctx context.Context, host, token string) (uint64, error) {
	metrics, err := demo.Metrics(ctx, host, token)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, "cairn_query_examined_total "); ok {
			return strconv.ParseUint(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("GET %s/metrics: no cairn_query_examined_total", host)
}
