package outbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// A table whose catalog record says so (engine.TableInfo.MarksMessages)
// is marked in the bucket before the first record with outbox messages is
// appended to its journal, and the relay reads the journal of a marked
// table only. Most tables never carry a message; their records then cost
// one delivery (to the views) instead of two. The mark is never removed
// while the table lives, so the relay cannot miss a message: a record with
// messages is appended only after its table's mark is stored, and once
// the relay sees the mark it reads the journal from its stored position
// (or from the start).

// markKey is the key of a table incarnation's mark.
func markKey(stream string) string { return "marked." + stream }

// Marker marks tables before their first outbox message. It remembers the
// marks it stored or found, so a table costs it one request in its life,
// up to maxRemembered of them: past that it forgets them all and starts
// over, so that a host creating table after table does not grow the set
// for ever (a forgotten mark costs one request again, which finds it).
type Marker struct {
	kv    jetstream.KeyValue
	names func(table string, epoch uint64) string

	mu     sync.Mutex
	marked map[string]bool // by stream
}

// NewMarker returns a marker storing marks in kv (the outbox's bucket,
// Bucket); names gives a table incarnation's stream (journal.TableStream).
func NewMarker(kv jetstream.KeyValue, names func(table string, epoch uint64) string) *Marker {
	return &Marker{kv: kv, names: names, marked: map[string]bool{}}
}

// Mark stores the mark of a table incarnation, unless it is there. It
// returns nil once the mark is stored; until then the caller must not
// append a record with messages to the table.
func (m *Marker) Mark(ctx context.Context, table string, epoch uint64) error {
	stream := m.names(table, epoch)
	m.mu.Lock()
	done := m.marked[stream]
	m.mu.Unlock()
	if done {
		return nil
	}
	if _, err := m.kv.Create(ctx, markKey(stream), nil); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("outbox: mark table %s for its messages: %w", table, err)
	}
	m.mu.Lock()
	if len(m.marked) >= maxRemembered {
		clear(m.marked)
	}
	m.marked[stream] = true
	m.mu.Unlock()
	return nil
}

// maxRemembered bounds the marks a Marker remembers: about a megabyte of
// stream names.
const maxRemembered = 10_000

// Relayed returns the position up to which the outbox has relayed a table
// incarnation's messages, for the pruner: a table that marks its messages
// and is not marked has none, so everything is relayed. Read the
// journal's last position before calling it: a record with messages
// appended after that read may have been marked after this one, and the
// caller must keep it.
func Relayed(ctx context.Context, kv jetstream.KeyValue, stream string, marks bool) (pos uint64, ok bool, err error) {
	if marks {
		_, err := kv.Get(ctx, markKey(stream))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return math.MaxUint64 - 1, true, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("outbox: mark of %s: %w", stream, err)
		}
	}
	return StoredPosition(ctx, kv, stream)
}
