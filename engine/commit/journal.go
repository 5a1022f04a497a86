package commit

import (
	"context"

	"github.com/cairn-dev/cairn/engine"
)

// Journal is what the committer needs of the journal: conditional appends
// to a partition and to the catalog, reads of where a partition stands,
// and the creation and deletion of a table's journal. Package journal
// implements it on JetStream.
//
// Appends fail with errors wrapping engine.ErrConflict, engine.ErrTableGone
// or engine.ErrNotSent when nothing was stored; any other error leaves the
// outcome unknown.
type Journal interface {
	// Append stores rec on its partition if the partition's last sequence
	// is still expectLast (0: no record yet) and returns its sequence.
	// A table incarnation is named by its full name, its epoch and its
	// number of shards (engine.TableInfo), which together name its
	// partitions' subjects.
	Append(ctx context.Context, table string, epoch uint64, shards uint32, rec *engine.Record, expectLast uint64) (uint64, error)
	// LastSeq returns the sequence of the partition's last record (0: none).
	LastSeq(ctx context.Context, table string, epoch uint64, shards uint32, pk string) (uint64, error)
	// NextRecord returns the sequence and nonce of the partition's first
	// record after sequence after (seq 0: none yet).
	NextRecord(ctx context.Context, table string, epoch uint64, shards uint32, pk string, after uint64) (seq uint64, nonce string, err error)

	// AppendCatalog stores a catalog record if the name's last catalog
	// sequence is still expectLast and returns its sequence (a created
	// table's epoch).
	AppendCatalog(ctx context.Context, rec *engine.CatalogRecord, expectLast uint64) (uint64, error)
	// LastCatalogSeq returns the catalog's last sequence.
	LastCatalogSeq(ctx context.Context) (uint64, error)
	// EnsureTableStream creates a table incarnation's journal unless it
	// exists.
	EnsureTableStream(ctx context.Context, table string, epoch uint64) error
	// DeleteTableStream deletes a table incarnation's journal; one already
	// gone is not an error.
	DeleteTableStream(ctx context.Context, table string, epoch uint64) error
	// Probe asks this host's readers of the table to read its records up
	// to seq from a replica if their consumer has not delivered them: a
	// record stored that the view does not show soon.
	Probe(table string, epoch uint64, seq uint64)
}
