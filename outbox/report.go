package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// Report is where the relay of one table incarnation stands, as any node
// or the CLI can read it from the bucket and the journal: the stored
// position (which trails the relay by at most Config.CheckpointEvery),
// the journal's head and the partitions the relay last reported blocked.
type Report struct {
	Stream   string `json:"stream"`
	Position uint64 `json:"position"`
	Head     uint64 `json:"head"`
	// Behind is the commit time of the first record not yet fully
	// relayed (zero when none).
	Behind  time.Time `json:"behind,omitzero"`
	Blocked []Blocked `json:"blocked,omitempty"`
}

// LagSeconds is the age of the first record not yet fully relayed.
func (r Report) LagSeconds(now time.Time) float64 {
	if r.Behind.IsZero() {
		return 0
	}
	return max(0, now.Sub(r.Behind).Seconds())
}

// LagRecords is how many records are not yet fully relayed.
func (r Report) LagRecords() uint64 { return r.Head - min(r.Position, r.Head) }

// Reports reads the state of every table incarnation's relay: each table
// stream of the prefix, its head, its stored position and blocked list.
func Reports(ctx context.Context, js jetstream.JetStream, prefix string) ([]Report, error) {
	kv, err := js.KeyValue(ctx, BucketName(prefix))
	if err != nil {
		return nil, fmt.Errorf("outbox: bucket %s: %w (has a node with prefix %q run?)", BucketName(prefix), err, prefix)
	}
	var out []Report
	streams := js.ListStreams(ctx, jetstream.WithStreamListSubject(journal.TableSubjects(prefix)))
	for info := range streams.Info() {
		name := info.Config.Name
		if !strings.HasPrefix(name, journal.TableStreamPrefix(prefix, "")) {
			continue
		}
		r := Report{Stream: name, Head: info.State.LastSeq}
		r.Position, _, _ = StoredPosition(ctx, kv, name) // unreadable: shown as 0
		if e, err := kv.Get(ctx, blockedKey(name)); err == nil {
			_ = json.Unmarshal(e.Value(), &r.Blocked)
		}
		if r.Position < r.Head {
			r.Behind = firstUnrelayed(ctx, js, name, r.Position+1)
		}
		out = append(out, r)
	}
	if err := streams.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Stream < out[j].Stream })
	return out, nil
}

// firstUnrelayed is the commit time of a stream's record seq (zero when it
// cannot be read).
func firstUnrelayed(ctx context.Context, js jetstream.JetStream, stream string, seq uint64) time.Time {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return time.Time{}
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		return time.Time{}
	}
	rec, err := journal.DecodeRecord(m.Data)
	if err != nil {
		return time.Time{}
	}
	return engine.TicksToTime(rec.Time)
}

// StreamOf returns the stream of a table's newest incarnation (its full
// name: "Orders", "contoso.Orders").
func StreamOf(ctx context.Context, js jetstream.JetStream, prefix, table string) (string, error) {
	want := journal.TableStreamPrefix(prefix, table)
	var best string
	var bestEpoch uint64
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		rest, ok := strings.CutPrefix(name, want)
		if !ok {
			continue
		}
		if e, err := strconv.ParseUint(rest, 10, 64); err == nil && e >= bestEpoch {
			best, bestEpoch = name, e
		}
	}
	if err := names.Err(); err != nil {
		return "", err
	}
	if best == "" {
		return "", errors.New("outbox: no journal of table " + table)
	}
	return best, nil
}
