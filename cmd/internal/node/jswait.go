package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/journal/values"
	"github.com/cairn-dev/cairn/outbox"
	"github.com/cairn-dev/cairn/projections"
	"github.com/cairn-dev/cairn/projections/members"
)

// A node may start before its NATS servers, or while a cluster is still
// electing its meta leader: what it gets then (no server to connect to, a
// request nobody answers, "JetStream system temporarily unavailable", "no
// suitable peers" while servers join) passes, and the node waits for it to
// pass until its start context ends, saying so every few seconds. What does
// not pass (a refused password, a server without JetStream, a replica
// count the server cannot have) stops it at once with the reason.

// startRetry tunes the waits at start.
type startRetry struct {
	try      time.Duration // bounds one try (a JetStream request)
	progress time.Duration // between two "waiting" log lines
	maxWait  time.Duration // the longest pause between two tries
	// noJetStream is how long no JetStream responder at all is taken for
	// a server still starting before it is taken for a server without
	// JetStream.
	noJetStream time.Duration
}

var defaultStartRetry = startRetry{try: 2 * time.Second, progress: 5 * time.Second, maxWait: time.Second, noJetStream: 5 * time.Second}

// untilUp calls try until it succeeds, fails with an error that does not
// pass (returned at once), or ctx ends (then the last error, saying what
// was awaited). Each try gets a context bounded by r.try; a line is logged
// every r.progress while it waits.
func (r startRetry) untilUp(ctx context.Context, log *slog.Logger, what string, try func(context.Context) error) error {
	begin := time.Now()
	nextLog := begin.Add(r.progress)
	var notEnabledSince time.Time
	for n := 1; ; n++ {
		tctx, cancel := context.WithTimeout(ctx, r.try)
		err := try(tctx)
		cancel()
		if err == nil {
			if n > 1 {
				log.Info("done waiting", "what", what, "waited", time.Since(begin).Round(time.Millisecond))
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("node: %s: gave up after %v: %w", what, time.Since(begin).Round(time.Millisecond), err)
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == 10076 || apiErr.ErrorCode == 10039) {
			return fmt.Errorf("node: %s: no JetStream on the server, or not for the node's account: %w", what, err)
		}
		if !journal.Transient(err) {
			return fmt.Errorf("node: %s: %w", what, err)
		}
		// No responder at all: a server still starting, or one without
		// JetStream, which a short wait tells apart.
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
			if notEnabledSince.IsZero() {
				notEnabledSince = time.Now()
			} else if time.Since(notEnabledSince) >= r.noJetStream {
				return fmt.Errorf("node: %s: no JetStream on the server, or not for the node's account (nothing answers its API): %w", what, err)
			}
		} else {
			notEnabledSince = time.Time{}
		}
		if now := time.Now(); now.After(nextLog) {
			log.Warn("waiting for JetStream", "what", what, "waited", now.Sub(begin).Round(time.Second), "tries", n, "err", err)
			nextLog = now.Add(r.progress)
		}
		wait := min(time.Duration(n)*100*time.Millisecond, r.maxWait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("node: %s: gave up after %v: %w", what, time.Since(begin).Round(time.Millisecond), err)
		}
	}
}

// waitJetStream waits until JetStream answers on nc: on a cluster, until
// it has a meta leader.
func (r startRetry) waitJetStream(ctx context.Context, log *slog.Logger, nc *nats.Conn) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	return r.untilUp(ctx, log, "JetStream account info", func(ctx context.Context) error {
		_, err := js.AccountInfo(ctx)
		return err
	})
}

// resources are the streams and buckets the components share with every
// node, created or opened at start.
type resources struct {
	declarations jetstream.KeyValue
	queues       *functions.Queues
	registry     *functions.Registry
	outbox       jetstream.KeyValue
	hosts        jetstream.KeyValue
	values       *values.Store
}

// openResources creates or opens every stream and bucket the components
// need, each waited for like the catalog stream: a cluster that has just
// elected its meta leader may still time out the first creations.
func openResources(ctx context.Context, log *slog.Logger, js jetstream.JetStream, cfg Config) (res resources, err error) {
	r := defaultStartRetry
	steps := []struct {
		what string
		open func(context.Context) error
	}{
		{"open the projections' bucket", func(ctx context.Context) (err error) {
			res.declarations, err = projections.OpenDeclarations(ctx, js, cfg.Prefix, cfg.Replicas)
			return err
		}},
		{"open the queue stream", func(ctx context.Context) (err error) {
			res.queues, err = functions.OpenQueues(ctx, js, cfg.Prefix, functions.QueueConfig{Replicas: cfg.Replicas,
				MaxMessages: cfg.Functions.QueueMaxMessages, MaxBytes: cfg.Functions.QueueMaxBytes, Log: cfg.Log})
			return err
		}},
		{"open the functions' registry", func(ctx context.Context) (err error) {
			res.registry, err = functions.OpenRegistry(ctx, js, cfg.Prefix, cfg.Replicas)
			return err
		}},
		{"open the outbox's bucket", func(ctx context.Context) (err error) {
			res.outbox, err = outbox.Bucket(ctx, js, cfg.Prefix, cfg.Replicas)
			return err
		}},
		{"open the hosts' bucket", func(ctx context.Context) (err error) {
			res.hosts, err = members.Open(ctx, js, cfg.Prefix, cfg.Replicas)
			return err
		}},
		{"open the large values' bucket", func(ctx context.Context) (err error) {
			res.values, err = values.Open(ctx, js, cfg.Prefix, cfg.Replicas)
			return err
		}},
	}
	for _, s := range steps {
		if err := r.untilUp(ctx, log, s.what, s.open); err != nil {
			return res, err
		}
	}
	return res, nil
}
