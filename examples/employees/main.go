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
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/functions"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "employees:", err)
		os.Exit(1)
	}
}

var departments = []string{"Sales", "Marketing", "Engineering"}

func run(args []string) error {
	fs := flag.NewFlagSet("employees", flag.ContinueOnError)
	natsURL := fs.String("nats-url", nats.DefaultURL, "the host's NATS server")
	conn := fs.String("connection-string", "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;", "the host's HTTP API")
	n := fs.Int("n", 12, "seed: employees to hire")
	queue := fs.String("queue", "archive-employee", "archive: the archive function's queue")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: employees [flags] seed | list | archive <department> <id>…\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("name a command")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch fs.Arg(0) {
	case "seed":
		nc, err := nats.Connect(*natsURL)
		if err != nil {
			return err
		}
		defer nc.Close()
		return seed(ctx, client.New(nc), *n)
	case "list":
		svc, err := aztables.NewServiceClientFromConnectionString(*conn, nil)
		if err != nil {
			return err
		}
		for _, table := range []string{"Current", "Archive"} {
			if err := list(ctx, svc.NewClient(table), table); err != nil {
				return err
			}
		}
		return nil
	case "archive":
		rest := fs.Args()[1:]
		if len(rest) == 0 || len(rest)%2 != 0 {
			return errors.New("archive: give pairs of <department> <id>")
		}
		nc, err := nats.Connect(*natsURL)
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		for i := 0; i < len(rest); i += 2 {
			body, _ := json.Marshal(map[string]string{"department": rest[i], "id": rest[i+1]})
			// A client enqueues by publishing to cairn.queue.<name>.
			if _, err := js.Publish(ctx, functions.QueueSubject("cairn", *queue), body); err != nil {
				return err
			}
			fmt.Printf("enqueued %s on %s\n", body, *queue)
		}
		return nil
	}
	fs.Usage()
	return fmt.Errorf("unknown command %q", fs.Arg(0))
}

// seed creates the tables (if needed) and hires n employees.
func seed(ctx context.Context, c *client.Client, n int) error {
	for _, t := range []string{"Current", "Archive"} {
		if _, err := c.CreateTable(ctx, t); err != nil && engine.ErrorCode(err) != engine.CodeTableAlreadyExists {
			return err
		}
	}
	for i := 1; i <= n; i++ {
		dept := departments[i%len(departments)]
		e := engine.NewEntity(dept, fmt.Sprintf("%06d", i),
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
	pager := t.NewListEntitiesPager(&aztables.ListEntitiesOptions{Select: to("PartitionKey,RowKey,FirstName")})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, raw := range page.Entities {
			var e struct{ PartitionKey, RowKey, FirstName string }
			if err := json.Unmarshal(raw, &e); err != nil {
				return err
			}
			fmt.Printf("  %-12s %s  %s\n", e.PartitionKey, e.RowKey, e.FirstName)
			count++
		}
	}
	fmt.Printf("  (%d)\n", count)
	return nil
}

func to[T any](v T) *T { return &v }
