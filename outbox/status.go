package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// TableStatus is where the relay of one table stands on this node.
type TableStatus struct {
	Table string `json:"table"`
	Epoch uint64 `json:"epoch"`
	// Position: every message of the records up to it is delivered (and
	// stored as such); Read: the last record read; Head: the journal's
	// last record as last seen.
	Position uint64 `json:"position"`
	Read     uint64 `json:"read"`
	Head     uint64 `json:"head"`
	// Pending counts the messages read and not yet delivered;
	// OldestPending is the commit time of the oldest of them.
	Pending       int       `json:"pending"`
	OldestPending time.Time `json:"oldestPending,omitzero"`
	Blocked       []Blocked `json:"blocked,omitempty"`
}

// LagRecords is how many journal records are not yet fully relayed.
func (s TableStatus) LagRecords() uint64 { return s.Head - min(s.Position, s.Head) }

// LagSeconds is the age of the oldest message not yet delivered (0 when
// none waits).
func (s TableStatus) LagSeconds(now time.Time) float64 {
	if s.OldestPending.IsZero() {
		return 0
	}
	return max(0, now.Sub(s.OldestPending).Seconds())
}

// tableStatus is a worker's status, read by Status from other goroutines.
type tableStatus struct {
	mu    sync.Mutex
	s     TableStatus
	retry time.Time
}

func (t *tableStatus) set(s TableStatus) {
	t.mu.Lock()
	t.s = s
	t.mu.Unlock()
}

func (t *tableStatus) get() TableStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.s
}

func (t *tableStatus) retrySeen() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.retry
}

func (t *tableStatus) sawRetry(at time.Time) {
	t.mu.Lock()
	t.retry = at
	t.mu.Unlock()
}

// Status returns the tables this node relays, sorted by name.
func (r *Relay) Status() []TableStatus {
	r.mu.Lock()
	out := make([]TableStatus, 0, len(r.status))
	for _, st := range r.status {
		out = append(out, st.get())
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Table < out[j].Table })
	return out
}

// WriteMetrics appends the relay's series in the Prometheus text format:
// per table this node relays, its position, lag in records and seconds,
// and blocked partitions; totals of deliveries, failed attempts and
// skipped messages, and of those a stream had already stored.
func (r *Relay) WriteMetrics(w io.Writer) {
	now := time.Now()
	st := r.Status()
	series := []struct {
		name, help string
		value      func(TableStatus) string
	}{
		{"cairn_outbox_position", "Journal position up to which every outbox message of the table is delivered.", func(s TableStatus) string { return fmt.Sprint(s.Position) }},
		{"cairn_outbox_lag_records", "Journal records of the table not yet fully relayed.", func(s TableStatus) string { return fmt.Sprint(s.LagRecords()) }},
		{"cairn_outbox_lag_seconds", "Age of the table's oldest outbox message not yet delivered.", func(s TableStatus) string { return fmt.Sprintf("%.3f", s.LagSeconds(now)) }},
		{"cairn_outbox_pending_messages", "Outbox messages of the table read and not yet delivered.", func(s TableStatus) string { return fmt.Sprint(s.Pending) }},
		{"cairn_outbox_blocked_partitions", "Partitions of the table whose oldest outbox message cannot be delivered.", func(s TableStatus) string { return fmt.Sprint(len(s.Blocked)) }},
	}
	for _, m := range series {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n", m.name, m.help, m.name)
		for _, s := range st {
			fmt.Fprintf(w, "%s{table=\"%s\"} %s\n", m.name, labelEscaper.Replace(s.Table), m.value(s))
		}
	}
	for _, c := range []struct {
		name, help string
		v          uint64
	}{
		{"cairn_outbox_delivered_total", "Outbox messages delivered.", r.stats.delivered.Load()},
		{"cairn_outbox_failed_attempts_total", "Outbox deliveries that failed (and wait to be tried again).", r.stats.failed.Load()},
		{"cairn_outbox_skipped_total", "Outbox messages skipped by an operator.", r.stats.skipped.Load()},
		{"cairn_outbox_duplicates_total", "Outbox messages their stream answered as duplicates of ones it had stored: published again after a crash, a lease taken over or a lost acknowledgement.", r.stats.duplicates.Load()},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", c.name, c.help, c.name, c.name, c.v)
	}
}

// labelEscaper escapes a label value as the text format requires.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// ErrNotBlocked is Skip's answer for a message the relay does not show
// blocked.
var ErrNotBlocked = errors.New("outbox: that message is not blocked")

// Skip asks the relay of a table incarnation (its stream) to pass over
// one message, at record seq and index (its place among all the record's
// messages, from 0, across the record's commands: PositionHeader), that
// cannot be delivered: the
// holder of its shard drops it at its next attempt and its partition goes
// on. Nothing is published for it, ever. Only a message the relay shows
// blocked (Reports) may be skipped; any other position is refused with
// ErrNotBlocked, since a request left in the bucket for a message not yet
// written would drop it, unseen, the first time it failed.
//
// A position before the table's horizon (its journal was pruned there) is
// refused with engine.CodeHistoryTruncated: the relay delivered it long
// ago, or it is gone.
func Skip(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, stream string, seq uint64, index int) error {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("outbox: %s: %w", stream, err)
	}
	if first := s.CachedInfo().State.FirstSeq; seq < first {
		return engine.Errorf(engine.CodeHistoryTruncated,
			"record %d of %s is before the journal's horizon %d (its retention pruned it): the relay delivered its messages before that", seq, stream, first)
	}
	var blocked []Blocked
	e, err := kv.Get(ctx, blockedKey(stream))
	switch {
	case err == nil:
		if err := json.Unmarshal(e.Value(), &blocked); err != nil {
			return fmt.Errorf("outbox: %s: the blocked list: %w", stream, err)
		}
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return err
	}
	if !slices.ContainsFunc(blocked, func(b Blocked) bool { return b.Seq == seq && b.Index == index }) {
		return fmt.Errorf("%w: %s record %d message %d (outbox status lists the blocked ones)", ErrNotBlocked, stream, seq, index)
	}
	_, err = kv.Put(ctx, skipKey(stream, seq, index), []byte(time.Now().UTC().Format(time.RFC3339)))
	return err
}

// Retry asks the relay of a table incarnation to try its blocked messages
// again now rather than after their back-off.
func Retry(ctx context.Context, kv jetstream.KeyValue, stream string) error {
	_, err := kv.Put(ctx, retryKey(stream), []byte(time.Now().UTC().Format(time.RFC3339)))
	return err
}
