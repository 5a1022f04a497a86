package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// Consume delivers the table's records from sequence from on, in journal
// order, to fn, until ctx ends (nil) or fn or decoding fails (that error:
// a record that cannot be decoded is never skipped). pending is the number
// of records the stream holds beyond this one. A record whose partition
// key is not the one its subject names (published there by something
// other than Cairn) stops Consume as an undecodable one does: a
// *CorruptError, wrapping ErrCorrupt, with its sequence.
func (j *Journal) Consume(ctx context.Context, table string, epoch uint64, shards uint32, from uint64, fn func(seq uint64, rec *engine.Record, pending uint64) error) error {
	return j.ConsumeKnown(ctx, table, epoch, shards, from, nil, fn)
}

// ConsumeKnown is Consume with a shortcut for records this host appended:
// known(nonce) may return the record with that nonce, still decoded in
// memory, which is then used instead of decoding the message. Nonces are
// unique, so the record is exactly the one stored.
func (j *Journal) ConsumeKnown(ctx context.Context, table string, epoch uint64, shards uint32, from uint64, known func(nonce string) *engine.Record, fn func(seq uint64, rec *engine.Record, pending uint64) error) error {
	return j.consumeTable(ctx, table, epoch, shards, reading{}, nil, from, known, fn)
}

// ConsumeHeld is ConsumeKnown for a reader that holds some shards of a
// table with shards: a record on a subject of a shard not held is handed
// to fn as nil, without being decoded, so that the reader's position
// still moves past it. Every record is read (pending counts them all).
func (j *Journal) ConsumeHeld(ctx context.Context, table string, epoch uint64, shards uint32, held func(shard uint32) bool, from uint64, known func(nonce string) *engine.Record, fn func(seq uint64, rec *engine.Record, pending uint64) error) error {
	return j.consumeTable(ctx, table, epoch, shards, reading{}, held, from, known, fn)
}

// ConsumeShards is ConsumeKnown for the records of some shards of a
// table with shards (each < shards): those on their partitions' subjects
// (ShardSubjects), which its consumer filters on the server, so that the
// reader is sent nothing else. Sequences are the stream's, with gaps
// where other shards' records are; pending counts only these shards'
// records. A record of another shard read from a replica (a delivery
// lost in transit is read again so) is handed to fn as nil, as
// ConsumeHeld does. stand, when not nil, is how the caller learns where
// the reader stands between its records (Stand): fn is then handed
// (seq, nil, 0) when the reader has learnt that it handed over every
// record of its shards up to seq.
func (j *Journal) ConsumeShards(ctx context.Context, table string, epoch uint64, shards uint32, held []uint32, stand *Stand, from uint64, known func(nonce string) *engine.Record, fn func(seq uint64, rec *engine.Record, pending uint64) error) error {
	if len(held) == 0 {
		return fmt.Errorf("journal: consume no shard of %s", table)
	}
	in := make([]bool, shards)
	rd := reading{stand: stand}
	for _, s := range held {
		if s >= shards {
			return fmt.Errorf("journal: consume shard %d of %s, which has %d", s, table, shards)
		}
		if !in[s] {
			in[s] = true
			rd.filters = append(rd.filters, j.ShardSubjects(table, epoch, s))
		}
	}
	return j.consumeTable(ctx, table, epoch, shards, rd, func(s uint32) bool { return in[s] }, from, known, fn)
}

// A reading is what a reader asks of consume beyond its stream.
type reading struct {
	filters []string // the subjects its consumer filters on; none: all
	stand   *Stand   // how its holder learns where it stands, or nil
}

// consumeTable reads a table's records, those rd filters on, and checks
// each against its subject; with held, those of shards not held are
// handed over as nil.
func (j *Journal) consumeTable(ctx context.Context, table string, epoch uint64, shards uint32, rd reading, held func(uint32) bool, from uint64, known func(nonce string) *engine.Record, fn func(seq uint64, rec *engine.Record, pending uint64) error) error {
	prefix := j.incarnationPrefix(table, epoch)
	var tok []byte
	return j.consume(ctx, StreamName(j.cfg.Prefix, table, epoch), rd, from, func(seq uint64, subj string, data []byte, pending uint64) error {
		if data == nil && subj == "" {
			return fn(seq, nil, pending) // where the reader learnt it stands
		}
		if held != nil && shards > 0 {
			if shard, ok := subjectShard(subj, prefix); ok && shard < shards && !held(shard) {
				return fn(seq, nil, pending)
			}
		}
		var rec *engine.Record
		if known != nil {
			if nonce, ok := PeekNonce(data); ok {
				rec = known(nonce)
			}
		}
		if rec == nil {
			var err error
			if rec, err = DecodeRecord(data); err != nil {
				return &CorruptError{What: table, Seq: seq, Subject: subj, Err: err}
			}
		}
		// The subject names the partition: a record on another
		// partition's subject would escape that partition's
		// concurrency check.
		tok = appendPartitionToken(tok[:0], shards, rec.PartitionKey)
		if len(subj) != len(prefix)+len(tok) || subj[:len(prefix)] != prefix || subj[len(prefix):] != string(tok) {
			return &CorruptError{What: table, Seq: seq, Subject: subj, Err: fmt.Errorf("partition key %q does not belong on subject %q", rec.PartitionKey, subj)}
		}
		return fn(seq, rec, pending)
	})
}

// subjectShard reads the shard a partition's subject names after prefix
// ("s<shard>."); ok is false for a subject of another shape, which the
// record's own check then refuses.
func subjectShard(subj, prefix string) (shard uint32, ok bool) {
	if len(subj) <= len(prefix)+2 || subj[:len(prefix)] != prefix || subj[len(prefix)] != 's' {
		return 0, false
	}
	var n uint64
	i := len(prefix) + 1
	for ; i < len(subj) && subj[i] >= '0' && subj[i] <= '9'; i++ {
		n = n*10 + uint64(subj[i]-'0')
		if n > engine.MaxShards {
			return 0, false
		}
	}
	if i == len(prefix)+1 || i >= len(subj) || subj[i] != '.' {
		return 0, false
	}
	return uint32(n), true
}

// consume reads stream in order from sequence from, through consumers of
// its own (consumeFrom), each made again after the last record delivered
// whenever one is lost.
//
// The client library's ordered consumer is not used: it makes its
// consumer again by itself, inside Next, after a reconnect or missed
// heartbeats, with a fixed 10 s bound on the creation that neither a
// leader announcement nor Stop cuts short. Right after a stream leader's
// SIGKILL that creation goes unanswered until a new leader is elected,
// so a view, and every write waiting to be seen by this host, stalled
// 10 s where the election took 4–6. Here every creation is bounded, short
// right after a loss, and cut short by the stream's next leader
// announcement.
//
// When the stream elects a new leader (JetStream announces it on
// LeaderElectedSubject) and the consumer does not answer at once, the
// consumer is made again from the record after the last one delivered:
// it may have lived on the lost leader's server, which tells nobody. A
// consumer lost otherwise (a follower's, or the server this connection
// was on) is noticed by two missed heartbeats, or by a gap in its delivery
// sequence. A connection not allowed to subscribe to the announcement (an
// external server's restricted user) falls back to the heartbeats.
//
// With filters, the consumer delivers only the records on matching
// subjects; with one filter, replicas are read for those alone, and with
// more, for every record (the caller tells them apart by their subject).
// With a stand, the reader learns where it stands between its records
// (Stand), and hands that over as a sequence without a subject or data.
func (j *Journal) consume(ctx context.Context, stream string, rd reading, from uint64, fn func(seq uint64, subj string, data []byte, pending uint64) error) error {
	defer j.watchLeader(stream)()
	// The consumers left behind are deleted on the side (on a live server
	// they would linger until their inactivity threshold, 5 minutes), and
	// a lost one is logged on the side (logLost).
	var deletes sync.WaitGroup
	defer deletes.Wait()
	// What fn returns ends the reading at once (a record it cannot take
	// is never skipped, and reading it again would not change it).
	var fnErr error
	deliver := func(seq uint64, subj string, data []byte, pending uint64) error {
		fnErr = fn(seq, subj, data, pending)
		return fnErr
	}
	var bound time.Duration // of the consumer's creation: none at first
	for try := 0; ; {
		last, made, restart, err := j.consumeFrom(ctx, stream, rd, from, bound, &deletes, deliver)
		if fnErr != nil {
			return fnErr
		}
		if restart && ctx.Err() == nil {
			deletes.Add(1)
			go func(after uint64, err error) {
				defer deletes.Done()
				j.logLost(ctx, stream, after, err)
			}(max(last, from-1), err)
		}
		if last > 0 {
			from = last + 1
		}
		if made {
			try = 0 // a consumer was made: the next creation is a first try
		}
		if !restart && (err == nil || bound == 0 || errors.Is(err, engine.ErrTableGone)) || try >= 10 {
			return err
		}
		try++
		if restart {
			// Right after a loss a creation may go unanswered (sent
			// to, or placed on, the lost server while the others still
			// count it in): short tries, longer each time, a few of them.
			bound = 250 * time.Millisecond
		} else {
			bound = min(2*bound, 2*time.Second)
		}
		if made && last > 0 {
			continue // it delivered: a new one at once
		}
		if !made {
			// No consumer could be made: JetStream's meta leader, which
			// places consumers, may be electing. Meanwhile the records
			// are read from any replica, so that the view, and the
			// writes waiting to be seen, go on.
			swept := j.sweep(ctx, stream, rd.replicaFilter(), from, deliver)
			if swept > from {
				j.logf("journal: no consumer could be made; read from a replica meanwhile", "stream", stream, "from", from, "to", swept-1)
			}
			from = swept
			if fnErr != nil {
				return fnErr
			}
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil
		}
	}
}

// sweep hands fn the records of stream (matching filter) from sequence
// from on, read with direct gets from any replica, until there is none
// (or an error, or maxGapFill of them), and returns the sequence due
// next.
func (j *Journal) sweep(ctx context.Context, stream, filter string, from uint64, fn func(seq uint64, subj string, data []byte, pending uint64) error) uint64 {
	from = max(from, 1)
	for range maxGapFill {
		seq, subj, data, found, err := j.directGet(ctx, stream, filter, from)
		if err != nil || !found {
			return from // the next consumer, when there is one, says more
		}
		if err := fn(seq, subj, data, 0); err != nil {
			return from
		}
		from = seq + 1
	}
	return from
}

// readerHeartbeat is the idle heartbeat of the readers' consumers.
const readerHeartbeat = time.Second

// consumeFrom runs one consumer on stream from sequence from until ctx
// ends, fn fails, or the consumer is lost (restart, with why: the caller
// makes a new one after last, the last sequence delivered, 0 for none).
// made says the consumer was made. A bound other than 0 limits the wait
// for the consumer's creation, which a leader announcement also ends
// (restart).
func (j *Journal) consumeFrom(ctx context.Context, stream string, rd reading, from uint64, bound time.Duration, deletes *sync.WaitGroup, fn func(seq uint64, subj string, data []byte, pending uint64) error) (last uint64, made, restart bool, err error) {
	filter := rd.replicaFilter()
	elected := j.leaderChanged(stream) // before the consumer: none is missed
	// What the client's ordered consumer makes: an ephemeral consumer in
	// memory, one replica, nothing to acknowledge; the server removes it
	// if this node dies before it deletes it.
	cfg := jetstream.ConsumerConfig{
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: 5 * time.Minute,
	}
	if len(rd.filters) == 1 {
		cfg.FilterSubject = rd.filters[0]
	} else {
		cfg.FilterSubjects = rd.filters
	}
	if from > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if bound > 0 {
		cctx, cancel = context.WithTimeout(ctx, bound)
	}
	var announced atomic.Bool
	if elected != nil {
		stopWatch := make(chan struct{})
		defer close(stopWatch)
		go func(elected <-chan struct{}) {
			select {
			case <-elected:
				announced.Store(true)
				cancel()
			case <-stopWatch:
			case <-cctx.Done():
			}
		}(elected)
	}
	var cons jetstream.Consumer
	if j.noConsumer != nil && j.noConsumer(stream) {
		<-cctx.Done() // a test's meta leader that does not answer
		err = cctx.Err()
	} else {
		cons, err = j.js.CreateConsumer(cctx, stream, cfg)
	}
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return 0, false, false, nil
		}
		if announced.Load() && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return 0, false, true, fmt.Errorf("journal: consume %s: a new leader was announced while the consumer was made", stream) // try again at once
		}
		return 0, false, false, j.createErr(ctx, stream, err)
	}
	if announced.Load() {
		elected = j.leaderChanged(stream) // made after it: the next one
	}
	name := cons.CachedInfo().Name
	drop := func() {
		deletes.Go(func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = j.js.DeleteConsumer(dctx, stream, name)
		})
	}
	// Idle, a heartbeat costs each table's reader one small message a
	// second; two missed ones end the iterator (ErrNoHeartbeat).
	it, err := cons.Messages(jetstream.PullMaxMessages(1024), jetstream.PullHeartbeat(readerHeartbeat), jetstream.WithMessagesErrOnMissingHeartbeat(true))
	if err != nil {
		drop()
		return 0, true, false, fmt.Errorf("journal: consume %s: %w", stream, err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	var again, reconnectLook, woken atomic.Bool
	var probeTo atomic.Uint64 // a Probe's sequence, to read up to
	// Next also returns when the connection has moved to another server:
	// a record delivered meanwhile, the last one written perhaps, was
	// lost, and nothing would come to show it.
	var nmu sync.Mutex
	var ncancel context.CancelFunc
	wakeable := func() jetstream.NextOpt {
		nctx, cancel := context.WithCancel(ctx)
		nmu.Lock()
		ncancel = cancel
		nmu.Unlock()
		return jetstream.NextContext(nctx)
	}
	nextOpt := wakeable()
	defer func() { nmu.Lock(); ncancel(); nmu.Unlock() }()
	// wake makes Next return, to look past the last record.
	wake := func() {
		woken.Store(true)
		nmu.Lock()
		ncancel()
		nmu.Unlock()
	}
	reconnected := j.reconnected()
	probed, _ := j.probeChanged(stream)
	var learnt <-chan struct{} // nil without a stand: never ready
	if rd.stand != nil {
		var asked uint64
		if learnt, asked = rd.stand.changed(); asked > 0 {
			wake() // asked before this consumer was made
		}
	}
	done := make(chan struct{})
	defer close(done)
	go func() { // ends with consumeFrom
		for {
			select {
			case <-learnt:
				learnt, _ = rd.stand.changed()
				wake()
				continue
			case <-elected:
			case <-reconnected:
				reconnected = j.reconnected()
				reconnectLook.Store(true)
				wake()
				continue
			case <-probed:
				var seq uint64
				probed, seq = j.probeChanged(stream)
				probeTo.Store(seq)
				wake()
				continue
			case <-done:
				return
			}
			elected = j.leaderChanged(stream)
			// A consumer whose server is up answers at once: it goes on
			// delivering, and is kept.
			ictx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
			_, err := cons.Info(ictx)
			cancel()
			if err != nil && ctx.Err() == nil {
				again.Store(true)
				it.Stop()
				return
			}
		}
	}()
	var delivered uint64       // the consumer's own sequence: a gap is a lost message
	lastDelivery := time.Now() // a consumer delivering is alive: a probe then reads nothing
	next := max(from, 1)       // the stream sequence due next
	// fill reads the records from next up to until (0: as long as there
	// are some) from any replica, and hands them to fn, each with the
	// records known to follow it: those up to until, and after more
	// (the delivery at until and what its consumer has pending; 0 when
	// nothing is known to come). The consumer is fine, so it goes on after
	// them; making a new consumer instead would need the meta leader,
	// which may be what was lost.
	fill := func(until, after uint64) (restart bool, err error) {
		first := next
		defer func() {
			if next > first {
				j.logf("journal: deliveries lost in transit read from a replica", "stream", stream, "from", first, "to", next-1)
			}
		}()
		for s, n := next, 0; until == 0 || s < until; s, n = s+1, n+1 {
			if n >= maxGapFill {
				return true, fmt.Errorf("journal: consume %s: more than %d deliveries lost from %d", stream, maxGapFill, next)
			}
			got, subj, data, found, err := j.directGet(ctx, stream, filter, s)
			if err != nil {
				return true, fmt.Errorf("journal: consume %s: record %d, lost in transit: %w", stream, s, err)
			}
			if filter != "" && found && until > 0 && got >= until {
				break // none of the filter's lost before until
			}
			if !found {
				if until == 0 || filter != "" {
					return false, nil // nothing more was lost
				}
				continue // removed behind Cairn's back: as the consumer would skip it
			}
			s = got
			p := after // a record's pending holds back its view's publish
			if until > s+1 && filter == "" {
				p += until - s - 1
			}
			if err := fn(s, subj, data, p); err != nil {
				return false, &fnError{err}
			}
			last, next = s, s+1
		}
		return false, nil
	}
	// look reads past the last record up to until (0: as far as there are
	// records). Only what fn returns is an error: a look that fails proves
	// nothing wrong with the consumer, which goes on, and a gap it shows
	// later is filled then.
	look := func(until uint64) error {
		_, err := fill(until, 0)
		if fnErr := (*fnError)(nil); errors.As(err, &fnErr) {
			drop()
			return fnErr.err
		}
		if err != nil {
			j.logf("journal: a reader could not look past its last record", "stream", stream, "after", next-1, "err", err)
		}
		return nil
	}
	// learn answers the stand's question (Stand): it asks the journal
	// for the head it must reach (headOf) on the side, so that
	// deliveries go on meanwhile, and the reader stands at the stream's
	// last sequence once it has handed over the last record of its
	// filters, at once or after the deliveries still to come (settle). A
	// consumer that delivers nothing for probeQuiet while such records
	// are due lost them in transit: it is made again (restart) after the
	// last record handed over. After a question past the stream's end,
	// the next is asked no sooner than standTick after it: made-up
	// positions cost no more than that. A question not answered when the
	// consumer ends is kept for the next one.
	type asked struct {
		h   head
		err error
		to  uint64
	}
	var (
		standAt, standAfter uint64     // stands at standAt once standAfter is handed over (standAt 0: nothing learnt)
		askedAt             time.Time  // when the head was last asked for
		learntAt            time.Time  // when its answer came
		beyond              bool       // the last question was past the stream's end
		heads               chan asked // the head asked for on the side, or nil
		asking              uint64     // the question it answers
	)
	// A question this consumer leaves unanswered is kept for the next
	// (below), which asks it again: this one's requests stop.
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	if rd.stand != nil {
		defer func() {
			if heads != nil {
				rd.stand.keep(asking)
			}
			if standAt >= next {
				rd.stand.keep(standAt)
			}
		}()
	}
	settle := func() error {
		if standAt < next || standAfter >= next {
			return nil
		}
		at := standAt
		standAt = 0
		if err := fn(at, "", nil, 0); err != nil {
			return err
		}
		last, next = at, at+1
		wake() // what was asked meanwhile
		return nil
	}
	learn := func() (restart bool, err error) {
		if heads != nil {
			var a asked
			select {
			case a = <-heads:
				heads = nil
			default:
				return false, nil // its answer wakes the reader
			}
			if a.err != nil {
				if ctx.Err() == nil {
					j.logf("journal: a reader could not learn where it stands", "stream", stream, "after", next-1, "err", a.err)
					rd.stand.keep(a.to)
					time.AfterFunc(probeQuiet, wake)
				}
				return false, nil
			}
			beyond = a.to > a.h.last && a.to != math.MaxUint64
			standAt, standAfter, learntAt = a.h.last, a.h.mine, time.Now()
			if err := settle(); err != nil {
				drop()
				return false, err
			}
		}
		if standAt >= next {
			// Learnt: its records are due, and lost in transit if the
			// consumer delivers nothing for probeQuiet after the answer.
			if quiet := min(time.Since(lastDelivery), time.Since(learntAt)); quiet < probeQuiet {
				time.AfterFunc(probeQuiet-quiet, wake)
				return false, nil
			}
			drop()
			return true, fmt.Errorf("journal: consume %s: records up to %d, due before %d, were lost in transit", stream, standAfter, standAt)
		}
		to := rd.stand.take()
		if to < next {
			return false, nil // past it already
		}
		if wait := standTick - time.Since(askedAt); beyond && wait > 0 {
			rd.stand.keep(to)
			time.AfterFunc(wait, wake)
			return false, nil
		}
		askedAt = time.Now()
		asking = to
		heads = make(chan asked, 1)
		go func(a asked, from uint64, out chan<- asked) {
			a.h, a.err = j.headOf(hctx, stream, rd.filters, from, a.to)
			out <- a
			wake()
		}(asked{to: to}, next, heads)
		return false, nil
	}
	for {
		m, err := it.Next(nextOpt)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return last, true, false, nil // the server removes it when inactive
			case again.Load():
				drop()
				return last, true, true, fmt.Errorf("journal: consume %s: its consumer did not answer after a new leader was announced", stream)
			case woken.Swap(false):
				// After a reconnect: whatever is past the last record.
				// After a Probe: up to its sequence, once the consumer
				// has delivered nothing for probeQuiet (a consumer that
				// delivers is only behind: looked at again then).
				if reconnectLook.Swap(false) {
					if err := look(0); err != nil {
						return last, true, false, err
					}
				}
				if rd.stand != nil {
					if restart, err := learn(); err != nil {
						return last, true, restart, err
					}
				}
				if to := probeTo.Load(); to < next {
					probeTo.CompareAndSwap(to, 0) // delivered meanwhile
				} else if wait := probeQuiet - time.Since(lastDelivery); wait > 0 {
					time.AfterFunc(wait, wake)
				} else if probeTo.CompareAndSwap(to, 0) {
					if err := look(to + 1); err != nil {
						return last, true, false, err
					}
				}
				nextOpt = wakeable()
				if woken.Load() {
					wake() // woken again meanwhile: the new context too
				}
				continue
			case errors.Is(err, jetstream.ErrMsgIteratorClosed):
				return last, true, false, nil
			case errors.Is(err, jetstream.ErrConsumerDeleted), errors.Is(err, jetstream.ErrConsumerNotFound):
				return last, true, true, consumeErr(stream, err)
			}
			// Missed heartbeats, or anything else the consumer met: a
			// new one after the last record delivered.
			drop()
			return last, true, true, consumeErr(stream, err)
		}
		md, err := m.Metadata()
		if err != nil {
			drop()
			return last, true, false, fmt.Errorf("journal: consume %s: %w", stream, err)
		}
		if j.lose != nil && j.lose(stream, md.Sequence.Stream) {
			continue // a test's loss in transit
		}
		seq := md.Sequence.Stream
		if md.Sequence.Consumer != delivered+1 && seq > next {
			// Deliveries lost in transit (while the connection moved).
			if restart, err := fill(seq, 1+md.NumPending); err != nil {
				drop()
				if fnErr := (*fnError)(nil); errors.As(err, &fnErr) {
					return last, true, false, fnErr.err
				}
				return last, true, restart, err
			}
		}
		delivered, lastDelivery = md.Sequence.Consumer, time.Now()
		if seq < next {
			continue // read already, from a replica
		}
		if err := fn(seq, m.Subject(), m.Data(), md.NumPending); err != nil {
			drop()
			return last, true, false, err
		}
		last, next = seq, seq+1
		if err := settle(); err != nil {
			drop()
			return last, true, false, err
		}
	}
}

// probeQuiet is how long a reader's consumer must have delivered nothing
// before a Probe makes it read from a replica: a consumer that delivers is
// alive, only behind, and reading what it is about to deliver would add
// to the load that put it behind.
const probeQuiet = 250 * time.Millisecond

// maxGapFill bounds the records a reader reads one by one to fill a gap
// in its deliveries; a larger gap makes a new consumer. A gap is at most
// what was in flight when the connection moved (a pull of 1,024).
const maxGapFill = 4096

// directGet reads the record at seq of stream from any replica (a direct
// get: no consumer, no leader needed); found is false when the stream
// has no message there. With a filter other than "", it reads the first
// record at or after seq on a matching subject instead, and got is its
// sequence. A replica answers in a millisecond or not at all
// (it died, and the request went to it before its interest was gone):
// each try waits 250 ms, and another is sent, three in all.
func (j *Journal) directGet(ctx context.Context, stream, filter string, seq uint64) (got uint64, subj string, data []byte, found bool, err error) {
	req, err := json.Marshal(directGet{Seq: seq, NextBySubject: filter})
	if err != nil {
		return 0, "", nil, false, err
	}
	var m *nats.Msg
	for try := 0; try < 3; try++ {
		gctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		m, err = j.nc.RequestWithContext(gctx, "$JS.API.DIRECT.GET."+stream, req)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return 0, "", nil, false, err
	}
	if found, err := directFound(m); err != nil || !found {
		return 0, "", nil, false, err
	}
	hdr := m.Header.Get(jetstream.SequenceHeader)
	got, perr := strconv.ParseUint(hdr, 10, 64)
	if perr != nil || got < seq || filter == "" && got != seq {
		return 0, "", nil, false, fmt.Errorf("direct get of %d answered %q", seq, hdr)
	}
	return got, m.Header.Get(jetstream.SubjectHeader), m.Data, true, nil
}

// createErr wraps a consumer's failed creation like consumeErr. A stream
// deleted while its consumer was made fails the creation with words of
// its own ("consumer closed", "stream not valid"), so any other refusal
// by the server asks once whether the stream is still there: one
// JetStream API request. A creation that went unanswered (a meta leader
// electing) asks nothing: the reader reads from a replica meanwhile, and
// that must not wait.
func (j *Journal) createErr(ctx context.Context, stream string, err error) error {
	var api *jetstream.APIError
	if errors.As(err, &api) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, serr := j.js.Stream(sctx, stream)
		cancel()
		if errors.Is(serr, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("journal: consume %s: %w: %v (the stream went while its consumer was made)", stream, engine.ErrTableGone, err)
		}
	}
	return consumeErr(stream, err)
}

// consumeErr wraps a consumer's failure; a stream that does not exist
// wraps engine.ErrTableGone.
func consumeErr(stream string, err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("journal: consume %s: %w: %v", stream, engine.ErrTableGone, err)
	}
	return fmt.Errorf("journal: consume %s: %w", stream, err)
}

// logf logs a reader's recovery at Warn, if the journal has a logger.
func (j *Journal) logf(msg string, args ...any) {
	if j.cfg.Log != nil {
		j.cfg.Log.Warn(msg, args...)
	}
}

// A reader whose consumer the server deleted looks lostLooks times,
// lostLookEvery apart, whether the consumer went with its stream: a
// dropped table's stream is deleted while its consumers get the news,
// and a stream-info request a millisecond after the news may still find
// it. Each look is one JetStream API request, bounded by lostLookEvery.
const (
	lostLooks     = 5
	lostLookEvery = 50 * time.Millisecond
)

// logLost logs a reader's lost consumer (err) at Warn, except when the
// server deleted it with its stream, or the reader's owner stops it
// meanwhile: a dropped table's, whose views stop its readers once the
// catalog's record reaches them. That is logged at Debug; the reader's
// next consumer finds the stream gone and returns engine.ErrTableGone to
// its owner, who knows whether the table was dropped (the views fault a
// table whose stream vanished while the catalog holds it). consume runs
// it on the side, so that the looks do not hold the reader up.
func (j *Journal) logLost(ctx context.Context, stream string, after uint64, err error) {
	if j.cfg.Log == nil {
		return
	}
	for look := 0; look < lostLooks && errors.Is(err, jetstream.ErrConsumerDeleted); look++ {
		lctx, cancel := context.WithTimeout(ctx, lostLookEvery)
		_, serr := j.js.Stream(lctx, stream)
		<-lctx.Done() // the next look a period later
		cancel()
		if ctx.Err() != nil || errors.Is(serr, jetstream.ErrStreamNotFound) {
			j.cfg.Log.Debug("journal: a reader's consumer was deleted with its stream, or the reader stopped", "stream", stream, "after", after)
			return
		}
	}
	j.cfg.Log.Warn("journal: a reader's consumer was lost; making another", "stream", stream, "after", after, "err", err)
}

// fnError is what a reader's callback returned, from inside fill.
type fnError struct{ err error }

func (e *fnError) Error() string { return e.err.Error() }
func (e *fnError) Unwrap() error { return e.err }
