package projections

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Moves. When the live hosts change, Replace starts, for each table whose
// shards this host holds changed, a view holding the new shards beside
// the current one (a move); it takes the current one's place once caught
// up (swapLocked), or gives way to a newer placement before that
// (superseded). Moves, the operators' API and /metrics show them; the
// applier's progress lines name them.

// moveInfo is what a successor view knows of the move it makes.
type moveInfo struct {
	started  time.Time
	from, to int // shards held by the current view, and by this one
}

// Move is a view being replaced by one holding other shards of its table.
type Move struct {
	Table string `json:"table"`
	Epoch uint64 `json:"epoch"`
	// Shards is the table's shard count; From and To how many of them this
	// host's current view holds and its successor will.
	Shards uint32 `json:"shards"`
	From   int    `json:"heldNow"`
	To     int    `json:"heldNext"`
	// Started is when the successor started.
	Started time.Time `json:"started"`
	// Seq is the journal position the successor has published; Target
	// the current view's, which it is catching up with (it takes over once at
	// the journal's end as it was when it started).
	Seq    uint64 `json:"seq"`
	Target uint64 `json:"target"`
}

// moveStats counts the moves of a node.
type moveStats struct {
	done, superseded atomic.Uint64
	nanos            atomic.Int64 // time from start to take-over, moves done
}

// heldCount is how many shards t's view holds.
func (t *Table) heldCount() int {
	if t.held == nil {
		return int(t.shards)
	}
	n := 0
	for _, h := range t.held {
		if h {
			n++
		}
	}
	return n
}

// Moves returns the moves under way on this host, by table name.
func (v *Views) Moves() []Move {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var out []Move
	for _, e := range v.entries {
		if e.next == nil || e.table == nil || e.next.move == nil {
			continue
		}
		m := e.next.move
		out = append(out, Move{Table: e.table.name, Epoch: e.table.epoch, Shards: e.table.shards, From: m.from, To: m.to,
			Started: m.started, Seq: e.next.Snapshot().Seq, Target: e.table.Snapshot().Seq})
	}
	slices.SortFunc(out, func(a, b Move) int { return strings.Compare(a.Table, b.Table) })
	return out
}

// Holding is what this host's view of a table holds.
type Holding struct {
	Table  string `json:"table"`
	Shards uint32 `json:"shards"` // the table's (0: the layout before shards)
	Held   int    `json:"held"`   // of them, held by this host's view
}

// Holdings returns, for every live table this host follows, how many of
// its shards its view holds, by name.
func (v *Views) Holdings() []Holding {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var out []Holding
	for _, e := range v.entries {
		if e.live && e.table != nil {
			out = append(out, Holding{Table: e.table.name, Shards: e.table.shards, Held: e.table.heldCount()})
		}
	}
	slices.SortFunc(out, func(a, b Holding) int { return strings.Compare(a.Table, b.Table) })
	return out
}

// WriteMoveMetrics writes the moves' series in the Prometheus text
// format: those under way and the records they have yet to replay, those
// done (and the time they took) or superseded, and the shards this host's
// views hold.
func (v *Views) WriteMoveMetrics(w io.Writer) {
	moves := v.Moves()
	var behind uint64
	for _, m := range moves {
		behind += m.Target - min(m.Seq, m.Target)
	}
	held := 0
	for _, h := range v.Holdings() {
		held += h.Held
	}
	st := &v.moves
	fmt.Fprintf(w, "# HELP cairn_view_moves Views being replaced by one holding the shards the placement now gives this host.\n# TYPE cairn_view_moves gauge\ncairn_view_moves %d\n", len(moves))
	fmt.Fprintf(w, "# HELP cairn_view_move_records_behind Records the views being moved have yet to replay to take over.\n# TYPE cairn_view_move_records_behind gauge\ncairn_view_move_records_behind %d\n", behind)
	fmt.Fprintf(w, "# HELP cairn_view_moves_total Moves ended: done (the new view took over) or superseded (a newer placement came first).\n# TYPE cairn_view_moves_total counter\n")
	fmt.Fprintf(w, "cairn_view_moves_total{outcome=\"done\"} %d\ncairn_view_moves_total{outcome=\"superseded\"} %d\n", st.done.Load(), st.superseded.Load())
	fmt.Fprintf(w, "# HELP cairn_view_move_seconds_total Time the moves done took, from the new view's start to its take-over.\n# TYPE cairn_view_move_seconds_total counter\ncairn_view_move_seconds_total %g\n", time.Duration(st.nanos.Load()).Seconds())
	fmt.Fprintf(w, "# HELP cairn_view_shards_held View shards this host's views hold, every table together (a table of the layout before shards counts none).\n# TYPE cairn_view_shards_held gauge\ncairn_view_shards_held %d\n", held)
}
