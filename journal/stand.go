package journal

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A Stand is how the holder of a reader of some shards (ConsumeShards)
// learns where the reader stands between its records. Such a reader is
// sent only its shards' records, so its last record says nothing of the
// others: a wait for a position that is another shard's record would
// never end. Learn asks the reader to find out, in two requests, whether
// it has handed over every record of its shards up to the stream's last
// sequence; when it has, it hands over that sequence with a nil record,
// and its holder stands there.
//
// The reader does so at once when it is idle; a reader still delivering
// does so when its consumer next says nothing is pending. Learning is
// bounded by the stream: a sequence past its end moves the reader only
// to the end, so a position a client made up cannot make a holder skip
// the records still to come.
type Stand struct {
	mu   sync.Mutex
	want uint64        // the highest sequence asked for and not yet learnt
	ch   chan struct{} // closed at the next Learn of a higher one
}

// NewStand returns a Stand for one reader at a time.
func NewStand() *Stand { return &Stand{ch: make(chan struct{})} }

// Learn asks the reader to learn whether it stands at seq or past it.
// Calls before the reader handled the last one are folded into one.
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

// standing is what a filtered reader learnt of where it stands.
type standing struct {
	settled bool   // every record of its filter up to last was handed over
	last    uint64 // the stream's last sequence, read first
	lost    bool   // its consumer delivered more than the reader received
}

// standOf learns where the reader of cons stands, received being the
// consumer sequence of the last delivery it received. The stream's last
// sequence L is read first, then the consumer's state: when nothing is
// pending for it and it delivered nothing the reader did not receive,
// every record of its filter stored before the second request, so every
// one at or below L, was handed over. (The consumer's delivered stream
// sequence is no measure: a filtered consumer that finds nothing more
// moves it to the stream's end.)
func (j *Journal) standOf(ctx context.Context, stream string, cons jetstream.Consumer, received uint64) (standing, error) {
	ctx, cancel := context.WithTimeout(ctx, standTimeout)
	defer cancel()
	s, err := j.js.Stream(ctx, stream)
	if err != nil {
		return standing{}, err
	}
	last := s.CachedInfo().State.LastSeq
	info, err := cons.Info(ctx)
	if err != nil {
		return standing{}, err
	}
	lost := info.Delivered.Consumer > received
	return standing{settled: info.NumPending == 0 && !lost, last: last, lost: lost}, nil
}

// standTimeout bounds the two requests of one learning.
const standTimeout = 2 * time.Second

// replicaFilter is what a direct get of the reading filters on: its one
// filter subject, or "" (every record) for none or several.
func (rd reading) replicaFilter() string {
	if len(rd.filters) == 1 {
		return rd.filters[0]
	}
	return ""
}
