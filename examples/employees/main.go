// Command employees is the employee directory of the Azure Table design
// guide, against a running Cairn host: tables Current and Archive,
// PartitionKey = department, RowKey = employee id.
//
//	go run ./examples/employees seed [-n 20]   create the tables and hire employees (commands over NATS)
//	go run ./examples/employees list           both tables, read over HTTP with the Azure SDK
//	go run ./examples/employees archive <department> <id>…
//	                                           ask the archive-employee function to archive them
//
// It exits 1 with the node's coded error (TableNotFound when the tables are
// missing, say) or a connection error when no node runs; each call is one
// request to the node.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/examples/internal/demo"
	"github.com/cairn-dev/cairn/functions"
)

func main() { demo.Main("employees", run) }

func run(args []string) error {
	fs := demo.NewFlags("employees", "seed | list | archive <department> <id>…")
	var host demo.Host
	host.NATSFlags(fs, "the host's NATS server")
	host.HTTPFlag(fs, "the host's HTTP API")
	n := fs.Int("n", 12, "seed: employees to hire")
	queue := fs.String("queue", "archive-employee", "archive: the archive function's queue")
	cmd, rest, err := demo.Parse(fs, args, map[string]int{"seed": 0, "list": 0, "archive": demo.Any})
	if err != nil {
		return err
	}
	ctx, cancel := demo.Context()
	defer cancel()
	switch cmd {
	case "seed":
		nc, err := host.Connect()
		if err != nil {
			return err
		}
		defer nc.Close()
		return seed(ctx, client.New(nc), *n)
	case "list":
		svc, err := host.Tables()
		if err != nil {
			return err
		}
		for _, table := range []string{"Current", "Archive"} {
			if err := list(ctx, svc.NewClient(table), table); err != nil {
				return err
			}
		}
		return nil
	default:
		return archive(ctx, host, *queue, rest)
	}
}

// archive asks the archive function to archive the employees named by
// pairs of department and id: one message on its queue each. A client
// enqueues by publishing to cairn.queue.<name>.
func archive(ctx context.Context, host demo.Host, queue string, pairs []string) error {
	if len(pairs) == 0 || len(pairs)%2 != 0 {
		return errors.New("archive: give pairs of <department> <id>")
	}
	nc, err := host.Connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for i := 0; i < len(pairs); i += 2 {
		body, _ := json.Marshal(map[string]string{"department": pairs[i], "id": pairs[i+1]})
		if _, err := js.Publish(ctx, functions.QueueSubject("cairn", queue), body); err != nil {
			return err
		}
		fmt.Printf("enqueued %s on %s\n", body, queue)
	}
	return nil
}

// seed creates the tables (if needed) and hires n employees.
func seed(ctx context.Context, c *client.Client, n int) error {
	for _, t := range []string{"Current", "Archive"} {
		if _, err := c.CreateTable(ctx, t); err != nil && engine.ErrorCode(err) != engine.CodeTableAlreadyExists {
			return err
		}
	}
	for i := 1; i <= n; i++ {
		e := engine.NewEntity(demo.Department(i), demo.EmployeeID(i),
			engine.Property{Name: "Email", Value: engine.String(fmt.Sprintf("employee%d@contoso.com", i))},
			engine.Property{Name: "FirstName", Value: engine.String(fmt.Sprintf("Employee%d", i))},
			engine.Property{Name: "Hired", Value: engine.DateTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, i, 0))},
		)
		if _, err := c.InsertOrReplace(ctx, "Current", e); err != nil {
			return err
		}
	}
	fmt.Printf("tables Current and Archive; %d employees in Current\n", n)
	return nil
}

// list prints a table's employees.
func list(ctx context.Context, t *aztables.Client, name string) error {
	fmt.Printf("%s:\n", name)
	count := 0
	type employee struct{ PartitionKey, RowKey, FirstName string }
	err := demo.Each(ctx, t, &aztables.ListEntitiesOptions{Select: new("PartitionKey,RowKey,FirstName")}, func(e employee) error {
		fmt.Printf("  %-12s %s  %s\n", e.PartitionKey, e.RowKey, e.FirstName)
		count++
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("  (%d)\n", count)
	return nil
}
