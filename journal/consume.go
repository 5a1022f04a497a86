package journal

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

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
func (j *Journal) consume(ctx context.Context, stream string, from uint64, fn func(seq uint64, subj string, data []byte, pending uint64) error) error {
	// One attempt per reset of the ordered consumer: a failed reset (the
	// stream deleted, the server away) then ends the iterator and the
	// caller sees why, instead of the consumer retrying on its own for
	// ever; callers retry with back-off themselves.
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, MaxResetAttempts: 1}
	if from > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := j.js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return consumeErr(stream, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return fmt.Errorf("journal: consume %s: %w", stream, err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return consumeErr(stream, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("journal: consume %s: %w", stream, err)
		}
		if err := fn(md.Sequence.Stream, m.Subject(), m.Data(), md.NumPending); err != nil {
			return err
		}
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
