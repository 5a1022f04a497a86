package functions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal/values"
)

// ArchiveRequest is the message of the built-in archive function (JSON on
// the queue "archive"): move the entity PartitionKey/RowKey from table From
// to table To.
type ArchiveRequest struct {
	From         string `json:"from"`
	To           string `json:"to"`
	PartitionKey string `json:"partitionKey"`
	RowKey       string `json:"rowKey"`
}

// Budgets of the built-in archive. Its code is the node's own, so the
// write rate that guards against a runaway module does not apply: it
// writes what its invocations in flight commit, as a client with that many
// requests in flight would (two commits per entity, each waiting until
// the view shows it).
const (
	archiveConcurrency = 16
	archiveWriteRate   = MaxRate
)

// ArchiveManifest is the built-in archive function's manifest.
func ArchiveManifest() Manifest {
	m := Manifest{Name: "archive", Trigger: Trigger{Queue: "archive"}, Builtin: "archive",
		Concurrency: archiveConcurrency, WriteRate: archiveWriteRate}
	m.Defaults()
	return m
}

// Archive is the built-in archive function, the "eventually consistent
// transaction" of the design guide: copy an entity to another table with
// InsertOrReplace, then delete it from its table if it is still there.
// Both steps are idempotent: a message delivered again after a crash
// between them finds the entity in both tables, copies it again (answered
// from the first commit: the same command id) and deletes it; a message
// delivered after both finds nothing to do and succeeds.
//
// The two writes are in two tables, so they are two commits, in the order
// they are made: the copy first, so that a crash never loses the entity.
//
// Large values (docs/VALUES.md): a reference belongs to its entity, so the
// copy cannot hold the original's. Each value the entity refers to is
// copied first, streamed from the store under the source's key into a new
// value under the destination's (at most Config.MaxValue bytes), and the
// copy holds the new references. The original's values are freed by the
// sweep once the delete is committed, within its bound (window + margin +
// one scan). A message delivered again after a crash between the copy and
// the delete copies the values again, under new ids, and its copy is
// answered from the first commit: those second copies are referenced by
// nothing, and the sweep removes them within the same bound, as it
// removes the copies of an invocation that fails before its commits. A
// reference whose value is gone from the store (removed behind the node's
// back) fails the invocation, every time: the message reaches the poison
// queue after its dequeue count, and both entities stay as they were. The
// cost: each value is read and written once more, chunk by chunk.
func Archive(ctx context.Context, inv *Invocation) error {
	var r ArchiveRequest
	if err := json.Unmarshal(inv.Trigger().Body, &r); err != nil {
		return fmt.Errorf(`archive: the message must be JSON {"from","to","partitionKey","rowKey"}: %v`, err)
	}
	if r.From == "" || r.To == "" {
		return fmt.Errorf(`archive: the message needs "from" and "to" tables`)
	}
	// Anyone who may enqueue can reach the queue "archive": the development
	// user, and every writer of any account through an outbox message. The
	// built-in therefore moves the development account's tables only, as
	// that user could itself; another account's table ("acme.T") would let
	// them read or write a namespace they have no right to.
	for _, name := range []string{r.From, r.To} {
		if strings.Contains(name, ".") {
			return fmt.Errorf("archive: table %q belongs to another storage account: the built-in archive moves the development account's tables only", name)
		}
	}
	e, _, err := inv.Get(ctx, r.From, r.PartitionKey, r.RowKey)
	if err != nil {
		return fmt.Errorf("archive: read %s: %w", r.From, err)
	}
	if e == nil {
		inv.Log(fmt.Sprintf("archive: %s/%q/%q is not there: already archived, or never was", r.From, r.PartitionKey, r.RowKey))
		return nil
	}
	props, err := copyValues(ctx, inv, r.From, r.To, e)
	if err != nil {
		return err
	}
	cp := &engine.Entity{PartitionKey: e.PartitionKey, RowKey: e.RowKey, Properties: props}
	if err := inv.Write(ctx, r.To, engine.Operation{Op: engine.OpInsertOrReplace, Entity: cp}); err != nil {
		return fmt.Errorf("archive: copy to %s: %w", r.To, err)
	}
	del := &engine.Entity{PartitionKey: e.PartitionKey, RowKey: e.RowKey}
	if err := inv.Write(ctx, r.From, engine.Operation{Op: engine.OpDelete, Entity: del, IfMatch: "*"}); err != nil {
		return fmt.Errorf("archive: delete from %s: %w", r.From, err)
	}
	return nil
}

// copyValues returns e's properties for its copy in table to: each
// reference to a large value replaced by one to a copy of the value, put
// under the key of the entity in to. An entity holding no reference
// returns its own properties (nothing is copied, the store is not asked).
// A value two properties hold is copied once.
func copyValues(ctx context.Context, inv *Invocation, from, to string, e *engine.Entity) ([]engine.Property, error) {
	if !slices.ContainsFunc(e.Properties, func(p engine.Property) bool { return engine.IsValueRef(p.Value) }) {
		return e.Properties, nil
	}
	store := inv.runner.cfg.Values.Store
	if store == nil {
		return nil, fmt.Errorf("archive: %s/%q/%q holds a large value's reference, and this node keeps no large values", from, e.PartitionKey, e.RowKey)
	}
	// The store names a value by the table as it was created (the view's
	// name), not as the message spells it.
	src, err := valueKey(ctx, inv, from, e)
	if err != nil {
		return nil, err
	}
	dst, err := valueKey(ctx, inv, to, e)
	if err != nil {
		return nil, err
	}
	props := slices.Clone(e.Properties)
	copied := map[string]string{} // id in from -> reference in to
	for i, p := range props {
		if !engine.IsValueRef(p.Value) {
			continue
		}
		id, _, err := engine.ParseValueRef(p.Value)
		if err != nil {
			return nil, fmt.Errorf("archive: %s/%q/%q property %s: %w", from, e.PartitionKey, e.RowKey, p.Name, err)
		}
		ref, ok := copied[id]
		if !ok {
			in, err := copyValue(ctx, inv.runner, store, src, dst, id)
			if err != nil {
				return nil, fmt.Errorf("archive: %s/%q/%q property %s: %w", from, e.PartitionKey, e.RowKey, p.Name, err)
			}
			ref = engine.ValueRef(in.ID)
			copied[id] = ref
		}
		props[i].Value = engine.String(ref)
	}
	return props, nil
}

// valueKey is the store's key of e's values in table.
func valueKey(ctx context.Context, inv *Invocation, table string, e *engine.Entity) (values.Key, error) {
	t, err := inv.lookup(ctx, table)
	if err != nil {
		return values.Key{}, fmt.Errorf("archive: %s: %w", table, err)
	}
	account, name := engine.SplitTableName(t.Name())
	return values.Key{Account: account, Table: name, PartitionKey: e.PartitionKey, RowKey: e.RowKey}, nil
}

// copyValue streams the value id of src into a new value of dst, at most
// the node's value limit; a value that is not in the store fails with
// values.ErrNotFound.
func copyValue(ctx context.Context, rn *Runner, store ValueStore, src, dst values.Key, id string) (values.Info, error) {
	r, _, err := store.Open(ctx, src, id)
	if errors.Is(err, values.ErrNotFound) {
		return values.Info{}, fmt.Errorf("the large value %s is not in the store (removed from it behind the node's back?): an entity holding a reference to nothing is not archived: %w",
			engine.ValueRef(id), err)
	}
	if err != nil {
		return values.Info{}, fmt.Errorf("copy the large value %s: %w", engine.ValueRef(id), err)
	}
	defer r.Close()
	in, err := store.Put(ctx, dst, r, rn.cfg.MaxValue, rn.now())
	if err != nil {
		return values.Info{}, fmt.Errorf("copy the large value %s: %w", engine.ValueRef(id), err)
	}
	return in, nil
}
