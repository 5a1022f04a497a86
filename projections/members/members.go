// Package members keeps the list of the live hosts of a cluster, the
// input of the views' placement (docs/SCALE.md, Membership): every node
// puts a heartbeat key in the bucket <PREFIX>_HOSTS every Beat and
// watches everyone's. A host is live while its last heartbeat is less
// than TTL older than the newest heartbeat of any host, both stamped by
// the server that stores the bucket, so that no two machines' clocks are
// compared. A node that stops cleanly deletes its key and leaves at once;
// one that dies leaves after TTL. (When the bucket's stream changes leader
// between servers whose clocks differ by more than TTL, the hosts whose
// last heartbeat the old leader stamped may look gone until their next
// one, a Beat later.)
package members

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// BucketName is the bucket of the heartbeats: <PREFIX>_HOSTS.
func BucketName(prefix string) string { return strings.ToUpper(prefix) + "_HOSTS" }

// keyPrefix starts every heartbeat key: "host.<Config.Host>".
const keyPrefix = "host."

// Open creates or opens the bucket. A key unwritten for an hour is
// removed by the server (a host gone for good); a live host rewrites its
// key every Beat.
func Open(ctx context.Context, js jetstream.JetStream, prefix string, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      BucketName(prefix),
		Description: "Cairn hosts: a heartbeat per live node",
		History:     1,
		TTL:         time.Hour,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("members: bucket %s: %w", BucketName(prefix), err)
	}
	return kv, nil
}

// Config configures a node's membership.
type Config struct {
	// Host is the node's key in the bucket: letters and digits, stable
	// across restarts of the node.
	Host string
	// Name is what the node is called in logs and reports (its machine
	// and data directory).
	Name string
	// Beat is how often the node puts its heartbeat (2 s); TTL how old a
	// heartbeat gets before its host has left (10 s; at least 3 Beats).
	Beat, TTL time.Duration
	Log       *slog.Logger
}

// Members is one node's membership: its heartbeat, and its view of
// everyone's. New starts nothing; Run runs it.
type Members struct {
	kv    jetstream.KeyValue
	cfg   Config
	ready chan struct{}

	mu      sync.Mutex
	seen    map[string]beat // by host key: the last heartbeat seen
	newest  time.Time       // the newest heartbeat's time (the server's)
	live    []string        // the live hosts' keys, sorted
	changed chan struct{}   // closed when live changes, then replaced

	joins, leaves atomic.Uint64
}

// beat is a host's last heartbeat.
type beat struct {
	at   time.Time // stamped by the server
	name string
}

// New returns the membership of the node cfg names on bucket kv.
func New(kv jetstream.KeyValue, cfg Config) *Members {
	if cfg.Beat <= 0 {
		cfg.Beat = DefaultBeat
	}
	if cfg.TTL < 3*cfg.Beat {
		cfg.TTL = max(DefaultTTL, 3*cfg.Beat)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Members{kv: kv, cfg: cfg, ready: make(chan struct{}), seen: map[string]beat{}, changed: make(chan struct{})}
}

// Ready is closed once the heartbeats stored before the node's first are
// read and the node's own has come back through the watch: the live
// hosts are then judged against a time no older than the node's start.
func (m *Members) Ready() <-chan struct{} { return m.ready }

// Live returns the live hosts' keys, sorted.
func (m *Members) Live() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.live)
}

// Changed returns a channel closed at the next change of the live hosts.
func (m *Members) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// Run puts the node's heartbeat every Beat and follows everyone's until
// ctx ends, then deletes the node's key so that the others see it leave
// at once. A heartbeat or a watch that fails is logged and tried again at
// the next Beat; Run returns an error only when ctx ended before it was
// ready.
func (m *Members) Run(ctx context.Context) error {
	key := keyPrefix + m.cfg.Host
	defer func() {
		// Leave: bounded, so that a server out of reach does not hold the
		// stop (the others then see the node leave after TTL).
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = m.kv.Delete(dctx, key)
	}()
	tick := time.NewTicker(m.cfg.Beat)
	defer tick.Stop()
	var w jetstream.KeyWatcher
	defer func() {
		if w != nil {
			_ = w.Stop()
		}
	}()
	var updates <-chan jetstream.KeyValueEntry
	beaten, caughtUp, self := false, false, false
	for {
		if w == nil {
			var err error
			if w, err = m.kv.Watch(ctx, keyPrefix+"*"); err != nil {
				if ctx.Err() == nil {
					m.cfg.Log.Warn("members: watching the heartbeats failed", "err", err)
				}
				w = nil
			} else {
				updates = w.Updates()
			}
		}
		if !beaten {
			if _, err := m.kv.Put(ctx, key, []byte(m.cfg.Name)); err != nil {
				if ctx.Err() == nil { // not the stop's cancellation
					m.cfg.Log.Warn("members: heartbeat failed", "err", err)
				}
			} else {
				beaten = true
			}
		}
		select {
		case <-ctx.Done():
			select {
			case <-m.ready:
				return nil
			default:
				return ctx.Err()
			}
		case <-tick.C:
			beaten = false
			m.refresh()
		case e, ok := <-updates:
			if !ok {
				_ = w.Stop()
				w, updates = nil, nil
				continue
			}
			if e == nil {
				caughtUp = true
			} else {
				m.note(e)
				self = self || e.Key() == key && e.Operation() == jetstream.KeyValuePut
			}
			m.refresh()
		}
		if caughtUp && self {
			m.markReady()
		}
	}
}

func (m *Members) markReady() {
	select {
	case <-m.ready:
	default:
		close(m.ready)
	}
}

// note takes a heartbeat, or a deletion, from the watch.
func (m *Members) note(e jetstream.KeyValueEntry) {
	host := strings.TrimPrefix(e.Key(), keyPrefix)
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.Operation() != jetstream.KeyValuePut {
		delete(m.seen, host)
		return
	}
	m.seen[host] = beat{at: e.Created(), name: string(e.Value())}
	if e.Created().After(m.newest) {
		m.newest = e.Created()
	}
}

// refresh works out the live hosts again and, when they changed, logs
// who joined and who left and wakes the Changed waiters.
func (m *Members) refresh() {
	m.mu.Lock()
	var live []string
	for host, b := range m.seen {
		if isLive(m.newest, b.at, m.cfg.TTL) {
			live = append(live, host)
		}
	}
	slices.Sort(live)
	if slices.Equal(live, m.live) {
		m.mu.Unlock()
		return
	}
	var joined, left []string
	for _, h := range live {
		if !slices.Contains(m.live, h) {
			joined = append(joined, m.seen[h].name)
		}
	}
	for _, h := range m.live {
		if !slices.Contains(live, h) {
			name := h
			if b, ok := m.seen[h]; ok {
				name = b.name
			}
			left = append(left, name)
		}
	}
	m.live = live
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
	m.joins.Add(uint64(len(joined)))
	m.leaves.Add(uint64(len(left)))
	for _, n := range joined {
		m.cfg.Log.Info("host joined", "host", n, "hosts", len(live))
	}
	for _, n := range left {
		m.cfg.Log.Info("host left", "host", n, "hosts", len(live))
	}
}

// WriteMetrics writes the membership's figures in the Prometheus text
// format.
func (m *Members) WriteMetrics(w io.Writer) {
	fmt.Fprintf(w, "# HELP cairn_cluster_hosts Live hosts of the cluster as this node sees them.\n# TYPE cairn_cluster_hosts gauge\ncairn_cluster_hosts %d\n", len(m.Live()))
	fmt.Fprintf(w, "# HELP cairn_cluster_host_joins_total Hosts seen joining.\n# TYPE cairn_cluster_host_joins_total counter\ncairn_cluster_host_joins_total %d\n", m.joins.Load())
	fmt.Fprintf(w, "# HELP cairn_cluster_host_leaves_total Hosts seen leaving (a clean stop, or TTL without a heartbeat).\n# TYPE cairn_cluster_host_leaves_total counter\ncairn_cluster_host_leaves_total %d\n", m.leaves.Load())
}
