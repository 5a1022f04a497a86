package query

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/projections"
)

// Holds keeps the snapshots of queries that have more pages, so that every
// page of a query reads the same snapshot: paging through a table that is
// being written sees neither duplicates nor gaps. Both front doors keep
// one (their continuation tokens carry the hold's id). A hold lasts ttl
// after its last page; at most max are held (the oldest goes first). A
// released hold is not an error: the query resumes at its keys on the
// current snapshot (still no duplicates or gaps in key order, but it may
// then see writes made after its first page). Expired holds are released
// by a timer, whether or not further queries come: a held snapshot keeps
// every entity it saw alive.
//
// What it costs: a map entry per hold; Put scans the holds only when max
// are held. Safe for concurrent use.
type Holds struct {
	mu    sync.Mutex
	ttl   time.Duration
	max   int
	next  uint64
	m     map[uint64]*held
	sweep *time.Timer // pending release of expired holds; nil when none
}

type held struct {
	snap    *projections.Snapshot
	expires time.Time
}

// NewHolds returns an empty set of holds, each kept ttl after its last
// use, at most max at once. Ids start at random, so that a token of
// another node (or of before a restart) is unlikely to name a hold here.
func NewHolds(ttl time.Duration, max int) *Holds {
	return &Holds{ttl: ttl, max: max, next: rand.Uint64() >> 24, m: map[uint64]*held{}}
}

// Get returns the held snapshot id of table (name, epoch) and extends it.
func (h *Holds) Get(id uint64, table string, epoch uint64) (*projections.Snapshot, bool) {
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

// Put holds snap under id (a new id when id is 0) and returns the id.
func (h *Holds) Put(id uint64, snap *projections.Snapshot) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if x, ok := h.m[id]; ok && x.snap == snap {
		x.expires = now.Add(h.ttl)
		return id
	}
	h.makeRoomLocked(now)
	h.next++
	h.m[h.next] = &held{snap: snap, expires: now.Add(h.ttl)}
	h.scheduleLocked(now)
	return h.next
}

// PutAt holds snap under id, an id the caller chose (a gathered query's,
// the same on every host), in place of what id held.
func (h *Holds) PutAt(id uint64, snap *projections.Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if _, ok := h.m[id]; !ok {
		h.makeRoomLocked(now)
	}
	h.m[id] = &held{snap: snap, expires: now.Add(h.ttl)}
	h.scheduleLocked(now)
}

// makeRoomLocked drops the expired holds when max are held and, if none
// was, the one that expires first.
func (h *Holds) makeRoomLocked(now time.Time) {
	if len(h.m) >= h.max {
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
}

// scheduleLocked arms the timer that releases expired holds, for the
// earliest expiry, unless it is armed already or nothing is held.
func (h *Holds) scheduleLocked(now time.Time) {
	if h.sweep != nil || len(h.m) == 0 {
		return
	}
	var earliest time.Time
	for _, x := range h.m {
		if earliest.IsZero() || x.expires.Before(earliest) {
			earliest = x.expires
		}
	}
	h.sweep = time.AfterFunc(earliest.Sub(now)+time.Millisecond, h.releaseExpired)
}

// releaseExpired drops the expired holds and arms the timer for the next.
func (h *Holds) releaseExpired() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sweep = nil
	now := time.Now()
	for k, x := range h.m {
		if now.After(x.expires) {
			delete(h.m, k)
		}
	}
	h.scheduleLocked(now)
}

// Release drops the hold of a query that has returned its last page.
func (h *Holds) Release(id uint64) {
	h.mu.Lock()
	delete(h.m, id)
	h.mu.Unlock()
}

// Count returns the number of snapshots held.
func (h *Holds) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}
