package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/commit"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/projections"
)

// Headers of a command one node sends another.
const (
	// routeTableHeader names the command's table (its full name), and
	// routeEpochHeader its incarnation, which is the position of its
	// creation in the catalog.
	routeTableHeader = "Cairn-Table"
	routeEpochHeader = "Cairn-Epoch"
	// routeNotHeldHeader marks the answer of a node that does not hold
	// the partition (any more: the hosts changed): the sender tries the
	// next holder.
	routeNotHeldHeader = "Cairn-Not-Held"
)

// router is the committer the front doors and the function runner use:
// a command for a partition this node's view holds goes to the local
// committer, one for a partition of a shard other hosts hold goes to one
// of them (docs/SCALE.md, C), which decides it against its view and
// answers once the write is visible there. Holders are tried in the
// placement's order; one that is gone answers at once with no responders
// (its subscription went with its connection), one that no longer holds
// the shard says so, and the next is asked.
type router struct {
	nc      *nats.Conn // the node user's: forwards and serves node-to-node requests
	prefix  string
	self    string // this node's key
	views   *projections.Views
	local   *commit.Committer
	placer  *placer
	timeout time.Duration // of one forwarded command
	log     *slog.Logger

	ready    chan struct{}   // closed once it takes forwarded commands
	ctx      context.Context // Run's: ends the forwards when the node stops
	forwards sync.WaitGroup  // the commands being forwarded, and forwarded ones waiting

	smu      sync.Mutex
	stopping bool // Run waits for forwards: serve starts no more waits
}

func newRouter(nc *nats.Conn, prefix, self string, views *projections.Views, local *commit.Committer, pl *placer, timeout time.Duration, log *slog.Logger) *router {
	return &router{nc: nc, prefix: prefix, self: self, views: views, local: local, placer: pl, timeout: timeout, log: log, ready: make(chan struct{})}
}

// routeSubject is where a node takes commands forwarded by the others:
// only nodes may publish there (the node user; no client's permissions
// name it).
func routeSubject(prefix, host string) string { return prefix + ".node." + host + ".cmd" }

// Submit decides cmd here or sends it to a holder of its partition: the
// shard's first holder decides its commands while it lives, so that they
// are decided against one view (another holder's may lag behind it, and
// a refusal decided there, such as a missing entity, would be stale).
func (r *router) Submit(cmd *engine.Command, done func(*engine.Reply)) {
	t, ok := r.views.Table(cmd.Table)
	if !ok || !t.Partial() {
		r.local.Submit(cmd, done) // a table this node does not know yet is looked up there
		return
	}
	if owners := r.owners(t, cmd.PartitionKey()); len(owners) > 0 && owners[0] == r.self && t.Holds(cmd.PartitionKey()) {
		r.local.Submit(cmd, done)
		return
	}
	r.forwards.Go(func() { r.forward(t, cmd, done) })
}

// owners returns the holders of a partition's shard, first first.
func (r *router) owners(t *projections.Table, pk string) []string {
	return r.placer.owners(t.Name(), t.Epoch(), t.Shards(), uint32(engine.Shard(pk, int(t.Shards()))))
}

// CreateTable and DeleteTable concern the catalog, which every node holds.
func (r *router) CreateTable(ctx context.Context, name string) (engine.TableInfo, error) {
	return r.local.CreateTable(ctx, name)
}

func (r *router) DeleteTable(ctx context.Context, name string) error {
	return r.local.DeleteTable(ctx, name)
}

// forward sends cmd to the holders of its partition in turn until one
// decides it.
func (r *router) forward(t *projections.Table, cmd *engine.Command, done func(*engine.Reply)) {
	if err := engine.ValidateCommand(cmd); err != nil {
		done(&engine.Reply{Error: engine.AsError(err)})
		return
	}
	data, err := wire.EncodeRequestMsgpack(wire.FromCommand(cmd))
	if err != nil {
		done(&engine.Reply{Error: engine.AsError(err)})
		return
	}
	pk := cmd.PartitionKey()
	var hosts []string
	for _, host := range r.owners(t, pk) {
		if host != r.self || t.Holds(pk) {
			hosts = append(hosts, host)
		}
	}
	// A holder killed after it took the command never answers, and no
	// one says so until its heartbeats have lapsed. A command with an id
	// is sent to the next holder as well once routeHedge has passed: the
	// journal's check and the id make sure that it is applied once, and
	// the first answer is the answer. One without an id waits.
	hedge := r.timeout
	if cmd.ID != "" {
		hedge = routeHedge
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	type answer struct {
		rep  *engine.Reply
		next bool // the host does not hold the partition, or is gone
	}
	answers := make(chan answer, len(hosts))
	ask := func(host string) {
		if host == r.self {
			r.local.Submit(cmd, func(rep *engine.Reply) { answers <- answer{rep: rep} })
			return
		}
		msg := &nats.Msg{Subject: routeSubject(r.prefix, host), Data: data,
			Header: nats.Header{routeTableHeader: []string{t.Name()}, routeEpochHeader: []string{strconv.FormatUint(t.Epoch(), 10)}}}
		resp, err := r.nc.RequestMsgWithContext(ctx, msg)
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			answers <- answer{next: true} // gone: its subscription went with its connection
		case err != nil:
			answers <- answer{rep: &engine.Reply{Error: engine.Errorf(engine.CodeOperationTimedOut, "the host holding partition %q of table %s did not answer: %v; the command may or may not have been applied (retry it with the same id)", pk, engine.ShownTable(t.Name()), err)}}
		case resp.Header.Get(routeNotHeldHeader) != "":
			answers <- answer{next: true}
		default:
			rep, err := wire.DecodeReplyMsgpack(resp.Data)
			if err != nil {
				rep = &engine.Reply{Error: engine.Errorf(engine.CodeInternalError, "the host holding partition %q of table %s answered what cannot be read: %v", pk, engine.ShownTable(t.Name()), err)}
			}
			answers <- answer{rep: rep}
		}
	}
	started, pending := 0, 0
	start := func() {
		host := hosts[started]
		started, pending = started+1, pending+1
		go ask(host)
	}
	timer := time.NewTimer(hedge)
	defer timer.Stop()
	var last *engine.Reply // a timeout, answered if nothing better comes
	for started < len(hosts) || pending > 0 {
		if pending == 0 {
			start()
			continue
		}
		select {
		case a := <-answers:
			pending--
			switch {
			case a.next:
			case a.rep.Error != nil && a.rep.Error.Code == engine.CodeOperationTimedOut && started < len(hosts):
				last = a.rep
			default:
				done(a.rep)
				return
			}
		case <-timer.C:
			if started < len(hosts) {
				start()
				timer.Reset(hedge)
			}
		}
	}
	if last != nil {
		done(last)
		return
	}
	done(&engine.Reply{Error: engine.Errorf(engine.CodeServerBusy, "no host holding partition %q of table %s answered (the hosts are changing); retry", pk, engine.ShownTable(t.Name()))})
}

// routeHedge is how long a holder may take to answer a command with an
// id before the next holder is sent it as well.
const routeHedge = 2 * time.Second

// serve decides a command another node forwarded, if this node's view
// holds its partition; the answer goes to the sender's inbox.
func (r *router) serve(m *nats.Msg) {
	if !wire.ReplyAllowed(m.Reply) {
		return // not a node's request: nodes ask from their inboxes
	}
	fail := func(err error) { _ = m.Respond(wire.EncodeReplyMsgpack(&engine.Reply{Error: engine.AsError(err)})) }
	table := m.Header.Get(routeTableHeader)
	req, err := wire.DecodeRequestMsgpack(m.Data)
	if err != nil {
		fail(err)
		return
	}
	cmd, err := wire.ToCommand(req, table)
	if err != nil {
		fail(err)
		return
	}
	epoch, _ := strconv.ParseUint(m.Header.Get(routeEpochHeader), 10, 64)
	if t, ok := r.views.Table(table); epoch > 0 && (!ok || t.Epoch() < epoch) {
		// The sender's catalog is ahead of this host's: the table was
		// created a moment ago. This host, the shard's first holder,
		// decides once it knows the table, rather than sending the
		// command on to a holder whose view may not show it to the
		// reads that come here.
		r.smu.Lock()
		defer r.smu.Unlock()
		if r.stopping {
			_ = m.RespondMsg(&nats.Msg{Header: nats.Header{routeNotHeldHeader: []string{"1"}}})
			return
		}
		r.forwards.Go(func() {
			ctx, cancel := context.WithTimeout(r.ctx, routeCatalogWait)
			defer cancel()
			_ = r.views.WaitCatalog(ctx, epoch)
			r.decide(m, table, cmd)
		})
		return
	}
	r.decide(m, table, cmd)
}

// routeCatalogWait bounds the wait of a forwarded command for this host's
// catalog to reach the table's creation.
const routeCatalogWait = 2 * time.Second

// decide submits a forwarded command here when this host holds its
// partition, and otherwise answers that it does not.
func (r *router) decide(m *nats.Msg, table string, cmd *engine.Command) {
	if t, ok := r.views.Table(table); !ok || !t.Holds(cmd.PartitionKey()) {
		_ = m.RespondMsg(&nats.Msg{Header: nats.Header{routeNotHeldHeader: []string{"1"}}})
		return
	}
	r.local.Submit(cmd, func(rep *engine.Reply) {
		if err := m.Respond(wire.EncodeReplyMsgpack(rep)); err != nil {
			r.log.Warn("answer a forwarded command", "table", table, "err", err)
		}
	})
}

// Ready is closed once the router takes forwarded commands.
func (r *router) Ready() <-chan struct{} { return r.ready }

// Run takes the commands other nodes forward, and places the views again
// whenever the live hosts change, until ctx ends; it returns once the
// commands it was forwarding are answered.
func (r *router) Run(ctx context.Context) error {
	r.ctx = ctx
	sub, err := r.nc.Subscribe(routeSubject(r.prefix, r.self), r.serve)
	if err != nil {
		return fmt.Errorf("node: take forwarded commands: %w", err)
	}
	if err := r.nc.FlushTimeout(5 * time.Second); err != nil && ctx.Err() == nil {
		return fmt.Errorf("node: take forwarded commands: %w", err)
	}
	close(r.ready)
	changed := r.placer.members.Changed()
	for {
		select {
		case <-changed:
			changed = r.placer.members.Changed() // before the placing: no change is missed
			if moved := r.views.Replace(); len(moved) > 0 {
				r.log.Info("the live hosts changed: views of the tables whose shards this host holds changed start again", "hosts", len(r.placer.members.Live()), "tables", moved)
			}
			continue
		case <-ctx.Done():
		}
		break
	}
	_ = sub.Unsubscribe()
	r.smu.Lock()
	r.stopping = true // the subscription's goroutine may still run
	r.smu.Unlock()
	r.forwards.Wait()
	return nil
}
