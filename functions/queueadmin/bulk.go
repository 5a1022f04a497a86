package queueadmin

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions"
)

// MaxBulkPoison is the most poison messages one bulk requeue or delete
// acts on; BulkResult.More says when more matched.
const MaxBulkPoison = 10_000

// PoisonFilter selects poison messages for a bulk action. The zero filter
// selects none: All must say "every message".
type PoisonFilter struct {
	// ErrorContains: the last error contains this text.
	ErrorContains string
	// EnqueuedBefore and PoisonedBefore: first enqueued, or moved to the
	// poison queue, before this time (zero: any time).
	EnqueuedBefore, PoisonedBefore time.Time
	// All selects every message when no other field is set.
	All bool
}

// ParsePoisonFilter reads a filter from a query string: error=<text>,
// enqueuedBefore=<RFC 3339>, poisonedBefore=<RFC 3339>, all=true. A
// malformed time, or no filter at all, is InvalidInput.
func ParsePoisonFilter(v url.Values) (PoisonFilter, error) {
	f := PoisonFilter{ErrorContains: v.Get("error"), All: v.Get("all") == "true"}
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"enqueuedBefore", &f.EnqueuedBefore}, {"poisonedBefore", &f.PoisonedBefore}} {
		s := v.Get(p.name)
		if s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return f, engine.Errorf(engine.CodeInvalidInput, "%s %q: use an RFC 3339 time such as 2026-01-02T15:04:05Z", p.name, s)
		}
		*p.to = t
	}
	if !f.All && f.ErrorContains == "" && f.EnqueuedBefore.IsZero() && f.PoisonedBefore.IsZero() {
		return f, engine.Errorf(engine.CodeInvalidInput, "say which poison messages: error=<text>, enqueuedBefore=<time>, poisonedBefore=<time>, or all=true")
	}
	return f, nil
}

// Match reports whether a poison message is selected.
func (f PoisonFilter) Match(p PoisonMessage) bool {
	if f.ErrorContains != "" && !strings.Contains(p.Error, f.ErrorContains) {
		return false
	}
	if !f.EnqueuedBefore.IsZero() && (p.Enqueued.IsZero() || !p.Enqueued.Before(f.EnqueuedBefore)) {
		return false
	}
	if !f.PoisonedBefore.IsZero() && !p.Poisoned.Before(f.PoisonedBefore) {
		return false
	}
	return true
}

// BulkResult is the answer of a bulk requeue or delete.
type BulkResult struct {
	// Affected messages were requeued or deleted.
	Affected int `json:"affected"`
	// Skipped matched but could not be requeued: they do not say which
	// queue they came from (they stay in the poison queue).
	Skipped int `json:"skipped,omitempty"`
	// More is true when more messages match than one request acts on:
	// repeat the request.
	More bool `json:"more"`
}

// BulkPoison requeues (requeue true) or deletes the messages of a poison
// queue that the filter selects, oldest first, at most MaxBulkPoison.
// Cost: one direct get per poison message examined, and a publish and a
// delete per message affected. A failure midway returns what was done
// and the error; what was done stays done (each message is requeued at
// most once, as Requeue does).
func (a *Admin) BulkPoison(ctx context.Context, queue string, f PoisonFilter, requeue bool) (BulkResult, error) {
	return a.bulkPoison(ctx, queue, f, requeue, MaxBulkPoison)
}

// bulkPoison is BulkPoison acting on at most limit messages.
func (a *Admin) bulkPoison(ctx context.Context, queue string, f PoisonFilter, requeue bool, limit int) (BulkResult, error) {
	var res BulkResult
	queue, err := poisonQueue(queue)
	if err != nil {
		return res, engine.Errorf(engine.CodeInvalidInput, "%v", err)
	}
	err = a.walk(ctx, queue, 1, func(m *jetstream.RawStreamMsg) (bool, error) {
		p := poisonOf(m)
		if !f.Match(p) {
			return true, nil
		}
		if res.Affected+res.Skipped == limit {
			res.More = true
			return false, nil
		}
		if requeue && p.Queue == "" {
			res.Skipped++
			return true, nil
		}
		if requeue {
			hdr := nats.Header{HeaderRequeued: []string{strconv.FormatUint(p.Seq, 10)}}
			if err := a.q.Publish(ctx, p.Queue, p.Body, "requeue:"+functions.StreamName(a.prefix)+":"+strconv.FormatUint(p.Seq, 10), hdr); err != nil {
				return false, fmt.Errorf("requeue poison message %d: %w", p.Seq, err)
			}
		}
		if err := a.deleteMsg(ctx, p.Seq); err != nil {
			return false, fmt.Errorf("remove poison message %d: %w", p.Seq, err)
		}
		res.Affected++
		return true, nil
	})
	return res, err
}
