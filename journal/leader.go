package journal

import (
	"github.com/nats-io/nats.go"
)

// LeaderElectedSubject is the subject on which JetStream announces a new
// leader of stream.
func LeaderElectedSubject(stream string) string {
	return "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED." + stream
}

// A stream whose leader is lost tells nobody what it had in flight: an
// append sent to it is never answered, a consumer that lived on its
// server never delivers again. JetStream announces the successor, though,
// and the journal listens while it reads a stream (which every host does
// for every live table): readers make their consumer again, and appends
// waiting for an acknowledgement stop waiting and are settled at once,
// from the new leader.

// leaderWatch is one subscription to a stream's leader announcements,
// shared by the readers of the stream.
type leaderWatch struct {
	sub     *nats.Subscription
	users   int
	changed chan struct{} // closed at the next announcement

	probeSeq uint64        // the highest sequence Probe asked for
	probed   chan struct{} // closed at the next Probe of a higher one
}

// watchLeader follows the stream's leader announcements until release is
// called. A connection not allowed to subscribe to them (an external
// server's restricted user) is told so asynchronously: nothing is
// announced then, and readers and appends fall back to their timeouts.
func (j *Journal) watchLeader(stream string) (release func()) {
	j.lmu.Lock()
	defer j.lmu.Unlock()
	w := j.leaders[stream]
	if w == nil {
		w = &leaderWatch{changed: make(chan struct{}), probed: make(chan struct{})}
		sub, err := j.nc.Subscribe(LeaderElectedSubject(stream), func(*nats.Msg) {
			j.lmu.Lock()
			close(w.changed)
			w.changed = make(chan struct{})
			j.lmu.Unlock()
		})
		if err != nil {
			return func() {}
		}
		w.sub = sub
		if j.leaders == nil {
			j.leaders = map[string]*leaderWatch{}
		}
		j.leaders[stream] = w
	}
	w.users++
	return func() {
		j.lmu.Lock()
		defer j.lmu.Unlock()
		if w.users--; w.users == 0 {
			_ = w.sub.Unsubscribe()
			delete(j.leaders, stream)
		}
	}
}

// leaderChanged returns a channel closed at the stream's next leader
// announcement, or nil when nothing watches the stream.
func (j *Journal) leaderChanged(stream string) <-chan struct{} {
	j.lmu.Lock()
	defer j.lmu.Unlock()
	if w := j.leaders[stream]; w != nil {
		return w.changed
	}
	return nil
}

// reconnected returns a channel closed when the journal's connection is
// next connected again after a loss. The first call starts the goroutine
// that follows the connection's status; it ends when the connection is
// closed.
func (j *Journal) reconnected() <-chan struct{} {
	j.lmu.Lock()
	defer j.lmu.Unlock()
	if j.reconn == nil {
		j.reconn = make(chan struct{})
		ch := j.nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
		go func() {
			defer j.nc.RemoveStatusListener(ch)
			for s := range ch {
				if s == nats.CLOSED {
					return
				}
				j.lmu.Lock()
				close(j.reconn)
				j.reconn = make(chan struct{})
				j.lmu.Unlock()
			}
		}()
		if j.nc.IsClosed() {
			j.nc.RemoveStatusListener(ch)
		}
	}
	return j.reconn
}

// Probe asks this host's readers of a table to read its records up to seq
// from a replica now, when their consumer has not delivered them: the
// committer's view has not shown a record it knows is stored, and the
// consumer may have been lost with its server without a word (found
// otherwise only by two missed heartbeats). A reader with nothing missing
// reads nothing; asking again for the same seq does nothing.
func (j *Journal) Probe(table string, epoch uint64, seq uint64) {
	j.lmu.Lock()
	defer j.lmu.Unlock()
	w := j.leaders[StreamName(j.cfg.Prefix, table, epoch)]
	if w == nil || seq <= w.probeSeq {
		return
	}
	w.probeSeq = seq
	close(w.probed)
	w.probed = make(chan struct{})
}

// probeChanged returns a channel closed at the stream's next Probe (nil
// when nothing watches the stream), and the sequence probed so far.
func (j *Journal) probeChanged(stream string) (<-chan struct{}, uint64) {
	j.lmu.Lock()
	defer j.lmu.Unlock()
	if w := j.leaders[stream]; w != nil {
		return w.probed, w.probeSeq
	}
	return nil, 0
}
