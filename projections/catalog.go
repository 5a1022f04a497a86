package projections

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// entry is the catalog's knowledge of one table name.
type entry struct {
	info    engine.TableInfo
	seq     uint64 // catalog sequence of the name's last record
	live    bool
	table   *Table
	cancel  context.CancelFunc
	started bool
	ready   bool // caught up with the journal as it was when the view started
	// next is a view being prepared to replace table, holding other
	// shards (Replace): it takes over once it has caught up, while table
	// serves meanwhile.
	next       *Table
	nextCancel context.CancelFunc
}

// Lower returns the case-insensitive identity of a table name.
func Lower(name string) string { return strings.ToLower(name) }

// followCatalog replays the catalog, starts the appliers of the live tables
// once it has caught up, then follows new catalog records until ctx ends.
func (v *Views) followCatalog(ctx context.Context) error {
	start := time.Now()
	var last uint64
	err := v.retry(ctx, "read the catalog's length", "", func() error {
		var err error
		last, err = v.j.LastCatalogSeq(ctx)
		v.catalogGone.Store(errors.Is(err, journal.ErrCatalogGone))
		return err
	})
	if err != nil {
		return err
	}
	if last == 0 {
		v.catalogCaughtUp(ctx, start)
	}
	return v.retry(ctx, "follow the catalog", "", func() error {
		if v.catalogGone.Load() {
			// Found missing: it is until it is there again (restored),
			// which one request a try tells.
			_, err := v.j.LastCatalogSeq(ctx)
			if v.catalogGone.Store(errors.Is(err, journal.ErrCatalogGone)); err != nil {
				return err
			}
		}
		v.mu.RLock()
		from := v.catalogSeq + 1
		v.mu.RUnlock()
		err := v.j.WatchCatalog(ctx, from, func(seq uint64, rec *engine.CatalogRecord, pending uint64, bad error) error {
			v.applyCatalog(ctx, seq, rec, bad)
			if pending == 0 || seq >= last {
				v.catalogCaughtUp(ctx, start)
			}
			return nil
		})
		if err == nil && ctx.Err() == nil {
			err = errors.New("consumer ended")
		}
		if errors.Is(err, journal.ErrCatalogGone) {
			v.catalogGone.Store(true)
		}
		return err
	})
}

// applyCatalog applies the catalog record at seq, or skips it when it
// cannot be used (bad, from the journal: undecodable or on another name's
// subject) or is invalid: a bad table name, an unknown kind, a creation of
// a live table or a deletion of a table that is not. No Cairn host writes
// such a record (the per-name sequence check orders them), so it was put
// there by something else; it is logged and counted, and the catalog goes
// on. Either way the name's subject moved: its next record must expect seq.
func (v *Views) applyCatalog(ctx context.Context, seq uint64, rec *engine.CatalogRecord, bad error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if seq <= v.catalogSeq {
		return // delivered again after a resumed consumer
	}
	v.catalogSeq = seq
	defer v.broadcastLocked()
	var lower string
	if bad == nil {
		lower = Lower(rec.Name)
		bad = engine.ValidateCatalogRecord(rec)
	} else {
		var ce *journal.CorruptError
		if errors.As(bad, &ce) {
			lower = v.j.CatalogSubjectName(ce.Subject)
		}
	}
	e := v.entries[lower]
	live := e != nil && e.live
	switch {
	case bad != nil:
	case rec.Kind == engine.CatalogTableCreated && live:
		bad = fmt.Errorf("a creation of table %s, which exists", rec.Name)
	case rec.Kind == engine.CatalogTableDeleted && !live:
		bad = fmt.Errorf("a deletion of table %s, which does not exist", rec.Name)
	}
	if bad != nil {
		v.catalogSkipped.Add(1)
		v.log.Error("catalog record skipped", "seq", seq, "err", bad)
		if e != nil {
			e.seq = seq
		} else if lower != "" {
			v.entries[lower] = &entry{seq: seq}
		}
		return
	}
	if e == nil {
		e = &entry{}
		v.entries[lower] = e
	}
	e.seq = seq
	switch rec.Kind {
	case engine.CatalogTableCreated:
		e.info = engine.TableInfo{Name: rec.Name, Epoch: seq, Created: rec.Time, Shards: rec.Shards, MarksMessages: rec.MarksMessages}
		e.live = true
		e.table = NewTable(rec.Name, seq, v.cfg.DedupWindow)
		e.table.shards = rec.Shards
		v.placeLocked(e.table)
		v.attachDeclaredLocked(e.table)
		e.started, e.ready = false, false
		if v.catalogLoaded {
			v.startLocked(ctx, e)
		}
	case engine.CatalogTableDeleted:
		if e.cancel != nil {
			e.cancel()
		}
		if e.nextCancel != nil {
			e.nextCancel()
		}
		e.next, e.nextCancel = nil, nil
		if e.table != nil {
			e.table.Fail(engine.Errorf(engine.CodeTableNotFound, "table %s was deleted", engine.ShownTable(rec.Name)))
		}
		old := e.info
		e.live, e.table, e.cancel, e.started, e.ready = false, nil, nil, false, false
		if v.catalogLoaded && old.Epoch != 0 {
			// The host that deleted the table removes its stream; every
			// host does it too, in case that one crashed in between.
			v.wg.Add(1)
			go func() {
				defer v.wg.Done()
				if err := v.j.DeleteTableStream(ctx, old.Name, old.Epoch); err != nil && ctx.Err() == nil {
					v.log.Warn("delete table stream", "table", old.Name, "err", err)
				}
				v.removeSnapshotsOf(ctx, old.Name, old.Epoch)
			}()
		}
	}
}

// CatalogSkipped returns how many catalog records the views skipped since
// Run started because they could not be used (see applyCatalog).
func (v *Views) CatalogSkipped() uint64 { return v.catalogSkipped.Load() }

// CatalogSeq returns the catalog position the views have applied.
func (v *Views) CatalogSeq() uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.catalogSeq
}

func (v *Views) catalogCaughtUp(ctx context.Context, start time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.catalogLoaded {
		return
	}
	v.catalogLoaded = true
	if v.cfg.SnapshotDir != "" {
		// Before any applier writes: the snapshots of tables dropped
		// while the node was down go, and temporary files of a crash.
		live := map[uint64]bool{}
		for _, e := range v.entries {
			if e.live {
				live[e.info.Epoch] = true
			}
		}
		v.removeSnapshotsExcept(live)
		if v.cfg.SnapshotStore != nil {
			upTo := v.catalogSeq
			v.wg.Add(1)
			go func() {
				defer v.wg.Done()
				v.removeSharedExcept(ctx, live, upTo)
			}()
		}
	}
	n := 0
	for _, e := range v.entries {
		if e.live {
			v.startLocked(ctx, e)
			n++
		}
	}
	v.broadcastLocked()
	v.log.Info("catalog loaded", "tables", n, "catalog_seq", v.catalogSeq, "elapsed", time.Since(start).Round(time.Millisecond))
}

// WaitCatalog blocks until the catalog has reached seq.
func (v *Views) WaitCatalog(ctx context.Context, seq uint64) error {
	return v.wait(ctx, func() bool { return v.catalogSeq >= seq })
}

// Table returns the view of a live table, looked up case-insensitively.
func (v *Views) Table(name string) (*Table, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	e := v.entries[Lower(name)]
	if e == nil || !e.live {
		return nil, false
	}
	return e.table, true
}

// Lookup returns the view of a live table like Table, but when this host
// does not know the name it first catches up with the catalog: a table
// just created through another host is then found (and its view made
// ready) instead of being reported missing.
func (v *Views) Lookup(ctx context.Context, name string) (*Table, bool, error) {
	if t, ok := v.Table(name); ok {
		return t, true, nil
	}
	last, err := v.j.LastCatalogSeq(ctx)
	if err != nil {
		return nil, false, err
	}
	if err := v.WaitCatalog(ctx, last); err != nil {
		return nil, false, err
	}
	_, info, live := v.CatalogEntry(name)
	if !live {
		return nil, false, nil
	}
	if err := v.WaitTableReady(ctx, name, info.Epoch); err != nil {
		if engine.ErrorCode(err) == engine.CodeTableNotFound {
			return nil, false, nil
		}
		return nil, false, err
	}
	t, ok := v.Table(name)
	return t, ok, nil
}

// CatalogEntry returns what the catalog knows of a table name: the sequence
// of its last catalog record (0 if none), its info, and whether it is live.
func (v *Views) CatalogEntry(name string) (seq uint64, info engine.TableInfo, live bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	e := v.entries[Lower(name)]
	if e == nil {
		return 0, engine.TableInfo{}, false
	}
	return e.seq, e.info, e.live
}

// AccountTables counts the live tables of an account (engine.DevAccount:
// the tables with bare names).
func (v *Views) AccountTables(account string) int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	n := 0
	for _, e := range v.entries {
		if _, ok := engine.TableOfAccount(e.info.Name, account); ok && e.live {
			n++
		}
	}
	return n
}

// TablesOf lists the live tables of an account sorted by name, each named
// as the account sees it (without the account).
func (v *Views) TablesOf(account string) []engine.TableInfo {
	all := v.Tables()
	out := all[:0]
	for _, info := range all {
		if t, ok := engine.TableOfAccount(info.Name, account); ok {
			info.Name = t
			out = append(out, info)
		}
	}
	return out
}

// Tables lists the live tables of every account sorted by full name
// (ordinal, as Azure does).
func (v *Views) Tables() []engine.TableInfo {
	v.mu.RLock()
	out := make([]engine.TableInfo, 0, len(v.entries))
	for _, e := range v.entries {
		if e.live {
			out = append(out, e.info)
		}
	}
	v.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
