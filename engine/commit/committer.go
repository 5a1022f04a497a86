package commit

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nuid"

	"github.com/cairn-dev/cairn/engine"
)

// Config tunes the committer.
type Config struct {
	// MaxGroup is the most commands decided together into one record.
	MaxGroup int
	// MaxRecordBytes bounds the entity bytes (Azure's size formula) of one
	// group-commit record; a single batch may exceed it on its own (it is
	// at most 4 MiB).
	MaxRecordBytes int
	// MaxAttempts bounds the rounds a command goes through when appends
	// are refused (another writer appended first, or the append could not
	// be sent).
	MaxAttempts int
	// Timeout bounds one command's stay in the committer.
	Timeout time.Duration
	// SettleTimeout bounds one read of the journal that settles an append
	// of unknown outcome (500ms): the read may go to a server just lost,
	// and the append is sent again and looked for again meanwhile.
	SettleTimeout time.Duration
	// DrainTimeout bounds how long Run, once its context has ended, waits
	// for the commands already taken before it abandons them (10s).
	DrainTimeout time.Duration
	// MaxTablesPerAccount bounds the live tables of one account (1,000):
	// CreateTable past it fails with TableQuotaExceeded. Two creations
	// racing on different nodes at the bound may both pass.
	MaxTablesPerAccount int
	// TableShards is the number of view shards a table created here is
	// cut into (engine.DefaultShards is the node's default), at most
	// engine.MaxShards; 0 creates tables of the layout before shards,
	// which hosts older than journal format 3 read. A table with shards
	// marks its outbox messages (engine.TableInfo.MarksMessages, journal
	// format 4).
	TableShards uint32
	// MarkMessages, when set, is called before a record with outbox
	// messages is appended to a table, and the record is appended only
	// once it returns nil (outbox.Marker.Mark). An error is retried like
	// an append that could not be sent.
	MarkMessages func(ctx context.Context, table string, epoch uint64) error
	// ClaimWindow is how long after its upload a large value may be newly
	// referenced by a write (engine.DefaultClaimWindow when zero; every
	// node of a cluster must have the same, docs/VALUES.md).
	ClaimWindow time.Duration
	// Now is the clock (server Timestamps); time.Now when nil.
	Now func() time.Time
}

// DefaultTimeout bounds a command's stay in the committer unless
// Config.Timeout says otherwise.
const DefaultTimeout = 30 * time.Second

func (c *Config) defaults() {
	if c.MaxGroup <= 0 {
		c.MaxGroup = 1000
	}
	if c.MaxRecordBytes <= 0 {
		c.MaxRecordBytes = 2 << 20
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 10
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 10 * time.Second
	}
	if c.SettleTimeout <= 0 {
		c.SettleTimeout = 500 * time.Millisecond
	}
	if c.MaxTablesPerAccount <= 0 {
		c.MaxTablesPerAccount = DefaultMaxTablesPerAccount
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// DefaultMaxTablesPerAccount is Config.MaxTablesPerAccount's default. Each
// table is a JetStream stream and a view: the bound keeps one account from
// taking the node's streams.
const DefaultMaxTablesPerAccount = 1000

// Committer turns commands into journal records, one partition at a time,
// with group commit: while a partition's append is in flight, new commands
// for it queue up; they are then decided together against the view plus the
// effects of the commands decided before them, appended as one record, and
// answered each with its own result once the view shows the record.
type Committer struct {
	j     Journal
	views Views
	log   *slog.Logger
	cfg   Config

	stats struct{ records, commands, conflicts, unknown atomic.Uint64 }

	running chan struct{} // closed when Run starts taking commands

	mu    sync.Mutex
	state state
	parts map[partKey]*partition
	wg    sync.WaitGroup  // one per partition being run
	ctx   context.Context // set by Run; ends when Run abandons the commands in flight

	// A worker runs one partition's queue at a time and then waits up to
	// workerIdle on idle for another, so that a busy host does not start
	// a goroutine, and grow its stack, for every command.
	idle    chan *partition // unbuffered: a send succeeds only to a waiting worker
	stopped chan struct{}   // closed when Run stops taking commands: waiting workers exit
	workers sync.WaitGroup
	started atomic.Uint64 // workers started
}

// workerIdle is how long a worker waits for another partition to run
// before it exits (a variable for the tests).
var workerIdle = time.Second

type partKey struct {
	table string // lowercase
	pk    string
}

type partition struct {
	key     partKey
	queue   []*pending
	running bool
}

type pending struct {
	cmd      *engine.Command
	done     func(*engine.Reply)
	deadline time.Time
	hostID   bool // the id was assigned by the host, not the client
}

// New returns a committer on journal j and this host's views. It starts
// nothing: commands are taken only while Run runs.
func New(j Journal, views Views, log *slog.Logger, cfg Config) *Committer {
	cfg.defaults()
	return &Committer{j: j, views: views, log: log, cfg: cfg, parts: map[partKey]*partition{},
		running: make(chan struct{}), idle: make(chan *partition), stopped: make(chan struct{})}
}

// Stats counts the committer's work since it started.
type Stats struct {
	Records   uint64 // journal records appended
	Commands  uint64 // commands committed in them
	Conflicts uint64 // appends refused because another writer was first
	Unknown   uint64 // appends that failed with an unknown outcome
}

// Stats returns the committer's counters.
func (c *Committer) Stats() Stats {
	return Stats{Records: c.stats.records.Load(), Commands: c.stats.commands.Load(),
		Conflicts: c.stats.conflicts.Load(), Unknown: c.stats.unknown.Load()}
}

// Submit queues a command. Invalid commands are answered at once, and so
// are all commands while Run is not running (before it starts, and from the
// moment its context ends: ServerBusy); valid ones once they are committed
// and visible in this host's view, or failed. done receives the reply
// exactly once, from the committer's goroutine or, when answered at once,
// from the caller's: it must not block for long.
func (c *Committer) Submit(cmd *engine.Command, done func(*engine.Reply)) {
	if err := engine.ValidateCommand(cmd); err != nil {
		done(&engine.Reply{Error: engine.AsError(err)})
		return
	}
	p := &pending{cmd: cmd, done: done, deadline: c.cfg.Now().Add(c.cfg.Timeout)}
	if cmd.ID == "" {
		// Every command has an id inside the host, so that a command whose
		// append had an unknown outcome is recognised if it did land.
		cmd.ID = hostIDPrefix + nuid.Next()
		p.hostID = true
	}
	key := partKey{table: strings.ToLower(cmd.Table), pk: cmd.PartitionKey()}
	c.mu.Lock()
	if c.state != stateRunning {
		c.mu.Unlock()
		done(&engine.Reply{Error: errNotRunning()})
		return
	}
	part := c.parts[key]
	if part == nil {
		part = &partition{key: key}
		c.parts[key] = part
	}
	part.queue = append(part.queue, p)
	start := !part.running
	part.running = true
	if start {
		c.wg.Add(1)
	}
	c.mu.Unlock()
	if start {
		select {
		case c.idle <- part:
		default:
			c.workers.Add(1)
			c.started.Add(1)
			go c.work(part)
		}
	}
}

// work runs part, then each partition handed to it while it waits, until
// none comes for workerIdle or the committer stops.
func (c *Committer) work(part *partition) {
	defer c.workers.Done()
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		c.run(part)
		t.Reset(workerIdle)
		select {
		case part = <-c.idle:
		case <-t.C:
			return
		case <-c.stopped:
			return
		}
	}
}

// hostIDPrefix marks ids the host made up; they are not kept in the view's
// dedup index (only client ids are), see engine.Record.Nonce.
const hostIDPrefix = "\x00"

// run drains a partition's queue, one group at a time, and returns when
// the queue is empty.
func (c *Committer) run(part *partition) {
	defer c.wg.Done()
	for {
		c.mu.Lock()
		n := len(part.queue)
		if n == 0 {
			part.running = false
			delete(c.parts, part.key)
			c.mu.Unlock()
			return
		}
		if n > c.cfg.MaxGroup {
			n = c.cfg.MaxGroup
		}
		group := part.queue[:n:n]
		part.queue = part.queue[n:]
		if len(part.queue) == 0 {
			part.queue = nil
		}
		c.mu.Unlock()
		c.commitGroup(part.key, group)
	}
}

// reply sends p's reply.
func reply(p *pending, r *engine.Reply) { p.done(r) }

func failAll(group []*pending, err error) {
	e := engine.AsError(err)
	for _, p := range group {
		reply(p, &engine.Reply{Error: e})
	}
}
