package outbox

import (
	"context"
	"strconv"
	"sync/atomic"
)

// positioner stores a table's position (pos.<stream>) from a goroutine of
// its own, so that the worker asks for a store without waiting for the
// bucket. The worker asks every checkpointMessages deliveries and every
// Config.CheckpointEvery; a request not yet stored is replaced by a newer
// one. So after a crash the relay publishes again at most the messages
// delivered since the last store: about checkpointMessages plus what is
// delivered during one store's round trip, whatever the rate, and all
// that was delivered in CheckpointEvery when the rate is low
// (docs/PERFORMANCE.md, The outbox relay).
type positioner struct {
	w      *worker
	want   chan uint64 // the newest position to store, one at most
	stored atomic.Uint64
	done   chan struct{}
}

// checkpointMessages is how many deliveries the worker lets pass before
// it asks for its position to be stored: the bound of what a crash
// publishes again at high rates. One store per 128 messages costs the
// bucket less than 1 % of the publishes, and computing the position
// (worker.low, a pass over the partitions waiting) once per 128
// deliveries is cheap beside them.
const checkpointMessages = 128

func newPositioner(w *worker, pos uint64) *positioner {
	p := &positioner{w: w, want: make(chan uint64, 1), done: make(chan struct{})}
	p.stored.Store(pos)
	return p
}

// run stores what the worker asks for until ctx ends.
func (p *positioner) run(ctx context.Context) {
	defer close(p.done)
	for {
		select {
		case <-ctx.Done():
			return
		case pos := <-p.want:
			p.store(ctx, pos)
		}
	}
}

// ask asks for pos to be stored (the worker's goroutine only). A
// position not stored yet is asked for again: a store that failed (the
// bucket electing a leader) is tried again at the next ask, even when
// the table is idle.
func (p *positioner) ask(pos uint64) {
	if pos <= p.stored.Load() {
		return
	}
	select {
	case <-p.want: // replaced by the newer one
	default:
	}
	p.want <- pos // never blocks: the worker alone sends, and emptied it
}

// store stores pos unless a larger one is stored.
func (p *positioner) store(ctx context.Context, pos uint64) {
	if pos <= p.stored.Load() {
		return
	}
	if _, err := p.w.r.kv.Put(ctx, posKey(p.w.stream), []byte(strconv.FormatUint(pos, 10))); err != nil {
		if ctx.Err() == nil {
			p.w.r.cfg.Log.Warn("outbox: cannot store the position", "table", p.w.table, "err", err)
		}
		return
	}
	p.stored.Store(pos)
}
