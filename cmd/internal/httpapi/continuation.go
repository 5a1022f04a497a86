package httpapi

import (
	"encoding/base64"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections"
	"github.com/cairn-dev/cairn/projections/query"
)

// token is a query's continuation. Azure clients treat the two headers as
// opaque and send them back as NextPartitionKey and NextRowKey:
//
//	NextPartitionKey = "1!" + a|d + "!" + hold id + "!" + base64url(PartitionKey)
//	NextRowKey       = "1!" + base64url(RowKey)
//
// The keys are those of the first entity not yet returned; the hold id
// names the snapshot the earlier pages were read from; a|d is the order.
// A query as of a journal position (X-Cairn-As-Of) carries the position
// too, so that its later pages read the past even when its hold was
// released (or the client does not send the header again):
//
//	NextPartitionKey = "2!" + a|d + "!" + hold id + "!" + position + "!" + base64url(PartitionKey)
//
// (hold id and position in base 36).
type token struct {
	hold uint64
	desc bool
	asOf uint64 // the as-of position, 0 for a query of the present
	from query.Continuation
}

const (
	tokenVersion     = "1"
	asOfTokenVersion = "2"
)

var b64 = base64.RawURLEncoding

func (t token) format() (npk, nrk string) {
	dir := "a"
	if t.desc {
		dir = "d"
	}
	npk = tokenVersion + "!" + dir + "!" + strconv.FormatUint(t.hold, 36) + "!"
	if t.asOf != 0 {
		npk = asOfTokenVersion + npk[len(tokenVersion):] + strconv.FormatUint(t.asOf, 36) + "!"
	}
	npk += b64.EncodeToString([]byte(t.from.PartitionKey))
	nrk = tokenVersion + "!" + b64.EncodeToString([]byte(t.from.RowKey))
	return npk, nrk
}

func badToken(format string, args ...any) error {
	return engine.Errorf(codeInvalidContinuation, "the continuation token (NextPartitionKey, NextRowKey) "+format+": pass back the values of the x-ms-continuation-* headers unchanged", args...)
}

// parseToken parses the continuation a client sent back.
func parseToken(npk, nrk string) (token, error) {
	var t token
	parts := strings.Split(npk, "!")
	if !(len(parts) == 4 && parts[0] == tokenVersion || len(parts) == 5 && parts[0] == asOfTokenVersion) || (parts[1] != "a" && parts[1] != "d") {
		return t, badToken("is not one this host issued")
	}
	t.desc = parts[1] == "d"
	var err error
	if t.hold, err = strconv.ParseUint(parts[2], 36, 64); err != nil {
		return t, badToken("is damaged")
	}
	if len(parts) == 5 {
		if t.asOf, err = strconv.ParseUint(parts[3], 36, 64); err != nil || t.asOf == 0 {
			return t, badToken("is damaged")
		}
		parts = append(parts[:3], parts[4])
	}
	pk, err := b64.DecodeString(parts[3])
	if err != nil {
		return t, badToken("is damaged")
	}
	v, rk, ok := strings.Cut(nrk, "!")
	if !ok || v != tokenVersion {
		return t, badToken("has no valid NextRowKey")
	}
	r, err := b64.DecodeString(rk)
	if err != nil {
		return t, badToken("has a damaged NextRowKey")
	}
	t.from = query.Continuation{PartitionKey: string(pk), RowKey: string(r)}
	return t, nil
}

// holds keeps the snapshots of queries that have more pages, so that every
// page of a query reads the same snapshot: paging through a table that is
// being written sees neither duplicates nor gaps. A hold lasts ttl after
// its last page; at most max are held (the oldest goes first). A released
// hold is not an error: the query resumes at its keys on the current
// snapshot (still no duplicates or gaps in key order, but it may then see
// writes made after its first page). Expired holds are released by a
// timer, whether or not further queries come: a held snapshot keeps every
// entity it saw alive.
type holds struct {
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

func newHolds(ttl time.Duration, max int) *holds {
	return &holds{ttl: ttl, max: max, next: rand.Uint64() >> 24, m: map[uint64]*held{}}
}

// get returns the held snapshot id of table (name, epoch) and extends it.
func (h *holds) get(id uint64, table string, epoch uint64) (*projections.Snapshot, bool) {
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

// put holds snap under id (a new id when id is 0) and returns the id.
func (h *holds) put(id uint64, snap *projections.Snapshot) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if x, ok := h.m[id]; ok && x.snap == snap {
		x.expires = now.Add(h.ttl)
		return id
	}
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
	h.next++
	h.m[h.next] = &held{snap: snap, expires: now.Add(h.ttl)}
	h.scheduleLocked(now)
	return h.next
}

// scheduleLocked arms the timer that releases expired holds, for the
// earliest expiry, unless it is armed already or nothing is held.
func (h *holds) scheduleLocked(now time.Time) {
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
func (h *holds) releaseExpired() {
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

// release drops the hold of a query that has returned its last page.
func (h *holds) release(id uint64) {
	h.mu.Lock()
	delete(h.m, id)
	h.mu.Unlock()
}

// count returns the number of snapshots held.
func (h *holds) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}
