package natsapi

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections"
)

// Requests that wait and requests that work are bounded apart, so that a
// flood of one kind cannot refuse the other.
//
// A request that waits for a table's view to move (a change feed
// request with "wait" and nothing to read yet, a Retrieve or Query of a
// "position" the view has not reached) is a waiter: a registration on
// the view (projections.Table.Await) and a place in the order of
// deadlines, no goroutine, and nothing on the JetStream server. When the view moves, its wake hands
// the request to a few wake workers, which read its page (one read for
// every waiting feed request alike: same table, position, size and
// partitions) or run its query; when its time runs out, or the node
// stops, it is answered from the view at once (the feed's "nothing
// yet", PositionNotReached, ServerBusy).
//
// A request that works (a feed page to read now, a Query, a Retrieve of
// the past or of a position reached) runs on a goroutine of its own,
// maxWorking of them at once.
const (
	// maxWorking bounds the requests served on goroutines of their own at
	// once; beyond it ServerBusy. Each holds a goroutine (a few KB of
	// stack), and a feed page one of the journal's reads of its table
	// (journal.maxReadsPerTable, 8: the others queue for them).
	maxWorking = 1024
	// maxWaiting bounds the requests waiting for a view at once, counted
	// from their registration until a wake worker takes them; beyond it
	// a waiting request is refused with ServerBusy, and requests that do
	// not wait are not affected. A waiter holds 520-600 bytes and no
	// goroutine (the request's message, the decoded request, the
	// registration; BenchmarkWaitingRequests in cmd/internal/node, with
	// 10,000 and 60,000), so 65,536 of them take some 40 MB: ample for
	// the long-polls of every client, and a flood beyond it costs its
	// sender refusals rather than the node its memory.
	maxWaiting = 1 << 16
	// wakeWorkers is how many goroutines at most serve the requests
	// whose wait ended with a change: a change that wakes thousands of
	// waiting requests of several tables reads their pages a few at a
	// time instead of thousands at once, and leaves maxWorking to the
	// requests that do not wait.
	wakeWorkers = 16
	// refusalLogEvery spaces the log lines about refusals: a flood is
	// refused thousands of times a second, and each is counted anyway
	// (cairn_nats_requests_refused_total).
	refusalLogEvery = 10 * time.Second
)

// refusal is why a request was refused with ServerBusy.
type refusal int

const (
	refusedWorking  refusal = iota // maxWorking requests at work
	refusedWaiting                 // maxWaiting requests waiting
	refusedJournal                 // the reads of a table's journal busy for the request's whole time
	refusedStopping                // the node is stopping
	refusals
)

var refusalNames = [refusals]string{"working", "waiting", "journal_reads", "stopping"}

// errStopping refuses a request when the node stops.
var errStopping = engine.Errorf(engine.CodeServerBusy, "the node is shutting down; ask again")

// refuse counts a refusal, logs it (once every refusalLogEvery at most,
// with how many there were) and returns err.
func (s *Service) refuse(r refusal, err error) error {
	n := s.refused[r].Add(1)
	now := time.Now().UnixNano()
	if last := s.refusalLogged.Load(); now-last >= int64(refusalLogEvery) && s.refusalLogged.CompareAndSwap(last, now) {
		s.log.Warn("NATS requests refused", "reason", refusalNames[r], "refused_total", n, "err", err)
	}
	return err
}

// waitJob is a waiting request: what to do when its wait ends.
type waitJob interface {
	// group names the requests that one serve answers together once
	// woken (a comparable value; nil: this one alone).
	group() any
	// serve answers the request, and the others of its group, after its
	// view moved (or stopped), on a wake worker; ctx ends when the node
	// stops.
	serve(ctx context.Context, others []waitJob)
	// expire answers the request whose wait ended without the view
	// moving: its time ran out, or the node stops (stopping).
	expire(stopping bool)
}

// waitEnd is how a wait ended.
type waitEnd int

const (
	waitWoken waitEnd = iota
	waitTimedOut
	waitStopped
)

// waiter is a request registered on a view, until its wait ends.
type waiter struct {
	s        *Service
	job      waitJob
	ended    atomic.Bool
	deadline time.Time
	index    int // in s.expiry; -1 once out (under s.mu)
	mu       sync.Mutex
	reg      *projections.Wait // set after the registration, under mu
}

// expiryHeap is the waiting requests in order of deadline (container/heap,
// under s.mu): one goroutine ends those whose time ran out, where a
// timer each would start a goroutine each, thousands at once when a
// flood's waits end together (10,000 waits of 2 s ending: 9,089
// goroutines and 35 MB of stacks at the peak with timers, 128 and 1 MB
// with this).
type expiryHeap []*waiter

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *expiryHeap) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *expiryHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.index = -1
	return w
}

// wakeGroup is woken requests that one serve answers.
type wakeGroup struct {
	key  any
	jobs []waitJob
}

// await makes job wait until t's view has moved to position from (a
// record of one of parts, when given; projections.Table.Await), for d at
// the most. It reports whether job waits (then it is answered when the
// wait ends, or was by the node's stop): false when the view is there
// already, and the caller serves the request at once. A refusal
// (maxWaiting requests waiting, the node stopping) is a counted
// ServerBusy.
func (s *Service) await(t *projections.Table, from uint64, parts []string, d time.Duration, job waitJob) (bool, error) {
	if s.waiting.Add(1) > maxWaiting {
		s.waiting.Add(-1)
		return false, s.refuse(refusedWaiting, engine.Errorf(engine.CodeServerBusy,
			"this node holds %d requests waiting for a change already (long-polls of change feeds, reads of a position); retry, or ask without waiting", maxWaiting))
	}
	w := &waiter{s: s, job: job, deadline: time.Now().Add(d)}
	s.mu.Lock()
	if s.off {
		s.mu.Unlock()
		s.waiting.Add(-1)
		return false, s.refuse(refusedStopping, errStopping)
	}
	heap.Push(&s.expiry, w)
	if w.index == 0 {
		s.kickExpiry() // the earliest deadline now
	}
	s.mu.Unlock()
	w.mu.Lock()
	w.reg = t.Await(from, parts, func() { w.end(waitWoken) })
	reg := w.reg
	w.mu.Unlock()
	if reg == nil {
		if !w.ended.CompareAndSwap(false, true) {
			return true, nil // its time ran out, or the stop came, meanwhile: answered
		}
		s.mu.Lock()
		if w.index >= 0 {
			heap.Remove(&s.expiry, w.index)
		}
		s.mu.Unlock()
		s.waiting.Add(-1)
		return false, nil
	}
	if w.ended.Load() {
		reg.Cancel() // ended before it was registered
	}
	return true, nil
}

// kickExpiry tells the expiry goroutine that the earliest deadline moved.
func (s *Service) kickExpiry() {
	select {
	case s.expiryMoved <- struct{}{}:
	default:
	}
}

// expire ends the waits whose time ran out, until ctx ends (Run).
func (s *Service) expire(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		var due []*waiter
		next := time.Hour
		s.mu.Lock()
		for len(s.expiry) > 0 {
			if w := s.expiry[0]; w.deadline.After(now) {
				next = w.deadline.Sub(now)
				break
			}
			due = append(due, heap.Pop(&s.expiry).(*waiter))
		}
		s.mu.Unlock()
		for _, w := range due {
			w.end(waitTimedOut)
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-s.expiryMoved:
		}
	}
}

// end ends the wait, once: a woken request goes to the wake workers, any
// other is answered here (on the expiry goroutine, or the stop's).
func (w *waiter) end(why waitEnd) {
	if !w.ended.CompareAndSwap(false, true) {
		return
	}
	w.mu.Lock()
	reg := w.reg
	w.mu.Unlock()
	if reg != nil {
		reg.Cancel()
	}
	s := w.s
	s.mu.Lock()
	if w.index >= 0 {
		heap.Remove(&s.expiry, w.index)
	}
	if why == waitWoken && !s.off {
		s.enqueueLocked(w.job)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.waiting.Add(-1)
	w.job.expire(why != waitTimedOut)
}

// enqueueLocked hands a woken request to the wake workers, with the
// others of its group already queued, and starts a worker if fewer than
// wakeWorkers run (under s.mu, while the service is not off).
func (s *Service) enqueueLocked(job waitJob) {
	key := job.group()
	if g := s.grouped[key]; key != nil && g != nil {
		g.jobs = append(g.jobs, job)
		return
	}
	g := &wakeGroup{key: key, jobs: []waitJob{job}}
	if key != nil {
		s.grouped[key] = g
	}
	s.woken = append(s.woken, g)
	if s.workers < wakeWorkers {
		s.workers++
		s.wg.Add(1)
		go s.wakeWorker()
	}
}

// wakeWorker serves woken requests until none is queued.
func (s *Service) wakeWorker() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		if len(s.woken) == 0 {
			s.workers--
			s.mu.Unlock()
			return
		}
		g := s.woken[0]
		s.woken[0] = nil
		s.woken = s.woken[1:]
		if g.key != nil {
			delete(s.grouped, g.key)
		}
		s.mu.Unlock()
		s.waiting.Add(-int64(len(g.jobs)))
		if s.feedCtx.Err() != nil {
			for _, j := range g.jobs {
				j.expire(true)
			}
			continue
		}
		g.jobs[0].serve(s.feedCtx, g.jobs[1:])
	}
}

// stopWaiting refuses new waits and work, and answers every waiting
// request at once (Run, as it returns).
func (s *Service) stopWaiting() {
	s.mu.Lock()
	s.off = true
	ws := make([]*waiter, len(s.expiry))
	copy(ws, s.expiry)
	s.mu.Unlock()
	for _, w := range ws {
		w.end(waitStopped)
	}
}

// startWork takes a place for a request served on a goroutine of its own
// (Run waits for them); doneWork gives it back. It refuses with a
// counted ServerBusy when maxWorking are served or the node is stopping.
func (s *Service) startWork() error {
	select {
	case s.working <- struct{}{}:
	default:
		return s.refuse(refusedWorking, engine.Errorf(engine.CodeServerBusy,
			"this node serves %d requests at once already (pages of change feeds, queries, reads of the past or of a position); retry", maxWorking))
	}
	s.mu.Lock()
	off := s.off
	if !off {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if off {
		<-s.working
		return s.refuse(refusedStopping, errStopping)
	}
	return nil
}

func (s *Service) doneWork() { <-s.working; s.wg.Done() }

// positionWait is a Retrieve or a Query waiting for its view to reach a
// position.
type positionWait struct {
	s        *Service
	t        *projections.Table
	position uint64
	answer   func(ctx context.Context) // the request, served once the view is there (or stopped)
	fail     func(err error)           // the request, answered with an error
}

func (p *positionWait) group() any { return nil }

func (p *positionWait) serve(ctx context.Context, _ []waitJob) { p.answer(ctx) }

func (p *positionWait) expire(stopping bool) {
	if stopping {
		p.fail(errStopping)
		return
	}
	p.fail(projections.PositionNotReached(p.t, p.position, p.s.cfg.PositionWait))
}

// waitPosition makes a Retrieve or Query of a position its view t has not
// reached wait for it, then answer; fail answers a refusal. It reports
// whether the request waits or was answered; false: the view is there,
// serve the request now.
func (s *Service) waitPosition(t *projections.Table, position uint64, answer func(ctx context.Context), fail func(error)) bool {
	waits, err := s.await(t, position, nil, s.cfg.PositionWait, &positionWait{s: s, t: t, position: position, answer: answer, fail: fail})
	if err != nil {
		fail(err)
		return true
	}
	return waits
}

// WriteMetrics writes the service's series in the Prometheus text
// format: the requests waiting and working, and the refusals by reason.
func (s *Service) WriteMetrics(w io.Writer) {
	fmt.Fprintln(w, "# HELP cairn_nats_requests_waiting NATS requests waiting for a table's view to move (change feed long-polls, reads of a position).")
	fmt.Fprintln(w, "# TYPE cairn_nats_requests_waiting gauge")
	fmt.Fprintf(w, "cairn_nats_requests_waiting %d\n", s.waiting.Load())
	fmt.Fprintln(w, "# HELP cairn_nats_requests_working NATS requests served on goroutines of their own (change feed pages, queries, reads of the past or of a position).")
	fmt.Fprintln(w, "# TYPE cairn_nats_requests_working gauge")
	fmt.Fprintf(w, "cairn_nats_requests_working %d\n", len(s.working))
	fmt.Fprintln(w, "# HELP cairn_nats_requests_refused_total NATS requests refused with ServerBusy, by reason.")
	fmt.Fprintln(w, "# TYPE cairn_nats_requests_refused_total counter")
	for r := range refusals {
		fmt.Fprintf(w, "cairn_nats_requests_refused_total{reason=%q} %d\n", refusalNames[r], s.refused[r].Load())
	}
}
