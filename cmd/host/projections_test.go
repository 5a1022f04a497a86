package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
)

// TestProjectionsCLI: deploy waits until the host serves the projection,
// list shows it, a second version replaces it, rebuild and drop do what
// they say; a file with a misspelt field or a bad definition is refused
// before anything is declared.
func TestProjectionsCLI(t *testing.T) {
	ctx := context.Background()
	h, _ := nodetest.Start(t, node.Config{})
	url, creds := h.ClientURL(), h.NATSCredsFile()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := client.New(nc)
	if _, err := c.CreateTable(ctx, "Employees"); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := c.Insert(ctx, "Employees", engine.NewEntity("Sales", fmt.Sprint(i),
			engine.Property{Name: "LastName", Value: engine.String(fmt.Sprintf("L%02d", i%7))})); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cli := func(args ...string) (string, error) {
		return runCLI(t, append([]string{"projections", "-nats-url", url, "-nats-creds", creds, "-wait", "1m"}, args...)...)
	}
	v1 := file("v1.json", `{"name":"EmployeesByLastName","source":"Employees","version":1,"kind":"index","key":["LastName"]}`)
	out, err := cli("deploy", v1)
	if err != nil || !strings.Contains(out, "EmployeesByLastName version 1: declared") || !strings.Contains(out, "served by 1 host(s)") {
		t.Fatalf("deploy: %v\n%s", err, out)
	}
	if e, _, err := c.Retrieve(ctx, "EmployeesByLastName", "L03", "Sales|3"); err != nil {
		t.Fatalf("the index right after deploy returned: %v", err)
	} else if src, _ := e.Get("SourceRowKey"); src.Str() != "3" {
		t.Fatalf("index entity %v", e)
	}
	out, err = cli("list")
	if err != nil || !strings.Contains(out, "EmployeesByLastName") || !strings.Contains(out, "active") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	v2 := file("v2.json", `[{"name":"EmployeesByLastName","source":"Employees","version":2,"kind":"index","key":["LastName"],"prefix":2}]`)
	if out, err := cli("deploy", v2); err != nil || !strings.Contains(out, "replaced version 1") || !strings.Contains(out, "served by 1 host(s)") {
		t.Fatalf("deploy version 2: %v\n%s", err, out)
	}
	if _, _, err := c.Retrieve(ctx, "EmployeesByLastName", "L0", "Sales|3"); err != nil {
		t.Fatalf("version 2 of the index: %v", err)
	}
	if out, err := cli("deploy", v1); err == nil || !strings.Contains(err.Error(), "below the declared version 2") {
		t.Fatalf("deploy of a lower version: %v\n%s", err, out)
	}
	if out, err := cli("rebuild", "EmployeesByLastName"); err != nil || !strings.Contains(out, "generation 1") || !strings.Contains(out, "served by 1 host(s)") {
		t.Fatalf("rebuild: %v\n%s", err, out)
	}
	for _, bad := range []string{
		`{"name":"X1x","source":"Employees","version":1,"kind":"index","keys":["LastName"]}`,
		`{"name":"X1x","source":"Employees","version":1,"kind":"index"}`,
		`not json`,
	} {
		if out, err := cli("deploy", file("bad.json", bad)); err == nil {
			t.Fatalf("deploy of %s: %s", bad, out)
		}
	}
	if out, err := cli("drop", "EmployeesByLastName"); err != nil || !strings.Contains(out, "dropped") {
		t.Fatalf("drop: %v\n%s", err, out)
	}
	if out, err := cli("drop", "EmployeesByLastName"); err == nil {
		t.Fatalf("drop twice: %s", out)
	}
	if out, err := cli("deploy"); err == nil {
		t.Fatalf("deploy without a file: %s", out)
	}

	// Declared before its table: deploy says so and succeeds; once the
	// table exists, the same deploy again waits until it is served.
	early := file("early.json", `{"name":"OrdersByCustomer","source":"Orders","version":1,"kind":"index","key":["Customer"]}`)
	if out, err := cli("deploy", early); err != nil || !strings.Contains(out, "its source table Orders does not exist yet") {
		t.Fatalf("deploy before the table: %v\n%s", err, out)
	}
	if _, err := c.CreateTable(ctx, "Orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Insert(ctx, "Orders", engine.NewEntity("eu", "1", engine.Property{Name: "Customer", Value: engine.String("ada")})); err != nil {
		t.Fatal(err)
	}
	if out, err := cli("deploy", early); err != nil || !strings.Contains(out, "unchanged") || !strings.Contains(out, "served by 1 host(s)") {
		t.Fatalf("deploy again once the table exists: %v\n%s", err, out)
	}
	if _, _, err := c.Retrieve(ctx, "OrdersByCustomer", "ada", "eu|1"); err != nil {
		t.Fatalf("the projection declared before its table: %v", err)
	}
}
