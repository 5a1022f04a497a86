package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// A table's history. A table incarnation's stream holds its records from
// its horizon on: 1 until Cairn prunes it, then the first record kept.
// Cairn says where it pruned, and the table's retention, in the stream's
// own metadata, so that they travel with the stream (a backup, a new
// node) and cost no request beyond the stream information a reader
// fetches anyway:
//
//   - MetaHorizon, the sequence below which Cairn removes the records
//     (RecordHorizon, before the purge, PurgeBelow: a crash between the
//     two leaves a horizon no record is missing below, and the next prune
//     purges);
//   - MetaRetention, the table's retention as an operator set it ("" or
//     absent: the node's default).
//
// Records missing below the stream's first sequence while MetaHorizon is
// lower were removed behind Cairn's back (RemovedRecords).
const (
	MetaHorizon   = "cairn_horizon"
	MetaRetention = "cairn_retention"
)

// History is what a table incarnation's stream says of its history.
type History struct {
	// First and Last are the stream's first and last sequence (First is
	// Last+1 when it holds no record).
	First, Last uint64
	// Records and Bytes are what it holds.
	Records, Bytes uint64
	// Horizon is where Cairn pruned it (1: never).
	Horizon uint64
	// Retention is the table's own retention ("": the node's default).
	Retention string
}

// History returns what the stream of a table incarnation says of its
// history (one stream information request). A missing stream wraps
// engine.ErrTableGone.
func (j *Journal) History(ctx context.Context, table string, epoch uint64) (History, error) {
	s, err := j.tableStream(ctx, table, epoch)
	if err != nil {
		return History{}, fmt.Errorf("journal: history of %s: %w", table, err)
	}
	return HistoryOf(s.CachedInfo()), nil
}

// HistoryOf reads a table stream's information.
func HistoryOf(info *jetstream.StreamInfo) History {
	st := info.State
	h := History{First: st.FirstSeq, Last: st.LastSeq, Records: st.Msgs, Bytes: st.Bytes, Horizon: 1, Retention: info.Config.Metadata[MetaRetention]}
	if h.First == 0 {
		h.First = h.Last + 1
	}
	if v, err := strconv.ParseUint(info.Config.Metadata[MetaHorizon], 10, 64); err == nil && v > 1 {
		h.Horizon = v
	}
	return h
}

// tableStream returns a table incarnation's stream; a missing one wraps
// engine.ErrTableGone.
func (j *Journal) tableStream(ctx context.Context, table string, epoch uint64) (jetstream.Stream, error) {
	s, err := j.js.Stream(ctx, StreamName(j.cfg.Prefix, table, epoch))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		err = engine.ErrTableGone
	}
	return s, err
}

// SetRetention records a table incarnation's retention in its stream's
// metadata ("" removes it: the node's default applies). The value is the
// caller's to check.
func (j *Journal) SetRetention(ctx context.Context, table string, epoch uint64, retention string) error {
	return j.updateMetadata(ctx, table, epoch, func(md map[string]string) bool {
		if md[MetaRetention] == retention {
			return false
		}
		if retention == "" {
			delete(md, MetaRetention)
		} else {
			md[MetaRetention] = retention
		}
		return true
	})
}

// RecordHorizon records in a table incarnation's stream's metadata that
// Cairn removes its records below before: the first of the two steps of a
// prune, so that no record is ever missing below a horizon not recorded
// (RemovedRecords). A horizon at or below the one recorded changes
// nothing. Cost: a stream information request, and an update when the
// horizon moves.
func (j *Journal) RecordHorizon(ctx context.Context, table string, epoch uint64, before uint64) error {
	return j.updateMetadata(ctx, table, epoch, func(md map[string]string) bool {
		if v, err := strconv.ParseUint(md[MetaHorizon], 10, 64); err == nil && v >= before {
			return false
		}
		md[MetaHorizon] = strconv.FormatUint(before, 10)
		return true
	})
}

// PurgeBelow removes a table incarnation's records below before, which
// RecordHorizon must have recorded (a crash between the two leaves the
// records, and the next prune purges them). Removing records the views,
// the outbox or a new node still need is the caller's to rule out. Cost:
// a stream information request, the purge, and a stream information
// request to count what went.
func (j *Journal) PurgeBelow(ctx context.Context, table string, epoch uint64, before uint64) (Pruned, error) {
	s, err := j.tableStream(ctx, table, epoch)
	if err != nil {
		return Pruned{}, fmt.Errorf("journal: prune %s: %w", table, err)
	}
	if h := HistoryOf(s.CachedInfo()); h.Horizon < before {
		return Pruned{}, fmt.Errorf("journal: prune %s below %d: the recorded horizon is %d", table, before, h.Horizon)
	}
	was := s.CachedInfo().State
	if err := s.Purge(ctx, jetstream.WithPurgeSequence(before)); err != nil {
		return Pruned{}, fmt.Errorf("journal: prune %s below %d: %w", table, before, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return Pruned{}, fmt.Errorf("journal: prune %s: %w", table, err)
	}
	now := info.State
	return Pruned{Records: was.Msgs - min(now.Msgs, was.Msgs), Bytes: was.Bytes - min(now.Bytes, was.Bytes)}, nil
}

// Pruned is what a purge removed.
type Pruned struct {
	Records, Bytes uint64
}

// updateMetadata changes a table incarnation's stream's metadata with
// change (which reports whether it changed anything) and updates the
// stream when it did.
func (j *Journal) updateMetadata(ctx context.Context, table string, epoch uint64, change func(map[string]string) bool) error {
	s, err := j.tableStream(ctx, table, epoch)
	if err != nil {
		return fmt.Errorf("journal: metadata of %s: %w", table, err)
	}
	cfg := s.CachedInfo().Config
	md := make(map[string]string, len(cfg.Metadata)+1)
	for k, v := range cfg.Metadata {
		md[k] = v
	}
	if !change(md) {
		return nil
	}
	cfg.Metadata = md
	if _, err := j.js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("journal: metadata of %s: %w", table, err)
	}
	return nil
}

// directGetByTime asks for the first message stored at or after a time.
type directGetByTime struct {
	StartTime time.Time `json:"start_time"`
}

// FirstSince returns the sequence of a table incarnation's first record
// stored at or after t (by the server's clock when it stored it), or 0
// when every record is older. One direct get, which any replica answers.
func (j *Journal) FirstSince(ctx context.Context, table string, epoch uint64, t time.Time) (uint64, error) {
	stream := StreamName(j.cfg.Prefix, table, epoch)
	req, err := json.Marshal(directGetByTime{StartTime: t.UTC()})
	if err != nil {
		return 0, err
	}
	m, err := j.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream, req)
	if err != nil {
		return 0, fmt.Errorf("journal: first record of %s since %s: %w", table, t.Format(time.RFC3339), err)
	}
	found, err := directFound(m)
	if err != nil || !found {
		if err != nil {
			err = fmt.Errorf("journal: first record of %s since %s: %w", table, t.Format(time.RFC3339), err)
		}
		return 0, err
	}
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("journal: first record of %s since %s: no sequence in the answer: %w", table, t.Format(time.RFC3339), err)
	}
	return seq, nil
}
