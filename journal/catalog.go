package journal

import (
	"context"
	"fmt"
	"strings"

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
	seq, err := j.publish(ctx, j.catalogSubject(rec.Name), data, expectLast, j.cfg.CatalogTimeout, nil)
	if err != nil {
		return 0, fmt.Errorf("journal: catalog %s: %w", rec.Name, err)
	}
	return seq, nil
}

// CatalogSubjectName returns the lowercase table name a catalog subject
// names (whatever follows "<prefix>.catalog."): where a catalog record
// that cannot be used still moved that name's sequence.
func (j *Journal) CatalogSubjectName(subj string) string {
	return strings.TrimPrefix(subj, j.cfg.Prefix+".catalog.")
}

// LastCatalogSeq returns the catalog stream's last sequence.
func (j *Journal) LastCatalogSeq(ctx context.Context) (uint64, error) {
	s, err := j.js.Stream(ctx, CatalogStreamName(j.cfg.Prefix))
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
// subjects can put such a record there.
func (j *Journal) WatchCatalog(ctx context.Context, from uint64, fn func(seq uint64, rec *engine.CatalogRecord, pending uint64, bad error) error) error {
	return j.consume(ctx, CatalogStreamName(j.cfg.Prefix), from, func(seq uint64, subj string, data []byte, pending uint64) error {
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
