package node

import (
	"context"
	"slices"
	"sync"

	"github.com/cairn-dev/cairn/cmd/internal/pages"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections"
	"github.com/cairn-dev/cairn/projections/members"
	"github.com/cairn-dev/cairn/projections/placement"
	"github.com/cairn-dev/cairn/projections/query"
)

// placeBound is how far above the mean of its table's replicas a host
// may hold (placement.Assign): each table is placed on its own, and with
// its 64 shards a tight bound is what keeps the fullest of 3 hosts at
// 44 of 64 (0.69 of the table) rather than 46 (0.72).
const placeBound = 0.01

// placer decides which shards of each table this node holds and who
// holds the others: every table with shards is placed on replicas of
// the live hosts (docs/SCALE.md), the same on every host that sees the
// same members. The assignment of a table is computed once per member
// list.
type placer struct {
	self     string // this node's key among the members
	replicas int
	members  *members.Members

	mu      sync.Mutex
	changed <-chan struct{} // closed once the members differ from those list was built from
	list    *placement.Members
	tables  map[placement.ShardID]*placement.Assignment // by table incarnation (Index 0)
}

func newPlacer(self string, replicas int, m *members.Members) *placer {
	return &placer{self: self, replicas: replicas, members: m, tables: map[placement.ShardID]*placement.Assignment{}}
}

// assignment returns the placement of a table incarnation's shards on the
// current members, most preferred owner first.
func (p *placer) assignment(table string, epoch uint64, shards uint32) *placement.Assignment {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Every routed command and read asks: the list is read again only
	// once the members changed, not copied and compared each time.
	stale := p.list == nil
	if !stale {
		select {
		case <-p.changed:
			stale = true
		default:
		}
	}
	if stale {
		p.changed = p.members.Changed() // before the list: no change is missed
		live := p.members.Live()
		if !slices.Contains(live, p.self) {
			// Not yet (or no longer) seen by its own watch: it holds
			// its share all the same.
			live = append(slices.Clone(live), p.self)
			slices.Sort(live)
		}
		p.list = placement.NewMembers(live)
		clear(p.tables)
	}
	table = projections.Lower(table)
	key := placement.ShardID{Table: table, Epoch: epoch}
	a := p.tables[key]
	if a == nil {
		ids := make([]placement.ShardID, shards)
		for i := range ids {
			ids[i] = placement.ShardID{Table: table, Epoch: epoch, Index: int(i)}
		}
		a = p.list.Assign(ids, p.replicas, placeBound)
		p.tables[key] = a
	}
	return a
}

// held says which shards of a table this node holds (projections
// Config.Placement).
func (p *placer) held(table string, epoch uint64, shards uint32) []bool {
	a := p.assignment(table, epoch, shards)
	table = projections.Lower(table)
	out := make([]bool, shards)
	for i := range out {
		out[i] = slices.Contains(a.Owners[placement.ShardID{Table: table, Epoch: epoch, Index: i}], p.self)
	}
	return out
}

// owners returns the hosts that hold a shard, most preferred first.
func (p *placer) owners(table string, epoch uint64, shards, shard uint32) []string {
	a := p.assignment(table, epoch, shards)
	return a.Owners[placement.ShardID{Table: projections.Lower(table), Epoch: epoch, Index: int(shard)}]
}

// remoteReads reads, for the function runner, the partitions of tables
// whose views here hold only some shards, from their holders.
type remoteReads struct{ pages *pages.Service }

// Get reads one entity at least as fresh as this node's view, and at or
// after the journal position at.
func (r remoteReads) Get(ctx context.Context, t *projections.Table, pk, rk string, at uint64) (*engine.Entity, error) {
	res, err := r.pages.Read(ctx, t, pages.Query{Point: &pages.Keys{PK: pk, RK: rk}, Limit: 1, Position: max(at, t.Snapshot().Seq)})
	if err != nil || len(res.Entities) == 0 {
		return nil, err
	}
	return res.Entities[0], nil
}

// Query reads a partition's entities that match filter, in RowKey order,
// at most top: page after page, as a gathered page may stop short.
func (r remoteReads) Query(ctx context.Context, t *projections.Table, pk, filter string, top int) ([]*engine.Entity, error) {
	q := pages.Query{Partition: &pk, Filter: filter, Limit: top, Position: t.Snapshot().Seq}
	var out []*engine.Entity
	for {
		res, err := r.pages.Read(ctx, t, q)
		if err != nil {
			return nil, err
		}
		out = append(out, res.Entities...)
		if !res.More || len(out) >= top {
			return out[:min(len(out), top)], nil
		}
		q.Limit = top - len(out)
		q.From = &query.Continuation{PartitionKey: res.NextPartitionKey, RowKey: res.NextRowKey}
	}
}
