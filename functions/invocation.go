package functions

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/abi"
	"github.com/cairn-dev/cairn/projections"
	"github.com/cairn-dev/cairn/projections/query"
)

// Limits of one invocation.
const (
	// MaxQueryRows bounds a Query's answer; page with "RowKey gt '…'".
	MaxQueryRows = 1000
	// MaxWrites bounds the writes of one invocation.
	MaxWrites = 1000
	// MaxEnqueues bounds the messages one invocation sends, and
	// MaxEnqueueBytes their size in all (queues, ids and bodies, as
	// engine.MessageSize counts): they are committed in one command with
	// the invocation's last writes, so the bounds are a command's.
	MaxEnqueues     = engine.MaxCommandMessages
	MaxEnqueueBytes = engine.MaxCommandMessageBytes
	// MaxOutput bounds a direct invocation's reply.
	MaxOutput = 1 << 20
)

// Invocation is one run of a function: its trigger, what it reads, and the
// writes and messages it collects. Nothing it collects takes effect until
// the function has returned successfully and Commit runs; a failed
// invocation leaves no trace.
//
// Like a Reliable Collections transaction, reads see the invocation's own
// pending writes. Each write is decided when it is made, against the
// partition as it was first read plus the writes before it, so a write that
// cannot succeed (EntityAlreadyExists, a stale ETag) fails at once with its
// code; Commit decides it again against the partition as it is then.
//
// An Invocation is used by one goroutine.
type Invocation struct {
	runner   *Runner
	limits   *limits
	trigger  abi.Trigger
	floors   []floor             // positions its reads wait for (floors.go)
	parts    []*pendingPartition // in the order first written
	writes   int
	msgs     []pendingMessage
	msgBytes int
	output   []byte
	status   int                 // an HTTP reply's (SetResponse)
	header   map[string][]string // an HTTP reply's (SetResponse)
	logs     int
	// failure is the text a guest gave with OpFail.
	failure string
	// throttled: the invocation waited for a rate (it is counted once).
	throttled bool
	// depth is each destination queue's length when the invocation first
	// enqueued to it.
	depth map[string]uint64
}

// pendingPartition is the invocation's writes to one partition.
type pendingPartition struct {
	table   *projections.Table
	pk      string
	overlay *engine.Overlay
	ops     []engine.Operation
	written map[string]bool // RowKeys written
	// remote holds the entities read from another host, for a partition
	// this node's view does not hold (nil: the view's partition).
	remote remoteState
}

// remoteState is the entities of a partition another host holds that an
// invocation read before writing them: the state its writes are decided
// against here (the holder decides them again when they commit).
type remoteState map[string]*engine.Entity

func (r remoteState) Entity(rk string) (*engine.Entity, bool) {
	e, ok := r[rk]
	return e, ok && e != nil
}

// remote reports whether t's partition pk is read from other hosts: its
// shard is held by others only, or t is a projection read by gathering.
func (inv *Invocation) remote(t *projections.Table, pk string) bool {
	return inv.runner.cfg.Remote != nil && !t.Answers(pk)
}

type pendingMessage struct {
	queue string
	body  []byte
}

// Trigger returns what started the invocation.
func (inv *Invocation) Trigger() *abi.Trigger { return &inv.trigger }

// lookup finds a table's view, or a declared projection's (read only).
func (inv *Invocation) lookup(ctx context.Context, table string) (*projections.Table, error) {
	t, ok, err := inv.runner.views.Readable(ctx, table)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, engine.Errorf(engine.CodeTableNotFound, "table %q does not exist", table)
	}
	if err := t.Err(); err != nil {
		// A faulted (or just dropped) table's view is stale for good: its
		// coded error, as the front doors answer.
		return nil, engine.AsError(err)
	}
	if err := inv.reach(ctx, t); err != nil {
		return nil, err
	}
	return t, nil
}

// partition returns the pending writes of (table, pk), if any.
func (inv *Invocation) partition(t *projections.Table, pk string) *pendingPartition {
	for _, p := range inv.parts {
		if p.table == t && p.pk == pk {
			return p
		}
	}
	return nil
}

// Get reads an entity as the invocation sees it: its pending write, or the
// view. The ETag of an entity the invocation wrote is empty (it has none
// until committed).
func (inv *Invocation) Get(ctx context.Context, table, pk, rk string) (*engine.Entity, string, error) {
	t, err := inv.lookup(ctx, table)
	if err != nil {
		return nil, "", err
	}
	if p := inv.partition(t, pk); p != nil && p.written[rk] {
		e, ok := p.overlay.Entity(rk)
		if !ok {
			return nil, "", nil
		}
		return withPK(e, pk), "", nil
	}
	if inv.remote(t, pk) {
		e, err := inv.runner.cfg.Remote.Get(ctx, t, pk, rk, 0)
		if err != nil || e == nil {
			return nil, "", err
		}
		return e, engine.ETag(t.Epoch(), e.Version), nil
	}
	snap := t.Snapshot()
	t.NoteRead(pk, 1)
	e, ok := snap.Get(pk, rk)
	if !ok {
		return nil, "", nil
	}
	return e, engine.ETag(t.Epoch(), e.Version), nil
}

// withPK gives a pending entity its PartitionKey (the overlay does not
// know it for an entity that did not exist).
func withPK(e *engine.Entity, pk string) *engine.Entity {
	if e.PartitionKey == pk {
		return e
	}
	c := *e
	c.PartitionKey = pk
	return &c
}

// Query reads the entities of one partition that match filter (OData; ""
// for all), in RowKey order, at most top (0 or more than MaxQueryRows:
// MaxQueryRows), with the invocation's pending writes applied.
func (inv *Invocation) Query(ctx context.Context, table, pk, filter string, top int) ([]abi.Entity, error) {
	t, err := inv.lookup(ctx, table)
	if err != nil {
		return nil, err
	}
	var match query.Expr
	if filter != "" {
		if match, err = query.Parse(filter); err != nil {
			return nil, engine.Errorf(engine.CodeInvalidInput, "filter: %v", err)
		}
	}
	if top <= 0 || top > MaxQueryRows {
		top = MaxQueryRows
	}
	p := inv.partition(t, pk)
	var out []abi.Entity
	keep := func(e *engine.Entity, etag string) {
		if match == nil || match.Match(e) {
			out = append(out, abi.Entity{Entity: e, ETag: etag})
		}
	}
	if inv.remote(t, pk) {
		// The holder filters; the entities this invocation wrote are
		// replaced by its writes below (so top more are asked for).
		ents, err := inv.runner.cfg.Remote.Query(ctx, t, pk, filter, min(top+len(inv.writtenIn(p)), MaxQueryRows+engine.MaxBatchOps))
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if p == nil || !p.written[e.RowKey] {
				out = append(out, abi.Entity{Entity: e, ETag: engine.ETag(t.Epoch(), e.Version)})
			}
		}
	} else {
		snap := t.Snapshot()
		examined := 0
		snap.Ascend(pk, "", func(e *engine.Entity) bool {
			if e.PartitionKey != pk {
				return false
			}
			examined++
			if p == nil || !p.written[e.RowKey] {
				keep(e, engine.ETag(t.Epoch(), e.Version))
			}
			// The first top of the unwritten entities suffice: pending
			// writes are merged in below, and the whole cut to top.
			return len(out) < top
		})
		t.NoteRead(pk, examined)
	}
	for rk := range inv.writtenIn(p) {
		if e, ok := p.overlay.Entity(rk); ok {
			keep(withPK(e, pk), "")
		}
	}
	slices.SortFunc(out, func(a, b abi.Entity) int { return cmp.Compare(a.RowKey, b.RowKey) })
	if len(out) > top {
		out = out[:top]
	}
	return out, nil
}

func (inv *Invocation) writtenIn(p *pendingPartition) map[string]bool {
	if p == nil {
		return nil
	}
	return p.written
}

// Write collects one write. It is decided at once against what the
// invocation sees, and refused with its engine error if it cannot succeed;
// an invocation writes each entity at most once, and at most 100 entities
// of one partition (the rules of an entity group transaction, which is
// what each partition's writes become).
func (inv *Invocation) Write(ctx context.Context, table string, op engine.Operation) error {
	if op.Entity == nil {
		return engine.Errorf(engine.CodeInvalidInput, "a write needs an entity (at least its keys)")
	}
	if inv.writes >= MaxWrites {
		return engine.Errorf(engine.CodeInvalidInput, "an invocation makes at most %d writes", MaxWrites)
	}
	cmd := &engine.Command{Table: table, Ops: []engine.Operation{op}}
	if err := engine.ValidateCommand(cmd); err != nil {
		return err
	}
	t, err := inv.lookup(ctx, table)
	if err != nil {
		return err
	}
	if _, derived := t.Source(); derived {
		return projections.ErrReadOnly(t.Name())
	}
	if err := inv.limits.wait(ctx, inv.limits.write, "write", &inv.throttled); err != nil {
		return err
	}
	pk, rk := op.Entity.PartitionKey, op.Entity.RowKey
	p := inv.partition(t, pk)
	if p == nil {
		p = &pendingPartition{table: t, pk: pk, written: map[string]bool{}}
		if inv.remote(t, pk) {
			p.remote = remoteState{}
			p.overlay = engine.NewOverlay(p.remote)
		} else {
			p.overlay = engine.NewOverlay(t.Snapshot().PartitionState(pk))
		}
		inv.parts = append(inv.parts, p)
	}
	if p.written[rk] {
		return engine.Errorf(engine.CodeInvalidDuplicateRow, "the invocation already writes %q/%q: write each entity once (combine the changes)", pk, rk)
	}
	if _, read := p.remote[rk]; p.remote != nil && !read {
		// The entity as its holder has it, to decide the write against.
		e, err := inv.runner.cfg.Remote.Get(ctx, t, pk, rk, 0)
		if err != nil {
			return err
		}
		p.remote[rk] = e
	}
	if len(p.ops) >= engine.MaxBatchOps {
		return engine.Errorf(engine.CodeInvalidInput, "an invocation writes at most %d entities of one partition", engine.MaxBatchOps)
	}
	now := inv.runner.now()
	events, err := engine.Decide(p.overlay, t.Epoch(), cmd, engine.Claims{Now: now, Window: inv.runner.cfg.ClaimWindow})
	if err != nil {
		return err
	}
	// Serialised now: the function cannot change what it handed over.
	op.Entity = op.Entity.Clone()
	p.overlay.Apply(events, engine.TimeToTicks(now))
	p.ops = append(p.ops, op)
	p.written[rk] = true
	inv.writes++
	return nil
}

// Enqueue collects a message for a queue, sent once the invocation's
// writes are committed. It waits for the function's enqueueRate (at most
// until ctx ends: ServerBusy), and fails with QueueBacklogExceeded when
// the queue holds, with the invocation's own pending messages for it, the
// function's queueBacklog. The queue's length is read once per queue and
// invocation, so invocations running at once on several nodes may pass
// the backlog by what each of them enqueues.
func (inv *Invocation) Enqueue(ctx context.Context, queue string, body []byte) error {
	if err := ValidateName("queue", queue); err != nil {
		return engine.Errorf(engine.CodeInvalidInput, "%v", err)
	}
	if len(inv.msgs) >= MaxEnqueues {
		return engine.Errorf(engine.CodeInvalidInput, "an invocation sends at most %d messages", MaxEnqueues)
	}
	if len(body) > MaxMessage {
		return engine.Errorf(engine.CodeRequestBodyTooLarge, "a message is at most %d bytes, got %d", MaxMessage, len(body))
	}
	// The message as its command will carry it, with its id.
	size := engine.MessageSize(&engine.Message{Queue: queue, ID: inv.messageID(len(inv.msgs)), Body: body})
	if inv.msgBytes+size > MaxEnqueueBytes {
		return engine.Errorf(engine.CodeRequestBodyTooLarge, "an invocation's messages are at most %d bytes in all, queues and ids included (they are committed in one command)", MaxEnqueueBytes)
	}
	if err := inv.checkBacklog(ctx, queue); err != nil {
		return err
	}
	if err := inv.limits.wait(ctx, inv.limits.enqueue, "enqueue", &inv.throttled); err != nil {
		return err
	}
	inv.msgs = append(inv.msgs, pendingMessage{queue: queue, body: slices.Clone(body)})
	inv.msgBytes += size
	return nil
}

// checkBacklog refuses one more message for queue if the queue and the
// invocation's pending messages for it hold the function's queueBacklog.
func (inv *Invocation) checkBacklog(ctx context.Context, queue string) error {
	depth, ok := inv.depth[queue]
	if !ok {
		d, err := inv.runner.queues.Depth(ctx, queue)
		if err != nil {
			return fmt.Errorf("enqueue to %s: the queue's length: %w", queue, err)
		}
		if inv.depth == nil {
			inv.depth = map[string]uint64{}
		}
		inv.depth[queue], depth = d, d
	}
	for _, m := range inv.msgs {
		if m.queue == queue {
			depth++
		}
	}
	if depth >= uint64(inv.limits.backlog) {
		inv.runner.stats.BacklogRefused.Add(1)
		return engine.Errorf(CodeQueueBacklogExceeded, "queue %q holds %d messages, the queueBacklog (%d) of function %q: the message is refused rather than fill the queue",
			queue, depth, inv.limits.backlog, inv.trigger.Function)
	}
	return nil
}

// SetOutput sets the reply of a direct invocation.
func (inv *Invocation) SetOutput(b []byte) error {
	if len(b) > MaxOutput {
		return engine.Errorf(engine.CodeRequestBodyTooLarge, "a reply is at most %d bytes, got %d", MaxOutput, len(b))
	}
	inv.output = slices.Clone(b)
	return nil
}

// Setting returns the value of one of the function's settings or secrets,
// and whether it is set: a lookup in this node's copy, which every change
// reaches through the settings bucket's watch (settingscache.go). A
// secret that does not open with this node's key is an InternalError
// naming only the secret. The value is never logged.
func (inv *Invocation) Setting(name string) (string, bool, error) {
	return inv.runner.settings.lookup(inv.trigger.Function, name)
}

// Output is the reply set by the function.
func (inv *Invocation) Output() []byte { return inv.output }

// SetResponse sets the status (200..599; 0 keeps 200) and headers of an
// HTTP trigger's reply; other triggers keep them unused. Headers the
// host owns (Content-Length, Transfer-Encoding, Connection, the CORS
// headers of the route) are refused.
func (inv *Invocation) SetResponse(status int, header map[string][]string) error {
	// Not 1xx: an informational status is followed by the real one, and
	// 101 would claim the connection was upgraded.
	if status != 0 && (status < 200 || status > 599) {
		return engine.Errorf(engine.CodeInvalidInput, "respond: status %d is not 200..599", status)
	}
	n := 0
	for k, vs := range header {
		if !validHeaderName(k) {
			return engine.Errorf(engine.CodeInvalidInput, "respond: header name %.64q is not a token", k)
		}
		if hostHeader(k) {
			return engine.Errorf(engine.CodeInvalidInput, "respond: header %s is the host's to set", k)
		}
		for _, v := range vs {
			if !validHeaderValue(v) {
				return engine.Errorf(engine.CodeInvalidInput, "respond: header %s holds a control character", k)
			}
			n += len(k) + len(v)
		}
	}
	if n > maxResponseHeader {
		return engine.Errorf(engine.CodeInvalidInput, "respond: %d bytes of headers; at most %d", n, maxResponseHeader)
	}
	inv.status, inv.header = status, header
	return nil
}

// Response is the status (0: none set) and headers set by SetResponse.
func (inv *Invocation) Response() (int, map[string][]string) { return inv.status, inv.header }

// Log writes a line of the function's to the node's log (at most 100 per
// invocation, each cut to 4 KiB) and keeps it among the function's latest
// lines (FunctionLogs).
func (inv *Invocation) Log(line string) {
	inv.logs++
	if inv.logs > 100 {
		return
	}
	if len(line) > 4096 {
		line = line[:4096] + "…"
	}
	inv.runner.log.Info("function log", "function", inv.trigger.Function, "trigger", inv.trigger.ID, "line", line)
	inv.runner.logRingOf(inv.trigger.Function).add(LogLine{Time: inv.runner.now(), Version: inv.trigger.Version, Trigger: inv.trigger.ID, Line: line})
}

// CommandID is the command id of the invocation's writes to one partition:
// derived from the function and the trigger, so that a retried invocation
// (same trigger) whose earlier attempt committed those writes is answered
// from that commit instead of applying them again.
func CommandID(function, triggerID, table, pk string) string {
	h := sha256.New()
	for _, s := range []string{triggerID, projections.Lower(table), pk} {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	return "fn:" + function + ":" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:18])
}

// retryable reports whether a commit failed because the state changed since
// the invocation read it: running the function again may succeed.
func retryable(err error) bool {
	switch engine.ErrorCode(err) {
	case engine.CodeUpdateConditionNotSatisfied, engine.CodeEntityAlreadyExists, engine.CodeResourceNotFound:
		return true
	}
	return false
}

// ConflictError is a commit refused because the partition changed after the
// function read it; the invocation is run again.
type ConflictError struct{ Err error }

func (e *ConflictError) Error() string {
	return "the data changed while the function ran: " + e.Err.Error()
}

func (e *ConflictError) Unwrap() error { return e.Err }

// commit applies the collected writes, partition by partition in the order
// they were first written, each as one command (atomic within its
// partition) with an id derived from the trigger. The messages go into the
// last partition's command, so they are committed in the same journal
// record as that partition's writes and after every other partition's: the
// outbox relay sends them, and a crash can never keep the writes and lose
// the messages or the reverse. If it fails part-way, the partitions
// already committed stay committed: the retried invocation's commands for
// them are answered as duplicates. An invocation that writes nothing
// publishes its messages itself (there is no write to keep them with: a
// crash before the publish leaves the trigger unacknowledged, and the
// retry's messages carry the same ids).
func (inv *Invocation) commit(ctx context.Context) error {
	// A partition whose every write was refused has nothing to commit (a
	// command without an operation is refused whole).
	var parts []*pendingPartition
	for _, p := range inv.parts {
		if len(p.ops) > 0 {
			parts = append(parts, p)
		}
	}
	cmds := make([]*engine.Command, len(parts))
	for i, p := range parts {
		cmd := &engine.Command{
			ID:    CommandID(inv.trigger.Function, inv.trigger.ID, p.table.Name(), p.pk),
			Table: p.table.Name(),
			Ops:   p.ops,
			Batch: len(p.ops) > 1,
		}
		if i == len(parts)-1 {
			for j, m := range inv.msgs {
				cmd.Messages = append(cmd.Messages, engine.Message{Queue: m.queue, ID: inv.messageID(j), Body: m.body})
			}
		}
		// The references to large values, as the doors check them, and
		// every partition's before the first is committed.
		if err := inv.runner.checkValues(ctx, p.table, cmd); err != nil {
			return fmt.Errorf("commit to %s/%q: %w", p.table.Name(), p.pk, err)
		}
		cmds[i] = cmd
	}
	for i, p := range parts {
		if i > 0 {
			inv.runner.failpoint("functions.between-commits", inv.trigger.Function)
		}
		r := inv.runner.submit(ctx, cmds[i])
		if r.Error != nil {
			if retryable(r.Error) {
				return &ConflictError{Err: r.Error}
			}
			return fmt.Errorf("commit to %s/%q: %w", p.table.Name(), p.pk, r.Error)
		}
	}
	if len(parts) > 0 {
		return nil
	}
	for i, m := range inv.msgs {
		if err := inv.runner.queues.Publish(ctx, m.queue, m.body, inv.messageID(i), nil); err != nil {
			if engine.ErrorCode(err) == CodeQueueBacklogExceeded {
				inv.runner.stats.QueueFull.Add(1)
			}
			return fmt.Errorf("enqueue to %s: %w", m.queue, err)
		}
	}
	return nil
}

// messageID is the id of the invocation's i-th message: the same on every
// retry of its trigger, so its queue keeps one copy.
func (inv *Invocation) messageID(i int) string {
	return "fn:" + inv.trigger.Function + ":" + inv.trigger.ID + ":" + strconv.Itoa(i)
}

// Failure is the reason a WebAssembly guest gave for failing (abi.OpFail).
func (inv *Invocation) Failure() string { return inv.failure }
