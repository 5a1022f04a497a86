package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// Relay publishes the messages of committed records (see the package
// doc). New starts nothing; Run relays until its context ends.
type Relay struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	j      journalReader
	names  func(table string, epoch uint64) string
	tables Tables
	cfg    Config

	kv     jetstream.KeyValue
	leases *leases
	ready  chan struct{}

	mu      sync.Mutex
	workers map[string]*running // by stream name
	status  map[string]*tableStatus

	stats struct {
		delivered, failed, skipped, duplicates atomic.Uint64
	}
}

type running struct {
	shard  int
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a relay of the tables of j that tables lists.
func New(nc *nats.Conn, j *journal.Journal, tables Tables, cfg Config) (*Relay, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096), jetstream.WithPublishAsyncTimeout(cfg.AckWait))
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return &Relay{nc: nc, js: js, j: j, names: j.TableStream, tables: tables, cfg: cfg, ready: make(chan struct{}),
		workers: map[string]*running{}, status: map[string]*tableStatus{}}, nil
}

// Ready is closed once the relay has its bucket and its view of the
// leases.
func (r *Relay) Ready() <-chan struct{} { return r.ready }

// Bucket creates or opens the relay's bucket.
func Bucket(ctx context.Context, js jetstream.JetStream, prefix string, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      BucketName(prefix),
		Description: "Cairn outbox: relay positions, shard leases, blocked partitions",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: bucket %s: %w", BucketName(prefix), err)
	}
	return kv, nil
}

// Run relays until ctx ends, then stops every table's relaying, stores
// the positions and gives the leases back. It returns an error only when
// it cannot start.
func (r *Relay) Run(ctx context.Context) error {
	kv := r.cfg.Bucket
	if kv == nil {
		var err error
		if kv, err = Bucket(ctx, r.js, r.cfg.Prefix, r.cfg.Replicas); err != nil {
			return err
		}
	}
	r.kv = kv
	r.leases = newLeases(kv, &r.cfg)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watched := make(chan struct{})
	watchErr := make(chan error, 1)
	go func() { watchErr <- r.leases.watch(wctx, watched) }()
	select {
	case <-watched:
	case err := <-watchErr:
		return err
	case <-ctx.Done():
		return nil
	}
	close(r.ready)
	renew := time.NewTicker(r.cfg.Renew)
	defer renew.Stop()
	// A new table's first messages wait for the next sync: keep it short
	// (Tables is a copy of the catalog's live entries, nothing more).
	tables := time.NewTicker(50 * time.Millisecond)
	defer tables.Stop()
	r.leases.tick(ctx, r.stopShard)
	r.syncWorkers(ctx)
	for {
		select {
		case <-ctx.Done():
			r.stopAll()
			r.leases.releaseAll(context.WithoutCancel(ctx))
			return nil
		case err := <-watchErr:
			// The server went away for good: relay nothing rather than
			// decide on a stale view of the leases.
			r.stopAll()
			return err
		case <-renew.C:
			r.leases.tick(ctx, r.stopShard)
			r.syncWorkers(ctx)
		case <-tables.C:
			r.syncWorkers(ctx)
		}
	}
}

// syncWorkers runs a worker for every live table of a shard this node
// holds whose journal may carry messages (a table that marks them only
// once marked), and stops the others.
func (r *Relay) syncWorkers(ctx context.Context) {
	held := r.leases.Held(time.Now())
	want, live := map[string]bool{}, map[string]bool{}
	for _, t := range r.tables.Tables() {
		stream := r.names(t.Name, t.Epoch)
		live[stream] = true
		shard := shardOf(stream, r.cfg.Shards)
		if !held[shard] || (t.MarksMessages && !r.leases.marked(stream)) {
			continue
		}
		want[stream] = true
		r.mu.Lock()
		_, ok := r.workers[stream]
		r.mu.Unlock()
		if !ok {
			r.startWorker(ctx, t, stream, shard)
		}
	}
	r.mu.Lock()
	var stop []string
	for stream := range r.workers {
		if !want[stream] {
			stop = append(stop, stream)
		}
	}
	r.mu.Unlock()
	for _, s := range stop {
		r.stopWorker(s)
		if !live[s] {
			// Dropped: its position and blocked list go with it.
			_ = r.kv.Delete(ctx, posKey(s))
			_ = r.kv.Delete(ctx, blockedKey(s))
			_ = r.kv.Delete(ctx, markKey(s))
		}
	}
}

func (r *Relay) startWorker(ctx context.Context, t engine.TableInfo, stream string, shard int) {
	wctx, cancel := context.WithCancel(ctx)
	st := &tableStatus{}
	st.set(TableStatus{Table: t.Name, Epoch: t.Epoch})
	w := &worker{r: r, table: t.Name, epoch: t.Epoch, shards: t.Shards, stream: stream, parts: map[string]*partition{}, status: st}
	rn := &running{shard: shard, cancel: cancel, done: make(chan struct{})}
	r.mu.Lock()
	r.workers[stream] = rn
	r.status[stream] = st
	r.mu.Unlock()
	go func() {
		defer close(rn.done)
		for {
			err := w.run(wctx)
			if err == nil || wctx.Err() != nil {
				return
			}
			var ce *journal.CorruptError
			wait := time.Second
			switch {
			case errors.Is(err, engine.ErrTableGone):
				// Its stream is not there yet (the table is being created)
				// or any more (dropped: the next sync stops this worker).
				r.cfg.Log.Debug("outbox: the table's journal is not there; trying again", "table", t.Name)
				wait = 250 * time.Millisecond
			case errors.As(err, &ce):
				r.cfg.Log.Warn("outbox: the table's journal holds a record that cannot be read; its messages wait", "table", t.Name, "err", err)
				wait = 30 * time.Second // a faulted journal: its messages wait for an operator
			default:
				r.cfg.Log.Warn("outbox: relaying a table failed; trying again", "table", t.Name, "err", err)
			}
			if !sleep(wctx, wait) {
				return
			}
		}
	}()
}

// stopWorker stops a table's worker and waits until it has stopped.
func (r *Relay) stopWorker(stream string) {
	r.mu.Lock()
	rn := r.workers[stream]
	delete(r.workers, stream)
	delete(r.status, stream)
	r.mu.Unlock()
	if rn != nil {
		rn.cancel()
		<-rn.done
	}
}

// stopShard stops the workers of a shard (before its lease is given up).
func (r *Relay) stopShard(shard int) {
	r.mu.Lock()
	var stop []string
	for s, rn := range r.workers {
		if rn.shard == shard {
			stop = append(stop, s)
		}
	}
	r.mu.Unlock()
	for _, s := range stop {
		r.stopWorker(s)
	}
}

func (r *Relay) stopAll() {
	r.mu.Lock()
	var stop []string
	for s := range r.workers {
		stop = append(stop, s)
	}
	r.mu.Unlock()
	for _, s := range stop {
		r.stopWorker(s)
	}
}
