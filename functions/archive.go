package functions

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/engine"
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
	cp := &engine.Entity{PartitionKey: e.PartitionKey, RowKey: e.RowKey, Properties: e.Properties}
	if err := inv.Write(ctx, r.To, engine.Operation{Op: engine.OpInsertOrReplace, Entity: cp}); err != nil {
		return fmt.Errorf("archive: copy to %s: %w", r.To, err)
	}
	del := &engine.Entity{PartitionKey: e.PartitionKey, RowKey: e.RowKey}
	if err := inv.Write(ctx, r.From, engine.Operation{Op: engine.OpDelete, Entity: del, IfMatch: "*"}); err != nil {
		return fmt.Errorf("archive: delete from %s: %w", r.From, err)
	}
	return nil
}
