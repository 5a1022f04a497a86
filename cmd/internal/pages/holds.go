package pages

import "math/rand/v2"

// A query gathered from the hosts reads, on each host, the snapshot that
// host read its first page from. The host a client asks first names the
// query with a random id (Query.Hold), which the front door puts in the
// continuation token; every host answering a page of it holds its
// snapshot under that id (Service.holds, query.Holds.PutAt), and reads
// it again for the query's next pages, whichever host the client asks
// them of. So paging through a placed table that is being written sees
// the table as it was when each host first answered, as one host's
// pages see one snapshot. A hold that is gone (its 30 s passed, more
// were held, a shard moved to a host that did not answer the earlier
// pages) is not an error: that host reads its current snapshot, and the
// page resumes at its keys, as the Table service's do. A hold is a
// snapshot of a table the query may read anyway: a token naming another
// query's id reads that query's snapshot of the same table, nothing
// more.

// newHold returns a query's id: random, never 0.
func newHold() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}
