package pages

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/projections"
)

// A query gathered from the hosts reads, on each host, the snapshot that
// host read its first page from. The host a client asks first names the
// query with a random id (Query.Hold), which the front door puts in the
// continuation token; every host answering a page of it holds its
// snapshot under that id (snaps), and reads it again for the query's
// next pages, whichever host the client asks them of. So paging through
// a placed table that is being written sees the table as it was when
// each host first answered, as one host's pages see one snapshot. A hold
// that is gone (its 30 s passed, more were held, a shard moved to a host
// that did not answer the earlier pages) is not an error: that host
// reads its current snapshot, and the page resumes at its keys, as the
// Table service's do. A hold is a snapshot of a table the query may read
// anyway: a token naming another query's id reads that query's snapshot
// of the same table, nothing more.

// snaps are the snapshots this host holds for gathered queries, by the
// query's id.
type snaps struct {
	mu  sync.Mutex
	ttl time.Duration
	max int
	m   map[uint64]*heldSnap
}

type heldSnap struct {
	snap    *projections.Snapshot
	expires time.Time
}

func newSnaps(ttl time.Duration, max int) *snaps {
	return &snaps{ttl: ttl, max: max, m: map[uint64]*heldSnap{}}
}

// newHold returns a query's id: random, never 0.
func newHold() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}

// get returns the snapshot of table (name, epoch) held under id,
// extended.
func (h *snaps) get(id uint64, table string, epoch uint64) (*projections.Snapshot, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	x, ok := h.m[id]
	now := time.Now()
	if !ok || now.After(x.expires) || x.snap.Table != table || x.snap.Epoch != epoch {
		return nil, false
	}
	x.expires = now.Add(h.ttl)
	return x.snap, true
}

// put holds snap under id; when max are held, the one that expires
// first goes.
func (h *snaps) put(id uint64, snap *projections.Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if _, ok := h.m[id]; !ok && len(h.m) >= h.max {
		var oldest uint64
		var when time.Time
		for k, x := range h.m {
			if now.After(x.expires) {
				delete(h.m, k)
				continue
			}
			if when.IsZero() || x.expires.Before(when) {
				oldest, when = k, x.expires
			}
		}
		if len(h.m) >= h.max {
			delete(h.m, oldest)
		}
	}
	h.m[id] = &heldSnap{snap: snap, expires: now.Add(h.ttl)}
}

// release lets the snapshot held under id go.
func (h *snaps) release(id uint64) {
	h.mu.Lock()
	delete(h.m, id)
	h.mu.Unlock()
}

// sweep lets the expired holds go (Run calls it every ttl): a held
// snapshot keeps every entity it saw alive.
func (h *snaps) sweep() {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	for k, x := range h.m {
		if now.After(x.expires) {
			delete(h.m, k)
		}
	}
}
