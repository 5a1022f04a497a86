package journal

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// A Stand is how the holder of a reader of some shards (ConsumeShards)
// learns where the reader stands between its records. Such a reader is
// sent only its shards' records, so its last record says nothing of the
// others: a wait for a position that is another shard's record would
// never end. Learn asks the reader to find out (headOf). Unless the
// position is a record of its own shards, which comes anyway, it asks
// the stream's leader for the stream's last sequence L, then for the
// last record of each of its shards (one request each); every record of
// its shards at or below L is at or below the highest of those, M. Once the
// reader has handed over M, at once or when its consumer delivers it, it
// hands over L with a nil record, and its holder stands there.
//
// A reader's consumer is no measure of this: JetStream acknowledges a
// stored record to its writer before it counts the record pending for
// the consumers it matches (from a goroutine of its own), and a filtered
// consumer moves its stream sequence past other subjects' records only
// when it looks for its next record. The leader's store holds every
// record acknowledged. Learning is bounded by the stream: a sequence past
// its end moves the reader only to the end, so a position a client made
// up cannot make a holder skip the records still to come.
type Stand struct {
	mu   sync.Mutex
	want uint64        // the highest sequence asked for and not yet learnt
	ch   chan struct{} // closed at the next Learn of a higher one
}

// NewStand returns a Stand for one reader at a time.
func NewStand() *Stand { return &Stand{ch: make(chan struct{})} }

// Learn asks the reader to learn whether it stands at seq or past it
// (math.MaxUint64: at the stream's end, wherever that is). Calls before
// the reader handled the last one are folded into one.
func (s *Stand) Learn(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq > s.want {
		s.want = seq
		close(s.ch)
		s.ch = make(chan struct{})
	}
}

// keep puts seq back as asked for, without waking the reader: it tries
// again by itself.
func (s *Stand) keep(seq uint64) {
	s.mu.Lock()
	s.want = max(s.want, seq)
	s.mu.Unlock()
}

// take returns what was asked for and forgets it.
func (s *Stand) take() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.want
	s.want = 0
	return w
}

// changed returns a channel closed at the next Learn of a higher
// sequence, and what is asked for now.
func (s *Stand) changed() (<-chan struct{}, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch, s.want
}

// head is what a filtered reader learnt of the journal: its stream's
// last sequence, read first, and the highest sequence of a record on
// any of its filters' subjects, read after. Every record of its filters
// at or below last is at or below mine: once the reader has handed over
// mine, it stands at last.
type head struct {
	last, mine uint64
}

// headOf learns what a reader of filters that has handed over every
// record of them before next must hand over to stand at to. First the
// record at to, from any replica: when it is on one of the filters, the
// reader stands there once it has handed it over, and nothing more is
// asked (a question at the position of a record of its own, which comes
// anyway). Otherwise the stream's leader is asked for its state, then,
// when its last sequence is next or beyond (there is something to learn),
// for the last record of each filter, at most headRequests at once. The
// leader answers, never a replica (a direct get): a replica may not hold
// yet a record already acknowledged to its writer, and the reader would
// then stand past it.
func (j *Journal) headOf(ctx context.Context, stream string, filters []string, next, to uint64) (head, error) {
	ctx, cancel := context.WithTimeout(ctx, standTimeout)
	defer cancel()
	if to != math.MaxUint64 {
		// A replica that does not hold it yet says so: the leader is
		// asked then.
		if _, subj, _, found, err := j.directGet(ctx, stream, "", to); err == nil && found && matchesAny(subj, filters) {
			return head{last: to, mine: to}, nil
		}
	}
	s, err := j.js.Stream(ctx, stream)
	if err != nil {
		return head{}, err
	}
	h := head{last: s.CachedInfo().State.LastSeq}
	if h.last < next {
		return h, nil
	}
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	sem := make(chan struct{}, headRequests)
	for _, f := range filters {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			seq, err := j.lastOn(ctx, stream, f)
			mu.Lock()
			defer mu.Unlock()
			h.mine = max(h.mine, seq)
			if err != nil && first == nil {
				first = err
			}
		})
	}
	wg.Wait()
	return h, first
}

// matchesAny says whether subj matches one of filters.
func matchesAny(subj string, filters []string) bool {
	return slices.ContainsFunc(filters, func(f string) bool { return server.SubjectMatchesFilter(subj, f) })
}

// headRequests bounds the requests of one headOf in flight at once.
const headRequests = 16

const (
	// standTimeout bounds the requests of one learning.
	standTimeout = 2 * time.Second
	// standTick is how long a reader waits after learning where it
	// stands before it asks again for a position past the stream's end
	// it learnt.
	standTick = 100 * time.Millisecond
)

// replicaFilter is what a direct get of the reading filters on: its one
// filter subject, or "" (every record) for none or several.
func (rd reading) replicaFilter() string {
	if len(rd.filters) == 1 {
		return rd.filters[0]
	}
	return ""
}
