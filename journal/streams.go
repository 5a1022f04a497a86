package journal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Init creates or updates the catalog stream (idempotent).
func (j *Journal) Init(ctx context.Context) error {
	_, err := j.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        CatalogStreamName(j.cfg.Prefix),
		Description: "Cairn table catalog",
		Subjects:    []string{j.cfg.Prefix + ".catalog.>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Replicas:    j.cfg.Replicas,
		Duplicates:  2 * time.Minute,
		AllowDirect: true,
	})
	if err != nil {
		return fmt.Errorf("journal: create catalog stream: %w", err)
	}
	return nil
}

func (j *Journal) tableStreamConfig(table string, epoch uint64) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        StreamName(j.cfg.Prefix, table, epoch),
		Description: "Cairn journal of table " + table,
		Subjects:    []string{j.tableSubjects(table, epoch)},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Replicas:    j.cfg.Replicas,
		Duplicates:  2 * time.Minute,
		AllowDirect: true,
	}
}

// EnsureTableStream creates a table incarnation's stream if it does not
// exist (idempotent). The host that creates the table calls it; the others
// call WaitTableStream first, so that a cluster does not see several
// creations of one stream racing.
//
// On a cluster that is changing its meta leader a creation may go
// unanswered or be refused for a while: each try is bounded by
// Config.AppendTimeout (at least 2 s) and tried again, while the error
// may pass (Transient), until ctx ends. Creating is idempotent, so a try
// that was carried out but not answered does no harm.
func (j *Journal) EnsureTableStream(ctx context.Context, table string, epoch uint64) error {
	name := StreamName(j.cfg.Prefix, table, epoch)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		tctx, cancel := context.WithTimeout(ctx, max(j.cfg.AppendTimeout, 2*time.Second))
		_, err := j.js.Stream(tctx, name)
		if err == nil {
			cancel()
			return nil
		}
		_, err = j.js.CreateStream(tctx, j.tableStreamConfig(table, epoch))
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil
		}
		if ctx.Err() != nil || !Transient(err) {
			return fmt.Errorf("journal: create stream of %s: %w", table, err)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("journal: create stream of %s: %w", table, err)
		}
	}
}

// Transient reports whether a JetStream error may pass by itself: no
// server to ask, a request nobody answered in time, a cluster without a
// meta leader or still placing replicas, a leader change under way.
// An error the server answered for good (a bad configuration, a refused
// permission) is not.
func Transient(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10005, // no suitable peers for placement: servers still joining
			10006, // JetStream cluster not active yet
			10008, // JetStream system temporarily unavailable: no meta leader
			10009: // not the leader: a leader change under way
			return true
		}
		return false // the server answered: it will answer the same again
	}
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		(errors.As(err, &netErr) && netErr.Timeout())
}

// WaitTableStream waits up to d for a table incarnation's stream to exist
// and reports whether it does.
func (j *Journal) WaitTableStream(ctx context.Context, table string, epoch uint64, d time.Duration) (bool, error) {
	name := StreamName(j.cfg.Prefix, table, epoch)
	deadline := time.Now().Add(d)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		// A stream being created on a cluster may not answer until its
		// leader is elected: a short timeout counts as "not yet".
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := j.js.Stream(sctx, name)
		cancel()
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) && !errors.Is(err, context.DeadlineExceeded) {
			return false, fmt.Errorf("journal: stream of %s: %w", table, err)
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// DeleteTableStream deletes a table incarnation's stream with everything in
// it. A stream already gone is not an error.
func (j *Journal) DeleteTableStream(ctx context.Context, table string, epoch uint64) error {
	err := j.js.DeleteStream(ctx, StreamName(j.cfg.Prefix, table, epoch))
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("journal: delete stream of %s: %w", table, err)
	}
	return nil
}
