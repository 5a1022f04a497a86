//go:build wasip1

// Command archive is a Cairn function: it moves an employee from table
// Current to table Archive, the "eventually consistent transaction" of the
// Azure Table design guide. Deploy it with
//
//	go run ./cmd/host deploy ./examples/archive
//
// and send it {"department":"Sales","id":"000123"} on the queue
// archive-employee. See README.md.
package main

import (
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/sdk"
)

func init() { sdk.Handle(archive) }

func main() {}

type request struct {
	Department string `json:"department"`
	ID         string `json:"id"`
	// From and To name the tables (Current and Archive when absent).
	From string `json:"from"`
	To   string `json:"to"`
}

// archive copies the employee to Archive (InsertOrReplace), then deletes
// it from Current. Each step is idempotent, and the host commits them only
// when archive returns nil, each with a command id derived from the
// message: if the host dies between the two commits, the message is
// delivered again, the copy is answered from its first commit (not applied
// twice) and the delete happens.
func archive(ctx *sdk.Context) error {
	t := ctx.Trigger()
	var r request
	if err := json.Unmarshal(t.Body, &r); err != nil || r.Department == "" || r.ID == "" {
		return fmt.Errorf(`want {"department": "…", "id": "…"}, got %q`, t.Body)
	}
	if r.From == "" {
		r.From = "Current"
	}
	if r.To == "" {
		r.To = "Archive"
	}
	e, _, err := ctx.Get(r.From, r.Department, r.ID)
	if err != nil {
		return err
	}
	if e == nil {
		ctx.Logf("employee %s/%s is not in %s: archived already (dequeue count %d)", r.Department, r.ID, r.From, t.DequeueCount)
		return nil
	}
	cp := &engine.Entity{PartitionKey: e.PartitionKey, RowKey: e.RowKey, Properties: e.Properties}
	if err := ctx.InsertOrReplace(r.To, cp); err != nil {
		return fmt.Errorf("copy to %s: %w", r.To, err)
	}
	if err := ctx.Delete(r.From, r.Department, r.ID, "*"); err != nil {
		return fmt.Errorf("delete from %s: %w", r.From, err)
	}
	ctx.Logf("archived employee %s/%s", r.Department, r.ID)
	return nil
}
