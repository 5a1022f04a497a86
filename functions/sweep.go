package functions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal/values"
	"github.com/cairn-dev/cairn/projections"
)

// The large values' sweep (docs/VALUES.md): the function that keeps the
// values' store consistent with the entities that refer to them, the
// design guide's "kept consistent by a function". Two built-ins:
//
//   - values-scan, on a timer (ValueSweep.Every): lists the store and
//     enqueues on the queue values-sweep one message per value older
//     than the claim window plus the margin, and purges the chunks of
//     uploads that died before their end (values.Store.Orphans);
//   - values-sweep, on that queue: removes the value a message names if,
//     and only if, it is older than the window plus the margin and the
//     entity at its keys, read at the partition's last journal position
//     (from a view that holds the partition: another host's, on a placed
//     cluster), does not hold its reference in any property (a table or
//     an entity gone holds nothing). Idempotent: a value already gone is
//     success.
//
// After the window no write can take a value up (engine.Claims), so a
// value held by nothing then stays so, and removing it races no write.
// The margin covers the clocks' skew between nodes and a decided write's
// time to commit. An unreferenced value therefore lives at most window +
// margin + one scan interval (+ the queue's latency). Both go through the
// runner's queues: dequeue counts, back-off, the poison queue.
//
// Anyone who may enqueue can name a value to values-sweep: the rule above
// is checked whatever the message, so such a message can only remove what
// the sweep would remove anyway.

// ValueStore is what the sweep, the functions' writes and the built-in
// archive need of the values' store (journal/values.Store).
type ValueStore interface {
	List(ctx context.Context) ([]values.Info, error)
	Stat(ctx context.Context, name string) (values.Info, error)
	Delete(ctx context.Context, name string) error
	Orphans(ctx context.Context, idle time.Duration, now time.Time) (int, error)
	// Info is what the functions' writes check their references with
	// (values.Check), as the doors do.
	Info(ctx context.Context, k values.Key, id string) (values.Info, error)
	// Open and Put are what the built-in archive copies a value with
	// (archive.go): Open streams it, Put stores what it reads under a new
	// id, at most limit bytes.
	Open(ctx context.Context, k values.Key, id string) (io.ReadCloser, values.Info, error)
	Put(ctx context.Context, k values.Key, r io.Reader, limit int64, now time.Time) (values.Info, error)
}

// ValueSweep configures the sweep; it runs when Store is set.
type ValueSweep struct {
	Store ValueStore
	// LastSeq is the last journal position of a table's partition: the
	// sweep reads the entity once the view has reached it.
	LastSeq func(ctx context.Context, t *projections.Table, pk string) (uint64, error)
	// Window is the committer's claim window (engine.DefaultClaimWindow
	// when zero), Margin what is added to it before a value may go
	// (DefaultSweepMargin), Every the scan's interval (DefaultSweepEvery).
	Window, Margin, Every time.Duration
}

// The sweep's defaults.
const (
	// DefaultSweepMargin covers clock skew between nodes and the time a
	// decided write takes to commit (the committer's timeout is 30 s).
	DefaultSweepMargin = 5 * time.Minute
	// DefaultSweepEvery is the scan's interval: a scan costs a read of
	// every value's description.
	DefaultSweepEvery = 10 * time.Minute
	// sweepConcurrency is how many values-sweep messages a node runs at
	// once: each is a few requests to the store and the journal.
	sweepConcurrency = 8
	// sweepWait bounds the wait for the view to reach the partition's last
	// position.
	sweepWait = 10 * time.Second
)

// The built-ins' names and queue.
const (
	ValueScanName   = "values-scan"
	ValueSweepName  = "values-sweep"
	ValueSweepQueue = "values-sweep"
)

func (c *ValueSweep) defaults() {
	if c.Window <= 0 {
		c.Window = engine.DefaultClaimWindow
	}
	if c.Margin <= 0 {
		c.Margin = DefaultSweepMargin
	}
	if c.Every <= 0 {
		c.Every = DefaultSweepEvery
	}
}

// age is how old a value must be before it may go.
func (c *ValueSweep) age() time.Duration { return c.Window + c.Margin }

// ValueScanManifest and ValueSweepManifest are the built-ins' manifests.
func ValueScanManifest(every time.Duration) Manifest {
	m := Manifest{Name: ValueScanName, Trigger: Trigger{Every: Duration(every)}, Builtin: ValueScanName, Concurrency: 1}
	m.Defaults()
	return m
}

func ValueSweepManifest() Manifest {
	m := Manifest{Name: ValueSweepName, Trigger: Trigger{Queue: ValueSweepQueue}, Builtin: ValueSweepName,
		Concurrency: sweepConcurrency, WriteRate: MaxRate}
	m.Defaults()
	return m
}

// SweepRequest is a values-sweep message (JSON): the object name of one
// value (values.Info.Name).
type SweepRequest struct {
	Object string `json:"object"`
}

// scanValues lists the store and enqueues each value old enough to go;
// the message id names the value and the tick, so that the nodes' ticks
// enqueue each value once per scan.
func (rn *Runner) scanValues(ctx context.Context, inv *Invocation) error {
	c := rn.cfg.Values
	now := rn.now()
	infos, err := c.Store.List(ctx)
	if err != nil {
		return fmt.Errorf("values-scan: %w", err)
	}
	queued := 0
	for _, in := range infos {
		if now.Sub(in.Uploaded) < c.age() {
			continue
		}
		body, err := json.Marshal(SweepRequest{Object: in.Name})
		if err != nil {
			return err
		}
		id := "values-sweep:" + inv.Trigger().ID + ":" + in.Name
		if err := rn.queues.Publish(ctx, ValueSweepQueue, body, id, nats.Header{}); err != nil {
			return fmt.Errorf("values-scan: enqueue %s: %w", in.Name, err)
		}
		queued++
	}
	purged, err := c.Store.Orphans(ctx, c.Margin, now)
	if err != nil {
		return fmt.Errorf("values-scan: %w", err)
	}
	if queued > 0 || purged > 0 {
		inv.Log(fmt.Sprintf("values-scan: %d values listed, %d old enough to be looked at, %d dead uploads purged", len(infos), queued, purged))
	}
	return nil
}

// sweepValue removes the value a message names if it is old enough and no
// entity holds it.
func (rn *Runner) sweepValue(ctx context.Context, inv *Invocation) error {
	c := rn.cfg.Values
	var r SweepRequest
	if err := json.Unmarshal(inv.Trigger().Body, &r); err != nil || r.Object == "" {
		return fmt.Errorf(`values-sweep: the message must be JSON {"object": "<name>"}: %v`, err)
	}
	if _, _, err := values.ParseName(r.Object); err != nil {
		return fmt.Errorf("values-sweep: %w", err)
	}
	in, err := c.Store.Stat(ctx, r.Object)
	if errors.Is(err, values.ErrNotFound) {
		return nil // gone already
	}
	if err != nil {
		return fmt.Errorf("values-sweep: %w", err)
	}
	k, id := in.Key, in.ID // with the keys, from the object's metadata
	if age := rn.now().Sub(in.Uploaded); age < c.age() {
		inv.Log(fmt.Sprintf("values-sweep: %s is %v old, younger than %v: kept", in.Name, age.Round(time.Second), c.age()))
		return nil
	}
	held, err := rn.valueHeld(ctx, k, id)
	if err != nil {
		return fmt.Errorf("values-sweep: %s: %w", in.Name, err)
	}
	if held {
		return nil
	}
	if err := c.Store.Delete(ctx, in.Name); err != nil {
		return fmt.Errorf("values-sweep: %w", err)
	}
	inv.Log(fmt.Sprintf("values-sweep: %s removed (%d bytes): no entity holds it", in.Name, in.Size))
	return nil
}

// checkValues checks the references to large values that cmd (a write of
// an invocation to t) takes up against the store, as the doors do
// (values.Check): a function's write never bypasses that check.
func (rn *Runner) checkValues(ctx context.Context, t *projections.Table, cmd *engine.Command) error {
	return values.Check(ctx, rn.cfg.Values.Store, cmd, func(pk, rk string) (values.Key, error) {
		account, table := engine.SplitTableName(t.Name())
		return values.Key{Account: account, Table: table, PartitionKey: pk, RowKey: rk}, nil
	})
}

// valueHeld reports whether the entity at k holds the reference to id,
// read at its partition's last journal position.
func (rn *Runner) valueHeld(ctx context.Context, k values.Key, id string) (bool, error) {
	full := engine.FullTableName(k.Account, k.Table)
	t, ok, err := rn.views.Lookup(ctx, full)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, nil // the table is gone
	}
	if err := t.Err(); err != nil {
		return false, err
	}
	seq, err := rn.cfg.Values.LastSeq(ctx, t, k.PartitionKey)
	if err != nil {
		return false, err
	}
	if !t.Holds(k.PartitionKey) {
		// Another host's view holds the partition (a placed cluster): it
		// is read there, once that view has reached the position.
		if rn.cfg.Remote == nil {
			return false, fmt.Errorf("this node's view of %s does not hold the partition %q", full, k.PartitionKey)
		}
		e, err := rn.cfg.Remote.Get(ctx, t, k.PartitionKey, k.RowKey, seq)
		if err != nil {
			return false, err
		}
		return e != nil && engine.Holds(e.Properties, id), nil
	}
	snap, err := t.WaitPosition(ctx, seq, sweepWait)
	if err != nil {
		return false, err
	}
	e, ok := snap.Get(k.PartitionKey, k.RowKey)
	return ok && engine.Holds(e.Properties, id), nil
}
