package sdk

import (
	"fmt"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/abi"
)

// Context is one invocation: its trigger, and the store, queues and reply
// as the function sees them. It is valid only during the handler's call.
//
// Reads see the committed state of the store plus this invocation's own
// writes. Writes and messages take effect together, once, when the
// handler returns nil.
type Context struct {
	trigger *abi.Trigger
}

// Trigger is what started the invocation. It is fetched from the runner on
// the first call; it panics if the runner does not give it (a broken runner).
func (c *Context) Trigger() *abi.Trigger {
	if c.trigger == nil {
		resp, err := do(abi.OpTrigger, nil)
		if err != nil {
			panic(err)
		}
		if resp.Trigger == nil {
			panic(errNoTrigger)
		}
		c.trigger = resp.Trigger
	}
	return c.trigger
}

// Get reads one entity and its ETag; it returns (nil, "", nil) when the
// entity does not exist.
func (c *Context) Get(table, pk, rk string) (*engine.Entity, string, error) {
	resp, err := do(abi.OpGet, &abi.GetRequest{Table: table, PartitionKey: pk, RowKey: rk})
	if err != nil || resp.Entity == nil || resp.Entity.Entity == nil {
		return nil, "", err
	}
	return resp.Entity.Entity, resp.Entity.ETag, nil
}

// Query reads the entities of one partition, in RowKey order, that match
// filter (an OData filter as over HTTP; "" matches all), at most top of
// them (0: no limit but the runner's).
func (c *Context) Query(table, pk, filter string, top int) ([]abi.Entity, error) {
	resp, err := do(abi.OpQuery, &abi.QueryRequest{Table: table, PartitionKey: pk, Filter: filter, Top: top})
	return resp.Entities, err
}

// Insert adds an entity that must not exist.
func (c *Context) Insert(table string, e *engine.Entity) error {
	return c.write(table, engine.OpInsert, e, "")
}

// Replace replaces an existing entity; ifMatch is its ETag, or "*" for
// any version.
func (c *Context) Replace(table string, e *engine.Entity, ifMatch string) error {
	return c.write(table, engine.OpReplace, e, ifMatch)
}

// Merge merges e's properties into an existing entity; ifMatch is its
// ETag, or "*" for any version.
func (c *Context) Merge(table string, e *engine.Entity, ifMatch string) error {
	return c.write(table, engine.OpMerge, e, ifMatch)
}

// InsertOrReplace writes e whether or not it exists.
func (c *Context) InsertOrReplace(table string, e *engine.Entity) error {
	return c.write(table, engine.OpInsertOrReplace, e, "")
}

// InsertOrMerge inserts e, or merges its properties into the existing
// entity.
func (c *Context) InsertOrMerge(table string, e *engine.Entity) error {
	return c.write(table, engine.OpInsertOrMerge, e, "")
}

// Delete deletes an entity; ifMatch is its ETag, or "*" for any version.
func (c *Context) Delete(table, pk, rk, ifMatch string) error {
	return c.write(table, engine.OpDelete, engine.NewEntity(pk, rk), ifMatch)
}

func (c *Context) write(table string, op engine.Op, e *engine.Entity, ifMatch string) error {
	_, err := do(abi.OpWrite, &abi.WriteRequest{Table: table, Op: op.String(), Entity: abi.Entity{Entity: e}, IfMatch: ifMatch})
	return err
}

// Enqueue sends body to queue once the invocation succeeds.
func (c *Context) Enqueue(queue string, body []byte) error {
	_, err := do(abi.OpEnqueue, &abi.EnqueueRequest{Queue: queue, Body: body})
	return err
}

// Reply sets the reply of a direct invocation, or the body of an HTTP
// trigger's reply (the last call wins); other triggers have no one to
// reply to and ignore it.
func (c *Context) Reply(body []byte) error {
	_, err := do(abi.OpOutput, body)
	return err
}

// Setting returns the value of one of the function's settings or secrets
// (they share one namespace), and whether it is set. Operators set them
// with `host functions settings` and `host functions secrets`; a change
// is seen by the next invocation, without a redeploy. The read is a
// lookup in the node's memory. A secret that the node cannot open (a
// damaged record, another cluster's key) panics, failing the invocation
// with the reason; never log a secret's value.
func (c *Context) Setting(name string) (string, bool) {
	resp, err := do(abi.OpSetting, &abi.SettingRequest{Name: name})
	if err != nil {
		panic(err)
	}
	if resp.Value == nil {
		return "", false
	}
	return *resp.Value, true
}

// HTTP is the request of an HTTP trigger (its body is the trigger's
// Body), or nil for another trigger.
func (c *Context) HTTP() *abi.HTTPRequest { return c.Trigger().HTTP }

// Respond sets an HTTP trigger's reply status (0: 200, or 204 without a
// body) and headers (nil: none); Reply sets its body. The host sets
// Content-Length and the route's CORS headers itself, and refuses them
// here.
func (c *Context) Respond(status int, header map[string][]string) error {
	_, err := do(abi.OpRespond, &abi.RespondRequest{Status: status, Header: header})
	return err
}

// Logf writes a line to the node's log, with the function's name and the
// trigger's id. The runner keeps a bounded number of lines per invocation.
func (c *Context) Logf(format string, args ...any) {
	_, _ = do(abi.OpLog, []byte(fmt.Sprintf(format, args...)))
}
