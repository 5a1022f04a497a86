package commit

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/engine"
)

// CreateTable adds a table to the catalog, creates its journal and waits
// until this host's view of it is ready. Names are unique regardless of
// case; two hosts racing to create one name are ordered by the catalog's
// per-name sequence check, and the loser gets TableAlreadyExists. It runs
// in the caller's goroutine, under ctx; while Run is not taking commands
// it fails with ServerBusy.
func (c *Committer) CreateTable(ctx context.Context, name string) (engine.TableInfo, error) {
	if err := engine.ValidateFullTableName(name); err != nil {
		return engine.TableInfo{}, err
	}
	if err := c.views.Reserved(name); err != nil {
		return engine.TableInfo{}, err
	}
	if !c.taking() {
		return engine.TableInfo{}, errNotRunning()
	}
	for attempt := 1; ; attempt++ {
		seq, info, live := c.views.CatalogEntry(name)
		if live {
			return engine.TableInfo{}, engine.Errorf(engine.CodeTableAlreadyExists, "table %s already exists", engine.ShownTable(info.Name))
		}
		if account, _ := engine.SplitTableName(name); c.views.AccountTables(account) >= c.cfg.MaxTablesPerAccount {
			return engine.TableInfo{}, engine.Errorf(engine.CodeTableQuotaExceeded,
				"account %s already has %d tables, the most this node allows one account: delete one first", account, c.cfg.MaxTablesPerAccount)
		}
		rec := &engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: name, Time: engine.TimeToTicks(c.cfg.Now()), Shards: c.cfg.TableShards,
			// Marks came after shards: a node creating tables an older
			// host reads (no shards) makes them without marks too.
			MarksMessages: c.cfg.TableShards != 0}
		epoch, err := c.j.AppendCatalog(ctx, rec, seq)
		if errors.Is(err, engine.ErrConflict) && attempt < c.cfg.MaxAttempts {
			if err := c.catchUpCatalog(ctx); err != nil {
				return engine.TableInfo{}, err
			}
			continue
		}
		if err != nil {
			return engine.TableInfo{}, fmt.Errorf("commit: create table %s: %w", name, err)
		}
		if err := c.j.EnsureTableStream(ctx, name, epoch); err != nil {
			return engine.TableInfo{}, fmt.Errorf("commit: create table %s: %w", name, err)
		}
		if err := c.views.WaitCatalog(ctx, epoch); err != nil {
			return engine.TableInfo{}, err
		}
		if err := c.views.WaitTableReady(ctx, name, epoch); err != nil {
			return engine.TableInfo{}, err
		}
		return engine.TableInfo{Name: name, Epoch: epoch, Created: rec.Time, Shards: rec.Shards, MarksMessages: rec.MarksMessages}, nil
	}
}

// DeleteTable removes a table: one catalog record, then its journal stream
// is deleted whole. Neither step depends on how many entities the table
// holds. Like CreateTable, it runs in the caller's goroutine.
func (c *Committer) DeleteTable(ctx context.Context, name string) error {
	if err := c.views.Reserved(name); err != nil {
		return err
	}
	if !c.taking() {
		return errNotRunning()
	}
	for attempt := 1; ; attempt++ {
		seq, info, live := c.views.CatalogEntry(name)
		if !live {
			return engine.Errorf(engine.CodeTableNotFound, "table %s does not exist", engine.ShownTable(name))
		}
		rec := &engine.CatalogRecord{Kind: engine.CatalogTableDeleted, Name: info.Name, Time: engine.TimeToTicks(c.cfg.Now())}
		cseq, err := c.j.AppendCatalog(ctx, rec, seq)
		if errors.Is(err, engine.ErrConflict) && attempt < c.cfg.MaxAttempts {
			if err := c.catchUpCatalog(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("commit: delete table %s: %w", name, err)
		}
		if err := c.j.DeleteTableStream(ctx, info.Name, info.Epoch); err != nil {
			c.log.Warn("delete table stream (it is retried by every host)", "table", info.Name, "err", err)
		}
		return c.views.WaitCatalog(ctx, cseq)
	}
}

// catchUpCatalog waits until the catalog view holds everything the catalog
// stream held a moment ago.
func (c *Committer) catchUpCatalog(ctx context.Context) error {
	last, err := c.j.LastCatalogSeq(ctx)
	if err != nil {
		return err
	}
	return c.views.WaitCatalog(ctx, last)
}
