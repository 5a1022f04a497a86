// Package projections is Cairn's read model: views materialised from the
// journal. A Table holds one table incarnation in copy-on-write B-trees
// (entities by PartitionKey and RowKey, partitions with their load, recent
// command ids); its applier goroutine is the only writer and publishes
// immutable Snapshots that any number of readers use without locks. Views
// follows the catalog and runs one applier per live table.
//
// A view applies records strictly in journal order. A record it cannot
// decode stops that view with an error (commands on the table then fail)
// rather than skipping history.
package projections
