package outbox

import (
	"context"
	"errors"
	"hash/fnv"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// shardOf is the shard of a table incarnation's stream.
func shardOf(stream string, shards int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(stream))
	return int(h.Sum32() % uint32(shards))
}

// leases holds this node's shard leases and the bucket's view of the
// others: a watcher mirrors the lease and heartbeat keys, and tick
// renews, takes and gives back leases by compare-and-set.
type leases struct {
	kv  jetstream.KeyValue
	cfg *Config

	mu     sync.Mutex
	mirror map[string]seenEntry // lease.* and node.* as last seen
	held   map[int]heldLease
}

// seenEntry is a key's last value and when this node received it. The
// age of a lease or a heartbeat is measured from its receipt, on this
// node's clock alone: the server stamps entries with its own, and a node
// whose clock ran ahead of the server's by more than the lease's life
// took every live lease for abandoned, and relayed beside its holder.
// A value read at the watch's start counts as just received: an
// abandoned lease is then taken one LeaseTTL later than it could be.
type seenEntry struct {
	jetstream.KeyValueEntry
	seen time.Time
}

type heldLease struct {
	rev     uint64
	renewed time.Time // local time of the last successful renewal
}

func newLeases(kv jetstream.KeyValue, cfg *Config) *leases {
	return &leases{kv: kv, cfg: cfg, mirror: map[string]seenEntry{}, held: map[int]heldLease{}}
}

// watch mirrors the lease, heartbeat and mark keys until ctx ends. ready
// is closed once the initial values are in.
func (l *leases) watch(ctx context.Context, ready chan<- struct{}) error {
	w, err := l.kv.WatchFiltered(ctx, []string{"lease.>", "node.>", markKey(">")})
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	first := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("outbox: lease watcher stopped")
			}
			if e == nil {
				if first {
					first = false
					close(ready)
				}
				continue
			}
			l.note(e, time.Now())
		}
	}
}

// note takes an update of the watch, received at now.
func (l *leases) note(e jetstream.KeyValueEntry, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.Operation() == jetstream.KeyValuePut {
		l.mirror[e.Key()] = seenEntry{e, now}
	} else {
		delete(l.mirror, e.Key())
	}
}

// marked reports whether a table incarnation's journal is marked as
// carrying outbox messages (Marker).
func (l *leases) marked(stream string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.mirror[markKey(stream)]
	return ok
}

// Held returns the shards this node holds a valid lease on.
func (l *leases) Held(now time.Time) map[int]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int]bool, len(l.held))
	for s, h := range l.held {
		// Stop relaying before anyone else may take the lease over.
		if now.Sub(h.renewed) < l.cfg.LeaseTTL-l.cfg.Renew {
			out[s] = true
		}
	}
	return out
}

// live counts the nodes whose heartbeat is fresh.
func (l *leases) liveLocked(now time.Time) int {
	n := 0
	for k, e := range l.mirror {
		if len(k) > 5 && k[:5] == "node." && now.Sub(e.seen) < l.cfg.LeaseTTL {
			n++
		}
	}
	return max(n, 1)
}

// tick heartbeats, renews the leases held, gives back those beyond this
// node's share and takes free or expired ones up to it. release is called
// before a lease is given back, so that the shard's relaying has stopped
// first.
func (l *leases) tick(ctx context.Context, release func(shard int)) {
	cfg := l.cfg
	if _, err := l.kv.Put(ctx, memberKey(cfg.NodeID), []byte(cfg.NodeID)); err != nil {
		cfg.Log.Warn("outbox: heartbeat failed", "err", err)
	}
	now := time.Now()
	l.mu.Lock()
	live := l.liveLocked(now)
	target := (cfg.Shards + live - 1) / live
	held := make([]int, 0, len(l.held))
	for s := range l.held {
		held = append(held, s)
	}
	l.mu.Unlock()
	sort.Ints(held)
	for i, s := range held {
		l.mu.Lock()
		h := l.held[s]
		l.mu.Unlock()
		if i >= target {
			release(s)
			l.mu.Lock()
			delete(l.held, s)
			l.mu.Unlock()
			_ = l.kv.Delete(ctx, leaseKey(s), jetstream.LastRevision(h.rev))
			continue
		}
		rev, err := l.kv.Update(ctx, leaseKey(s), []byte(cfg.NodeID), h.rev)
		l.mu.Lock()
		if err == nil {
			l.held[s] = heldLease{rev: rev, renewed: now}
		} else if errors.Is(err, jetstream.ErrKeyExists) || time.Since(h.renewed) > cfg.LeaseTTL {
			// Someone else holds it now (or it is long expired): give up.
			delete(l.held, s)
			l.mu.Unlock()
			release(s)
			cfg.Log.Warn("outbox: lost a shard lease", "shard", s, "err", err)
			continue
		}
		l.mu.Unlock()
	}
	for s := 0; s < cfg.Shards; s++ {
		l.mu.Lock()
		_, mine := l.held[s]
		n := len(l.held)
		e, known := l.mirror[leaseKey(s)]
		l.mu.Unlock()
		if mine || n >= target {
			continue
		}
		var rev uint64
		var err error
		switch {
		case !known:
			rev, err = l.kv.Create(ctx, leaseKey(s), []byte(cfg.NodeID))
		case string(e.Value()) == cfg.NodeID || now.Sub(e.seen) >= cfg.LeaseTTL:
			// Ours from before a restart, or abandoned.
			rev, err = l.kv.Update(ctx, leaseKey(s), []byte(cfg.NodeID), e.Revision())
		default:
			continue
		}
		if err != nil {
			continue // another node was faster, or the server is away
		}
		l.mu.Lock()
		l.held[s] = heldLease{rev: rev, renewed: now}
		l.mu.Unlock()
		cfg.Log.Debug("outbox: took a shard lease", "shard", s)
	}
}

// releaseAll gives back every lease (at shutdown, after relaying stopped),
// so that another node takes the shards over at once.
func (l *leases) releaseAll(ctx context.Context) {
	l.mu.Lock()
	held := l.held
	l.held = map[int]heldLease{}
	l.mu.Unlock()
	for s, h := range held {
		_ = l.kv.Delete(ctx, leaseKey(s), jetstream.LastRevision(h.rev))
	}
	_ = l.kv.Delete(ctx, memberKey(l.cfg.NodeID))
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
