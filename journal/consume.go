package journal

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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
func (j *Journal) Consume(ctx context.Context, table string, epoch uint64, from uint64, fn func(seq uint64, rec *engine.Record, pending uint64) error) error {
	return j.ConsumeKnown(ctx, table, epoch, from, nil, fn)
}

// ConsumeKnown is Consume with a shortcut for records this host appended:
// known(nonce) may return the record with that nonce, still decoded in
// memory, which is then used instead of decoding the message. Nonces are
// unique, so the record is exactly the one stored.
func (j *Journal) ConsumeKnown(ctx context.Context, table string, epoch uint64, from uint64, known func(nonce string) *engine.Record, fn func(seq uint64, rec *engine.Record, pending uint64) error) error {
	prefix := j.PartitionSubject(table, epoch, "")
	prefix = prefix[:len(prefix)-len(EncodePartition(""))]
	var tok []byte
	return j.consume(ctx, StreamName(j.cfg.Prefix, table, epoch), from, func(seq uint64, subj string, data []byte, pending uint64) error {
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
		tok = append(tok[:0], 'k')
		tok = base64.RawURLEncoding.AppendEncode(tok, []byte(rec.PartitionKey))
		if len(subj) != len(prefix)+len(tok) || subj[:len(prefix)] != prefix || subj[len(prefix):] != string(tok) {
			return &CorruptError{What: table, Seq: seq, Subject: subj, Err: fmt.Errorf("partition key %q does not belong on subject %q", rec.PartitionKey, subj)}
		}
		return fn(seq, rec, pending)
	})
}

// consume runs an ordered consumer on stream from sequence from.
//
// When the stream elects a new leader (JetStream announces it on
// LeaderElectedSubject) and the consumer does not answer at once, the
// ordered consumer is made again from the record after the last one
// delivered. Its consumer may have lived on the lost leader's server,
// which tells nobody; the client would notice only after two missed
// heartbeats (10 s), and every write waiting to be seen by this host
// would wait that long. A connection not allowed to
// subscribe to the announcement (an external server's restricted user)
// falls back to the heartbeats.
func (j *Journal) consume(ctx context.Context, stream string, from uint64, fn func(seq uint64, subj string, data []byte, pending uint64) error) error {
	defer j.watchLeader(stream)()
	// The consumers left behind are deleted on the side (on a live server
	// they would linger until their inactivity threshold, 5 minutes).
	var deletes sync.WaitGroup
	defer deletes.Wait()
	var bound time.Duration // of the consumer's creation: none at first
	for try := 0; ; {
		last, restart, err := j.consumeFrom(ctx, stream, from, bound, &deletes, fn)
		if last > 0 {
			from, try = last+1, 0
		}
		switch {
		case restart:
			// Right after an election a creation may go unanswered (sent
			// to, or placed on, the lost server while the others still
			// count it in): short tries, longer each time, a few of them.
			bound, try = 250*time.Millisecond, 0
			continue
		case err == nil || bound == 0 || errors.Is(err, engine.ErrTableGone) || try >= 10:
			return err
		}
		try++
		bound = min(2*bound, 2*time.Second)
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil
		}
	}
}

// readerHeartbeat is the idle heartbeat of the readers' consumers.
const readerHeartbeat = time.Second

// consumeFrom runs one ordered consumer on stream from sequence from
// until ctx ends, fn fails or a new leader is announced (restart: the
// caller makes a new one after last, the last sequence delivered, 0 for
// none).
// A bound other than 0 limits the wait for the consumer's creation.
func (j *Journal) consumeFrom(ctx context.Context, stream string, from uint64, bound time.Duration, deletes *sync.WaitGroup, fn func(seq uint64, subj string, data []byte, pending uint64) error) (last uint64, restart bool, err error) {
	// One attempt per reset of the ordered consumer: a failed reset (the
	// stream deleted, the server away) then ends the iterator and the
	// caller sees why, instead of the consumer retrying on its own for
	// ever; callers retry with back-off themselves.
	elected := j.leaderChanged(stream) // before the consumer: none is missed
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, MaxResetAttempts: 1}
	if from > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if bound > 0 {
		cctx, cancel = context.WithTimeout(ctx, bound)
	}
	cons, err := j.js.OrderedConsumer(cctx, stream, cfg)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return 0, false, nil
		}
		return 0, false, consumeErr(stream, err)
	}
	// A consumer lost with its server without a leader announcement (a
	// follower's, or the one this connection was on) is noticed by its
	// missing heartbeats, after two of them: the client's default for an
	// ordered consumer, 5 s, stalled a view's replies 10 s. Idle, a
	// heartbeat costs each table's reader one small message a second.
	it, err := cons.Messages(jetstream.PullMaxMessages(1024), jetstream.PullHeartbeat(readerHeartbeat))
	if err != nil {
		return 0, false, fmt.Errorf("journal: consume %s: %w", stream, err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	var again atomic.Bool
	done := make(chan struct{})
	defer close(done)
	go func() { // ends with consumeFrom
		for {
			select {
			case <-elected:
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
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return last, false, nil
			}
			if again.Load() {
				if info := cons.CachedInfo(); info != nil {
					deletes.Go(func() {
						dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
						defer cancel()
						_ = j.js.DeleteConsumer(dctx, stream, info.Name)
					})
				}
				return last, true, nil
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return last, false, nil
			}
			return last, false, consumeErr(stream, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return last, false, fmt.Errorf("journal: consume %s: %w", stream, err)
		}
		if err := fn(md.Sequence.Stream, m.Subject(), m.Data(), md.NumPending); err != nil {
			return last, false, err
		}
		last = md.Sequence.Stream
	}
}

// consumeErr wraps a consumer's failure; a stream that does not exist
// wraps engine.ErrTableGone.
func consumeErr(stream string, err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("journal: consume %s: %w: %v", stream, engine.ErrTableGone, err)
	}
	return fmt.Errorf("journal: consume %s: %w", stream, err)
}
