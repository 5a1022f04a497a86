package main

import (
	"fmt"
	"strings"
)

// render returns the files of a new function module other than vendor/,
// by their paths in the module. The templates' only placeholders are
// {{name}} and {{goVersion}}: plain replacement rather than text/template,
// whose reflection keeps every exported method in the binary (5 MB).
func (f *functionModule) render() []moduleFile {
	fill := strings.NewReplacer("{{name}}", f.Name, "{{goVersion}}", f.GoVersion).Replace
	var mod strings.Builder
	fmt.Fprintf(&mod, "module %s\n\ngo %s\n\nrequire (\n", f.Module, f.GoVersion)
	for _, r := range f.Require {
		fmt.Fprintf(&mod, "\t%s %s", r.Path, r.Version)
		if r.Indirect {
			mod.WriteString(" // indirect")
		}
		mod.WriteString("\n")
	}
	mod.WriteString(")\n")
	return []moduleFile{
		{name: "go.mod", data: []byte(mod.String())},
		{name: "cairn.json", data: []byte(fill(manifestTemplate))},
		{name: "main.go", data: []byte(fill(mainTemplate))},
		{name: "main_test.go", data: []byte(fill(mainTestTemplate))},
		{name: "README.md", data: []byte(fill(readmeTemplate))},
	}
}

const manifestTemplate = `{
  "name": "{{name}}",
  "trigger": { "queue": "{{name}}" },
  "maxDequeueCount": 5,
  "timeout": "10s"
}
`

const mainTemplate = `// Command {{name}} is a Cairn function. It keeps a running total per
// customer: each message {"customer": "alice", "amount": 12.5} on the
// queue {{name}} (or a direct request with that body) adds the amount to
// the entity (PartitionKey "alice", RowKey "total") of the table Totals
// and replies with the new total. See README.md.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/sdk"
)

// table holds the totals; create it before the first message.
const table = "Totals"

// A module built with -buildmode=c-shared runs init functions, never main.
func init() { sdk.Handle(run) }

func main() {}

// run is one invocation. Its writes take effect only if it returns nil;
// an error fails the invocation, and a queue message is then delivered
// again (after a back-off) and, after its last attempt, moved to the
// queue {{name}}-poison.
func run(ctx *sdk.Context) error {
	t := ctx.Trigger()
	o, err := parseOrder(t.Body)
	if err != nil {
		return err
	}
	// Get sees the committed entity plus this invocation's own writes;
	// e is nil when the entity does not exist.
	e, etag, err := ctx.Get(table, o.Customer, "total")
	if err != nil {
		return err
	}
	tot := totalsOf(e).add(o.Amount)
	if e == nil {
		// Fails with EntityAlreadyExists if the entity exists by then.
		err = ctx.Insert(table, tot.entity(o.Customer))
	} else {
		// Fails with UpdateConditionNotSatisfied if the entity changed
		// since Get; the runner then runs the function again.
		err = ctx.Replace(table, tot.entity(o.Customer), etag)
	}
	if err != nil {
		return fmt.Errorf("write the total of %s: %w", o.Customer, err)
	}
	ctx.Logf("%s: %d orders, %.2f in all (dequeue count %d)", o.Customer, tot.Orders, tot.Sum, t.DequeueCount)
	return ctx.Reply(fmt.Appendf(nil, "%s: %d orders, %.2f in all", o.Customer, tot.Orders, tot.Sum))
}

// order is the message the function takes.
type order struct {
	Customer string  ` + "`json:\"customer\"`" + `
	Amount   float64 ` + "`json:\"amount\"`" + `
}

func parseOrder(body []byte) (order, error) {
	var o order
	if err := json.Unmarshal(body, &o); err != nil {
		return order{}, fmt.Errorf("want {\"customer\": \"…\", \"amount\": 12.5}: %w", err)
	}
	if o.Customer == "" {
		return order{}, errors.New("the order names no customer")
	}
	if math.IsNaN(o.Amount) || math.IsInf(o.Amount, 0) {
		return order{}, errors.New("the amount is not a number")
	}
	return o, nil
}

// totals is what the entity holds: an Int64 and a Double property.
type totals struct {
	Orders int64
	Sum    float64
}

// totalsOf reads the properties of e (nil: no orders yet). A property
// that is missing, or of another type, reads as 0.
func totalsOf(e *engine.Entity) totals {
	if e == nil {
		return totals{}
	}
	var t totals
	if v, ok := e.Get("Orders"); ok {
		t.Orders = v.Int()
	}
	if v, ok := e.Get("Sum"); ok {
		t.Sum = v.Float()
	}
	return t
}

func (t totals) add(amount float64) totals {
	return totals{Orders: t.Orders + 1, Sum: t.Sum + amount}
}

func (t totals) entity(customer string) *engine.Entity {
	return engine.NewEntity(customer, "total",
		engine.Property{Name: "Orders", Value: engine.Int64(t.Orders)},
		engine.Property{Name: "Sum", Value: engine.Double(t.Sum)},
	)
}
`

const mainTestTemplate = `package main

import (
	"testing"

	"github.com/cairn-dev/cairn/engine"
)

// The sdk's calls need the runner, so these tests cover what runs
// without it: parsing the message and the entity's properties.

func TestParseOrder(t *testing.T) {
	o, err := parseOrder([]byte(` + "`" + `{"customer": "alice", "amount": 12.5}` + "`" + `))
	if err != nil || o.Customer != "alice" || o.Amount != 12.5 {
		t.Fatalf("parseOrder: %+v, %v", o, err)
	}
	for _, bad := range []string{"", "{", ` + "`" + `{"amount": 1}` + "`" + `, ` + "`" + `{"customer": 7}` + "`" + `} {
		if _, err := parseOrder([]byte(bad)); err == nil {
			t.Errorf("parseOrder(%q) accepted it", bad)
		}
	}
}

func TestTotalsRoundTrip(t *testing.T) {
	if got := totalsOf(nil); got != (totals{}) {
		t.Fatalf("totalsOf(nil) = %+v", got)
	}
	e := totals{Orders: 2, Sum: 20}.add(2.5).entity("alice")
	if e.PartitionKey != "alice" || e.RowKey != "total" {
		t.Fatalf("keys %q %q", e.PartitionKey, e.RowKey)
	}
	if v, _ := e.Get("Orders"); v.Type() != engine.TypeInt64 {
		t.Fatalf("Orders is a %v, want Int64", v.Type())
	}
	if got := totalsOf(e); got != (totals{Orders: 3, Sum: 22.5}) {
		t.Fatalf("totalsOf = %+v", got)
	}
}
`

const readmeTemplate = `# {{name}}: a Cairn function

` + "`main.go`" + ` keeps a running total per customer in the table ` + "`Totals`" + `:
each message ` + "`" + `{"customer": "alice", "amount": 12.5}` + "`" + ` on the queue
` + "`{{name}}`" + ` (or a direct request with that body) adds the amount to the
entity (PartitionKey ` + "`alice`" + `, RowKey ` + "`total`" + `: properties ` + "`Orders`" + ` Int64
and ` + "`Sum`" + ` Double) and replies with the new total. ` + "`cairn.json`" + ` is its
manifest: its name, its queue and its delivery settings.

` + "`vendor/`" + ` holds the Cairn guest SDK (` + "`functions/sdk`" + ` and what it imports), so
the module builds with the go command alone (Go {{goVersion}} or newer): no
network, no checkout of Cairn. The go command uses ` + "`vendor/`" + ` by itself
because ` + "`vendor/modules.txt`" + ` matches ` + "`go.mod`" + `; do not run ` + "`go mod tidy`" + ` (it
would look for Cairn on the network). To take the SDK of a newer host, run
` + "`host init function`" + ` into an empty directory and copy its ` + "`vendor/`" + ` and
the ` + "`require`" + ` block of its ` + "`go.mod`" + ` over these.

docs/FUNCTIONS.md in Cairn's repository has the whole SDK.

## Test

` + "```sh" + `
go vet ./... && go test ./...
GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o /tmp/{{name}}.wasm .
` + "```" + `

The SDK's calls (` + "`ctx.Get`" + `, ` + "`ctx.Insert`" + `, …) run only inside a node, so the
tests cover the code around them.

## Get host

The ` + "`host`" + ` commands below are Cairn's binary. Install it with the go command
(it goes to ` + "`$(go env GOPATH)/bin`" + `, or ` + "`GOBIN`" + `, which must be on ` + "`PATH`" + `):

` + "```sh" + `
go install github.com/cairn-dev/cairn/cmd/host@latest   # in a checkout of Cairn: go install ./cmd/host
export PATH="$PATH:$(go env GOPATH)/bin"
host version
` + "```" + `

or take ` + "`host`" + ` from a release archive. ` + "`go run ./cmd/host`" + ` works only inside a
checkout of Cairn, not from this directory.

## Deploy and invoke

With a node running (` + "`host`" + ` in another terminal serves one on ` + "`./data`" + `;
` + "`host -data DIR`" + ` elsewhere), from this directory (the ` + "`host`" + ` commands
connect as the node's user: they read its credentials in the node's data
directory, ` + "`-data`" + ` or ` + "`CAIRN_DATA`" + `, or take ` + "`-nats-url`" + ` and
` + "`-nats-creds`" + `; ` + "`nats`" + ` is the NATS CLI):

` + "```sh" + `
export CAIRN_DATA=/path/to/the/node/data
nats req cairn.tables '{"op":"CreateTable","table":"Totals"}'
host deploy .          # builds, checks, uploads; waits for a node to load it
host enqueue {{name}} '{"customer": "alice", "amount": 12.5}'
nats req cairn.fn.{{name}} '{"customer": "alice", "amount": 5}'    # direct: "alice: 2 orders, 17.50 in all"
nats req cairn.cmd.Totals '{"op":"Retrieve","partitionKey":"alice","rowKey":"total"}'
` + "```" + `

The function's ` + "`ctx.Logf`" + ` lines are in the node's log. A message it fails on
(try ` + "`host enqueue {{name}} 'not json'`" + `) is tried 5 times with a back-off,
then moved to the queue ` + "`{{name}}-poison`" + `:

` + "```sh" + `
host poison list {{name}}
host poison show {{name}} <seq>
host poison requeue {{name}} <seq>     # or delete
host functions list
host functions rollback {{name}}
` + "```" + `
`
