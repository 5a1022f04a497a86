package values

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// listTry is the first bound of one try of the client's List, doubled
// at each try: the client's List watches the descriptions and can wait
// for a change that never comes when a put or a delete races its start
// (projections/snapshare.go measures it).
const listTry = 5 * time.Second

// List returns every value in the store. An object whose name is not a
// value's (put there by hand) is left out.
func (s *Store) List(ctx context.Context) ([]Info, error) {
	ois, err := s.listObjects(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(ois))
	for _, oi := range ois {
		if in, err := info(oi); err == nil {
			out = append(out, in)
		}
	}
	return out, nil
}

func (s *Store) listObjects(ctx context.Context) ([]*jetstream.ObjectInfo, error) {
	for bound := listTry; ; bound *= 2 {
		tctx, cancel := context.WithTimeout(ctx, bound)
		ois, err := s.obj.List(tctx)
		cancel()
		switch {
		case errors.Is(err, jetstream.ErrNoObjectsFound):
			return nil, nil
		case err == nil:
			return ois, nil
		case ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded):
			return nil, fmt.Errorf("values: list: %w", err)
		}
	}
}

// Orphans purges the chunks that no object names and to which nothing
// was added for at least idle: what a process killed during a Put left.
// A Put in progress adds a chunk at least every chunk's worth of its
// body's minimum rate (or its body times out), so idle must be longer
// than that. It returns how many uploads' chunks it purged.
func (s *Store) Orphans(ctx context.Context, idle time.Duration, now time.Time) (int, error) {
	// The descriptions first: a Put that ends after this list has recent
	// chunks, which are kept.
	ois, err := s.listObjects(ctx)
	if err != nil {
		return 0, err
	}
	named := make(map[string]bool, len(ois))
	for _, oi := range ois {
		named[oi.NUID] = true
	}
	chunks := "$O." + s.bucket + ".C."
	si, err := s.stream.Info(ctx, jetstream.WithSubjectFilter(chunks+">"))
	if err != nil {
		return 0, fmt.Errorf("values: orphans: %w", err)
	}
	purged := 0
	for subj := range si.State.Subjects {
		if named[strings.TrimPrefix(subj, chunks)] {
			continue
		}
		last, err := s.stream.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return purged, fmt.Errorf("values: orphans: %w", err)
		}
		if now.Sub(last.Time) < idle {
			continue
		}
		if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			return purged, fmt.Errorf("values: orphans: %w", err)
		}
		purged++
	}
	return purged, nil
}
