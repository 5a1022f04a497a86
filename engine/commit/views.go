package commit

import (
	"context"

	"github.com/cairn-dev/cairn/engine"
)

// Views is what the committer needs of this host's views: the tables the
// catalog holds, and waits until the views have applied a catalog record.
// Package projections implements it (Views.ForCommitter).
type Views interface {
	// Table returns the view of a live table this host knows, looked up
	// case-insensitively, without waiting: the committer's fast path.
	Table(name string) (Table, bool)
	// Lookup returns the view of a live table, looked up
	// case-insensitively; when this host does not know the name it first
	// catches up with the catalog. A missing table is (nil, false, nil).
	Lookup(ctx context.Context, name string) (Table, bool, error)
	// CatalogEntry returns the sequence of the name's last catalog record
	// (0: none), the table's info and whether it is live.
	CatalogEntry(name string) (seq uint64, info engine.TableInfo, live bool)
	// AccountTables counts the live tables of an account (engine
	// account names; engine.DevAccount for the bare names).
	AccountTables(account string) int
	// WaitCatalog waits until the views have applied the catalog up to seq.
	WaitCatalog(ctx context.Context, seq uint64) error
	// WaitTableReady waits until the view of the table incarnation (name,
	// epoch) has caught up with its journal; it fails with TableNotFound
	// if the table is gone.
	WaitTableReady(ctx context.Context, name string, epoch uint64) error
	// Reserved returns the coded error of a name no table may be created
	// or deleted under (a declared projection's), nil for the others.
	Reserved(name string) error
}

// Table is the view of one table incarnation.
type Table interface {
	// Name is the table's name as its creator spelled it; Epoch its
	// incarnation.
	Name() string
	Epoch() uint64
	// Shards is the number of view shards its partitions are cut into
	// (engine.TableInfo.Shards).
	Shards() uint32
	// Err is the error that stopped the view, if it stopped.
	Err() error
	// Holds reports whether the view holds partition pk: a host that
	// holds only some shards of the table decides only for theirs
	// (docs/SCALE.md).
	Holds(pk string) bool
	// Partition returns the partition pk as the view shows it now, frozen:
	// what a round is decided against.
	Partition(pk string) Partition
	// VisibleSeq is the journal position the view shows now; WaitSeq
	// waits until it shows seq.
	VisibleSeq() uint64
	WaitSeq(ctx context.Context, seq uint64) error
	// NoteAppending tells the view that this host is appending rec, so that
	// it need not decode the record when it is stored; ForgetAppending
	// drops it afterwards, whatever became of the append.
	NoteAppending(rec *engine.Record)
	ForgetAppending(rec *engine.Record)
	// Appended tells the view that rec is stored at seq: it may show it
	// before its delivery.
	Appended(seq uint64, rec *engine.Record)
	// SyncHistory reads where the table's journal now starts (its
	// horizon: records below it were pruned) so that a partition whose
	// records all went is seen as empty by the journal's check (a
	// Partition's LastSeq of 0).
	SyncHistory(ctx context.Context) error
}

// Partition is one partition of a view at one journal position. It does
// not change while the committer uses it.
type Partition interface {
	// Entity is the partition's state as the decider reads it.
	engine.PartitionState
	// LastSeq is the sequence of the partition's last record (0: none):
	// the expected sequence of the next append.
	LastSeq() uint64
	// Command finds a command committed with the client id id, while the
	// view remembers it (its dedup window).
	Command(id string) (Committed, bool)
}

// Committed is where a command committed earlier sits in the journal.
type Committed struct {
	Seq          uint64 // the record's sequence
	First, Count uint32 // its events in the record
	Time         int64  // the record's time in ticks
}
