package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// Append stores rec in the partition's journal if the partition's last
// sequence is still expectLast (0: the partition has no record yet) and
// returns the record's sequence. Errors wrapping engine.ErrConflict,
// engine.ErrTableGone and engine.ErrNotSent mean nothing was stored; any
// other error leaves the outcome unknown (see NextRecord). Appends to
// different partitions run concurrently over one connection.
func (j *Journal) Append(ctx context.Context, table string, epoch uint64, shards uint32, rec *engine.Record, expectLast uint64) (uint64, error) {
	data, err := EncodeRecord(rec)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", engine.ErrNotSent, err)
	}
	subj := j.PartitionSubject(table, epoch, shards, rec.PartitionKey)
	stream := StreamName(j.cfg.Prefix, table, epoch)
	seq, err := j.publish(ctx, subj, data, expectLast, j.cfg.AppendTimeout, j.leaderChanged(stream))
	if err != nil {
		if errors.Is(err, errNoStream) {
			// No stream took it: gone, or between two leaders (which may
			// not answer either, hence the bound).
			sctx, cancel := context.WithTimeout(ctx, j.cfg.AppendTimeout)
			_, serr := j.js.Stream(sctx, stream)
			cancel()
			if errors.Is(serr, jetstream.ErrStreamNotFound) {
				err = engine.ErrTableGone
			}
		}
		return 0, fmt.Errorf("journal: append %s/%q: %w", table, rec.PartitionKey, err)
	}
	return seq, nil
}

var errNoStream = errors.New("no stream answered")

// publish sends one conditional append and waits up to timeout for its
// acknowledgement, or until leader is closed (the stream announced a new
// leader: the one it was sent to may be lost with it).
func (j *Journal) publish(ctx context.Context, subj string, data []byte, expectLast uint64, timeout time.Duration, leader <-chan struct{}) (uint64, error) {
	if j.failAppend != nil {
		if err := j.failAppend(subj, data); err != nil {
			return 0, err
		}
	}
	lost := j.loseAck != nil && j.loseAck(subj)
	f, err := j.js.PublishMsgAsync(&nats.Msg{Subject: subj, Data: data}, jetstream.WithExpectLastSequencePerSubject(expectLast))
	if err != nil {
		// Refused before anything was sent (too large, connection closed).
		return 0, fmt.Errorf("%w: %w", engine.ErrNotSent, err)
	}
	if lost {
		select { // the append is carried out, its answer lost on the way
		case <-f.Ok():
		case <-f.Err():
		case <-ctx.Done():
		}
		return 0, errors.New("no acknowledgement: lost on its way")
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case ack := <-f.Ok():
		return ack.Sequence, nil
	case err := <-f.Err():
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return 0, engine.ErrConflict
		}
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			return 0, fmt.Errorf("%w: %v", errNoStream, err)
		}
		return 0, err
	case <-t.C:
		return 0, fmt.Errorf("no acknowledgement within %v", timeout)
	case <-leader:
		return 0, errors.New("the stream announced a new leader before the acknowledgement")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// LastSeq returns the sequence of the partition's last record (0: none),
// as the stream's leader holds it: the leader that refused an append for
// a record holds that record, a replica may not yet.
func (j *Journal) LastSeq(ctx context.Context, table string, epoch uint64, shards uint32, pk string) (uint64, error) {
	seq, err := j.lastOn(ctx, StreamName(j.cfg.Prefix, table, epoch), j.PartitionSubject(table, epoch, shards, pk))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		err = engine.ErrTableGone
	}
	if err != nil {
		return 0, fmt.Errorf("journal: last sequence of %s/%q: %w", table, pk, err)
	}
	return seq, nil
}

// LastStreamSeq returns the last sequence of a table's whole stream.
func (j *Journal) LastStreamSeq(ctx context.Context, table string, epoch uint64) (uint64, error) {
	s, err := j.js.Stream(ctx, StreamName(j.cfg.Prefix, table, epoch))
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			err = engine.ErrTableGone
		}
		return 0, fmt.Errorf("journal: stream of %s: %w", table, err)
	}
	return s.CachedInfo().State.LastSeq, nil
}

// StreamBounds returns the first and last sequence of a table's whole
// stream: first is 1 (or 0 while the stream is empty) until Cairn prunes
// the table's history (History.Horizon); a first beyond the horizon means
// records were removed behind Cairn's back (RemovedRecords).
func (j *Journal) StreamBounds(ctx context.Context, table string, epoch uint64) (first, last uint64, err error) {
	s, err := j.js.Stream(ctx, StreamName(j.cfg.Prefix, table, epoch))
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			err = engine.ErrTableGone
		}
		return 0, 0, fmt.Errorf("journal: stream of %s: %w", table, err)
	}
	st := s.CachedInfo().State
	return st.FirstSeq, st.LastSeq, nil
}

// RemovedRecords reports whether records were removed from a table
// incarnation's stream behind Cairn's back since they were appended: a
// purge beyond the horizon Cairn recorded when it pruned (History), or a
// message deleted inside the stream. It returns the stream's history
// (first and last sequence, the horizon) too.
func (j *Journal) RemovedRecords(ctx context.Context, table string, epoch uint64) (removed bool, h History, err error) {
	s, err := j.tableStream(ctx, table, epoch)
	if err != nil {
		return false, History{}, fmt.Errorf("journal: stream of %s: %w", table, err)
	}
	info := s.CachedInfo()
	h = HistoryOf(info)
	st := info.State
	return st.LastSeq > 0 && (st.FirstSeq > h.Horizon || st.NumDeleted > 0), h, nil
}

// NextRecord returns the sequence and nonce of the partition's first
// record after sequence after: seq 0 when there is none yet, nonce "" when
// the record has none this code can read. It reads the nonce without
// decoding the record.
//
// Every append carries the partition's expected last sequence, so once a
// record follows sequence E, no append made with E can be stored any more:
// the first record after E settles every such append. That is how a
// committer learns what became of an append whose acknowledgement was
// lost.
//
// It is one direct get, which any replica of the stream answers, with or
// without a leader: the settling of appends goes on while a stream elects
// one. A replica may lag behind the leader and answer "none yet" for a
// record already stored; the committer then sends the identical append
// again, which cannot be stored twice, and looks again.
func (j *Journal) NextRecord(ctx context.Context, table string, epoch uint64, shards uint32, pk string, after uint64) (seq uint64, nonce string, err error) {
	stream := StreamName(j.cfg.Prefix, table, epoch)
	req, err := json.Marshal(directGet{Seq: after + 1, NextBySubject: j.PartitionSubject(table, epoch, shards, pk)})
	if err != nil {
		return 0, "", err
	}
	m, err := j.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream, req)
	if errors.Is(err, nats.ErrNoResponders) {
		// No replica serves the stream: gone, or not there yet.
		if _, serr := j.js.Stream(ctx, stream); errors.Is(serr, jetstream.ErrStreamNotFound) {
			err = engine.ErrTableGone
		}
	}
	if err != nil {
		return 0, "", fmt.Errorf("journal: next record of %s/%q: %w", table, pk, err)
	}
	if found, err := directFound(m); err != nil || !found {
		if err != nil {
			err = fmt.Errorf("journal: next record of %s/%q: %w", table, pk, err)
		}
		return 0, "", err
	}
	seq, err = strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("journal: next record of %s/%q: no sequence in the answer: %w", table, pk, err)
	}
	nonce, _ = PeekNonce(m.Data)
	return seq, nonce, nil
}

// ShardLast returns the sequence of the last record of one shard of a
// table with shards (0: none), as the stream's leader holds it: every
// record acknowledged to its writer is there (a replica may lag).
func (j *Journal) ShardLast(ctx context.Context, table string, epoch uint64, shard uint32) (uint64, error) {
	seq, err := j.lastOn(ctx, StreamName(j.cfg.Prefix, table, epoch), j.ShardSubjects(table, epoch, shard))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		err = engine.ErrTableGone
	}
	if err != nil {
		return 0, fmt.Errorf("journal: shard %d of %s: %w", shard, table, err)
	}
	return seq, nil
}

// directFound reads a direct get's answer: found is false for "no
// message" (404); another status is an error.
func directFound(m *nats.Msg) (found bool, err error) {
	status := m.Header.Get("Status")
	switch {
	case len(m.Data) > 0 || status == "":
		return true, nil
	case status == "404":
		return false, nil
	}
	return false, fmt.Errorf("direct get: %s %s", status, m.Header.Get("Description"))
}

// directGet is a direct get request: the first message at or after Seq
// on subject NextBySubject.
type directGet struct {
	Seq           uint64 `json:"seq"`
	NextBySubject string `json:"next_by_subj,omitempty"`
}
