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
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "entitytypes:", err)
		os.Exit(1)
	}
}

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

var (
	departments = []string{"Sales", "Marketing", "Engineering"}
	managers    = []string{"Grace Evans", "Hugo Wilson", "Emma Taylor"}
	firstNames  = []string{"Anna", "Ben", "Chloe", "David", "Emma", "Farid", "Grace", "Hugo"}
	lastNames   = []string{"Jones", "Smith", "Johnson", "Brown", "Taylor", "Jordan", "Wilson", "Evans"}
)

func run(args []string) error {
	fs := flag.NewFlagSet("entitytypes", flag.ContinueOnError)
	natsURL := fs.String("nats-url", nats.DefaultURL, "the host's NATS server (seed)")
	conn := fs.String("connection-string", "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;", "the host's HTTP API")
	token := fs.String("operator-token", "", "cost: the host's operator token (default: $CAIRN_OPERATOR_TOKEN, else the file data/operator.token)")
	n := fs.Int("n", 20, "seed: employees to hire")
	by := fs.String("by", "property", "kind: tell the kinds apart by the EntityType property or by the RowKey")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: entitytypes [flags] seed | partition <department> | kind <department> <Department|Employee> | cost <department>\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("name a command")
	}
	// Flags may also follow the command ("kind Sales Employee -by key").
	cmd := fs.Arg(0)
	var rest []string
	for more := fs.Args()[1:]; ; more = fs.Args()[1:] {
		if err := fs.Parse(more); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
	}
	want := map[string]int{"seed": 0, "partition": 1, "kind": 2, "cost": 1}
	if w, ok := want[cmd]; !ok {
		fs.Usage()
		return fmt.Errorf("unknown command %q", cmd)
	} else if len(rest) != w {
		fs.Usage()
		return fmt.Errorf("%s takes %d arguments, not %d", cmd, w, len(rest))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if cmd == "seed" {
		nc, err := nats.Connect(*natsURL)
		if err != nil {
			return err
		}
		defer nc.Close()
		return seed(ctx, client.New(nc), *n)
	}
	svc, err := aztables.NewServiceClientFromConnectionString(*conn, nil)
	if err != nil {
		return err
	}
	t := svc.NewClient(table)
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
		return cost(ctx, t, *conn, *token, rest[0])
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
	for d, dept := range departments {
		ops := []engine.Operation{{Op: engine.OpInsertOrReplace, Entity: engine.NewEntity(dept, departmentKey,
			engine.Property{Name: "EntityType", Value: engine.String(kindDepartment)},
			engine.Property{Name: "Manager", Value: engine.String(managers[d])},
			engine.Property{Name: "Floor", Value: engine.Int32(int32(d + 1))},
		)}}
		for i := 1; i <= n; i++ {
			if departments[i%len(departments)] != dept {
				continue
			}
			ops = append(ops, engine.Operation{Op: engine.OpInsertOrReplace, Entity: engine.NewEntity(dept, fmt.Sprintf("%s%06d", employeePrefix, i),
				engine.Property{Name: "EntityType", Value: engine.String(kindEmployee)},
				engine.Property{Name: "FirstName", Value: engine.String(firstNames[i%8])},
				engine.Property{Name: "LastName", Value: engine.String(lastNames[(i+i/8)%8])},
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
	fmt.Printf("table %s: %d departments and %d employees, one batch per department (journal positions %d to %d)\n", table, len(departments), n, first, last)
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

// query returns the entities matching filter, in key order.
func query(ctx context.Context, t *aztables.Client, filter string) ([]entity, error) {
	var out []entity
	pager := t.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, raw := range page.Entities {
			var e entity
			if err := json.Unmarshal(raw, &e); err != nil {
				return nil, err
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// quote is an OData string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// partition lists a department's partition: one query, both kinds, in
// RowKey order (DEPT sorts before EMP_).
func partition(ctx context.Context, t *aztables.Client, dept string) error {
	filter := "PartitionKey eq " + quote(dept)
	es, err := query(ctx, t, filter)
	if err != nil {
		return err
	}
	kinds := map[string]int{}
	for _, e := range es {
		kinds[e.EntityType]++
	}
	fmt.Printf("%s where %s: %d entities, %d %s and %d %s\n", table, filter, len(es), kinds[kindDepartment], kindDepartment, kinds[kindEmployee], kindEmployee)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
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
	pk := "PartitionKey eq " + quote(dept)
	if kind != kindDepartment && kind != kindEmployee {
		return "", fmt.Errorf("kind %q: want %s or %s", kind, kindDepartment, kindEmployee)
	}
	switch by {
	case "property":
		return pk + " and EntityType eq " + quote(kind), nil
	case "key":
		if kind == kindDepartment {
			return pk + " and RowKey eq " + quote(departmentKey), nil
		}
		r := []rune(employeePrefix)
		r[len(r)-1]++
		return pk + " and RowKey ge " + quote(employeePrefix) + " and RowKey lt " + quote(string(r)), nil
	}
	return "", fmt.Errorf("-by %q: want property or key", by)
}

// listKind prints the entities of one kind.
func listKind(ctx context.Context, t *aztables.Client, filter, kind string) error {
	es, err := query(ctx, t, filter)
	if err != nil {
		return err
	}
	fmt.Printf("%s where %s: %d %s\n", table, filter, len(es), kind)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
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
func cost(ctx context.Context, t *aztables.Client, conn, token, dept string) error {
	metrics, err := metricsURL(conn)
	if err != nil {
		return err
	}
	if token, err = operatorToken(token); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FILTER\tRETURNED\tEXAMINED")
	for _, kind := range []string{kindDepartment, kindEmployee} {
		for _, by := range []string{"property", "key"} {
			filter, _ := kindFilter(dept, kind, by)
			before, err := examined(ctx, metrics, token)
			if err != nil {
				return err
			}
			es, err := query(ctx, t, filter)
			if err != nil {
				return err
			}
			after, err := examined(ctx, metrics, token)
			if err != nil {
				return err
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\n", filter, len(es), after-before)
		}
	}
	return tw.Flush()
}

// metricsURL is the host's /metrics, beside the account's endpoint in the
// connection string (TableEndpoint=http://127.0.0.1:10002/devstoreaccount1).
func metricsURL(conn string) (string, error) {
	for _, part := range strings.Split(conn, ";") {
		if v, ok := strings.CutPrefix(part, "TableEndpoint="); ok {
			u, err := url.Parse(v)
			if err != nil {
				return "", fmt.Errorf("connection string: TableEndpoint: %w", err)
			}
			u.Path = "/metrics"
			return u.String(), nil
		}
	}
	return "", errors.New("connection string: no TableEndpoint")
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
	b, err := os.ReadFile("data/operator.token")
	if err != nil {
		return "", fmt.Errorf("cost reads /metrics, which needs the operator token: -operator-token, $CAIRN_OPERATOR_TOKEN or %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// examined reads cairn_query_examined_total from the host's /metrics.
func examined(ctx context.Context, metrics, token string) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metrics, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", metrics, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "cairn_query_examined_total "); ok {
			return strconv.ParseUint(v, 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("GET %s: no cairn_query_examined_total", metrics)
}
