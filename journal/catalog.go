package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// AppendCatalog stores a catalog record if the name's last catalog
// sequence is still expectLast (0: the name never had a record) and returns
// its sequence. Two hosts creating the same name race here and exactly one
// wins; the other gets an error wrapping engine.ErrConflict and nothing is
// stored.
func (j *Journal) AppendCatalog(ctx context.Context, rec *engine.CatalogRecord, expectLast uint64) (uint64, error) {
	data, err := EncodeCatalogRecord(rec)
	if err != nil {
		return 0, err
	}
	seq, err := j.appendCatalog(ctx, j.catalogSubject(rec.Name), data, expectLast)
	if err != nil {
		return 0, fmt.Errorf("journal: catalog %s: %w", rec.Name, err)
	}
	return seq, nil
}

// appendCatalog sends the append and, while its outcome is unknown (no
// acknowledgement within Config.AppendTimeout, or the catalog announced a
// new leader: the one it was sent to may have been lost with it), sends it
// again with the same expected sequence until Config.CatalogTimeout has
// passed. A retry that conflicts settles it: the record then at the
// subject's head is either this one (stored by an earlier try: its
// sequence is returned) or another host's (ErrConflict). A new leader
// holds every record the old one had acknowledged or would have, so the
// head is final, unless it is still the record this append was to follow
// (none when expectLast is 0): the leader also refuses an append to a
// subject while an earlier one to it is proposed to the replicas and not
// yet stored, an earlier try of this append. It is then sent again: the
// try in flight lands (and the next refusal finds it at the head), or was
// lost with its leader (and this one is stored).
func (j *Journal) appendCatalog(ctx context.Context, subj string, data []byte, expectLast uint64) (uint64, error) {
	stream := CatalogStreamName(j.cfg.Prefix)
	deadline := time.Now().Add(j.cfg.CatalogTimeout)
	pause := 50 * time.Millisecond
	for try := 0; ; try++ {
		wait := min(j.cfg.AppendTimeout, time.Until(deadline))
		seq, err := j.publish(ctx, subj, data, expectLast, wait, j.leaderChanged(stream))
		if errors.Is(err, engine.ErrConflict) && try > 0 {
			if seq, err = j.catalogHead(ctx, stream, subj, data, expectLast, deadline); !errors.Is(err, errHeadBefore) {
				return seq, err
			}
		}
		switch {
		case err == nil:
			return seq, nil
		case errors.Is(err, engine.ErrConflict), errors.Is(err, engine.ErrNotSent), ctx.Err() != nil:
			return 0, err
		case time.Until(deadline) <= 0:
			return 0, fmt.Errorf("%w (tried %d times in %v)", err, try+1, j.cfg.CatalogTimeout)
		}
		if errors.Is(err, errNoStream) || errors.Is(err, errHeadBefore) { // no one to ask yet, or a try still in flight
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			pause = min(2*pause, time.Second)
		}
	}
}

// errHeadBefore: a refused retry found the subject's head still at the
// record it was to follow (catalogHead).
var errHeadBefore = errors.New("settle an append whose first try went unanswered: a retry was refused while the subject's head is still the record it follows (an earlier try in flight)")

// catalogHead returns the sequence of the record at subj's head if it is
// data, ErrConflict if it is another record, and errHeadBefore if it is
// still the one this append follows (none when expectLast is 0). The
// leader that refused the retry holds the record it refused for, or is
// storing it; a replica might not yet, so the leader is asked, again
// while the catalog elects one, until deadline.
func (j *Journal) catalogHead(ctx context.Context, stream, subj string, data []byte, expectLast uint64, deadline time.Time) (uint64, error) {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		rctx, cancel := context.WithTimeout(ctx, max(j.cfg.AppendTimeout, time.Second))
		r, err := j.lastRecord(rctx, stream, subj)
		cancel()
		switch {
		case err == nil && (r == nil && expectLast == 0 || r != nil && r.Seq == expectLast):
			return 0, errHeadBefore
		case err == nil && r == nil:
			// Nothing there, though a record was: only a purge of the
			// catalog behind Cairn's back does that.
			return 0, fmt.Errorf("settle an append whose first try went unanswered: a retry was refused, yet %s holds no record", subj)
		case err == nil && bytes.Equal(r.Data, data):
			return r.Seq, nil
		case err == nil:
			return 0, engine.ErrConflict
		case ctx.Err() != nil || !(Transient(err) || errors.Is(err, nats.ErrNoResponders)) || time.Until(deadline) <= 0:
			return 0, fmt.Errorf("settle an append whose first try went unanswered: %w", err)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// CatalogSubjectName returns the lowercase table name a catalog subject
// names (whatever follows "<prefix>.catalog."): where a catalog record
// that cannot be used still moved that name's sequence.
func (j *Journal) CatalogSubjectName(subj string) string {
	return strings.TrimPrefix(subj, j.cfg.Prefix+".catalog.")
}

// ErrCatalogGone: the catalog stream does not exist (deleted behind
// Cairn's back: Init makes it, and nothing in Cairn deletes it). The
// tables it named are then known only to the views that had read it.
var ErrCatalogGone = errors.New("the catalog stream does not exist")

// LastCatalogSeq returns the catalog stream's last sequence; an error
// wrapping ErrCatalogGone when the stream does not exist.
func (j *Journal) LastCatalogSeq(ctx context.Context) (uint64, error) {
	s, err := j.js.Stream(ctx, CatalogStreamName(j.cfg.Prefix))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		err = fmt.Errorf("%w: %w", ErrCatalogGone, err)
	}
	if err != nil {
		return 0, fmt.Errorf("journal: catalog: %w", err)
	}
	return s.CachedInfo().State.LastSeq, nil
}

// WatchCatalog delivers every catalog record from sequence from on to fn,
// then follows new ones, until ctx ends (nil) or fn fails (that error).
// pending is the number of records beyond this one; fn is not called at
// all while the catalog is empty (see LastCatalogSeq).
//
// A record that cannot be decoded, or whose table name is not the one its
// subject names, is handed to fn as bad (a *CorruptError wrapping
// ErrCorrupt) with rec nil: the caller decides whether to skip it or stop
// (by returning an error). Anyone who can publish on the catalog's
// subjects can put such a record there. A catalog stream that does not
// exist, or no longer does, is an error wrapping ErrCatalogGone.
func (j *Journal) WatchCatalog(ctx context.Context, from uint64, fn func(seq uint64, rec *engine.CatalogRecord, pending uint64, bad error) error) error {
	err := j.watchCatalog(ctx, from, fn)
	if errors.Is(err, engine.ErrTableGone) { // the consumer's word for a stream missing
		err = fmt.Errorf("%w: %w", ErrCatalogGone, err)
	}
	return err
}

func (j *Journal) watchCatalog(ctx context.Context, from uint64, fn func(seq uint64, rec *engine.CatalogRecord, pending uint64, bad error) error) error {
	return j.consume(ctx, CatalogStreamName(j.cfg.Prefix), reading{}, from, func(seq uint64, subj string, data []byte, pending uint64) error {
		rec, err := DecodeCatalogRecord(data)
		if err == nil && subj != j.catalogSubject(rec.Name) {
			err = fmt.Errorf("table name %q does not belong on subject %q", rec.Name, subj)
		}
		if err != nil {
			return fn(seq, nil, pending, &CorruptError{What: "catalog", Seq: seq, Subject: subj, Err: err})
		}
		return fn(seq, rec, pending, nil)
	})
}
