// Package copier keeps a copy of a Cairn table in sync through the
// table's change feed (docs/PROTOCOL.md, The change feed): it reads pages
// of changes from the position it last reached, applies each put and
// delete to its copy, and moves its position to the page's next. The copy
// and its position are saved together, so a restart goes on where the
// saved copy ends: no change is missed or applied out of order.
//
// Each change names the ETag its entity had before it (prevEtag); the
// copy checks it against the ETag it holds for the entity, so a copy that
// lost a change (a file restored from long ago, two copiers on one file)
// stops with ErrOutOfSync instead of drifting silently.
package copier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/wire"
)

// Key names an entity.
type Key struct{ PartitionKey, RowKey string }

// Entry is an entity of the copy with its ETag.
type Entry struct {
	Entity *engine.Entity
	ETag   string
}

// Copy is a copy of a table as of a position in its change feed.
type Copy struct {
	// Next is the feed position to read from next (0: the beginning).
	Next     uint64
	Entities map[Key]Entry
}

// New returns an empty copy, at the beginning of the feed.
func New() *Copy { return &Copy{Entities: map[Key]Entry{}} }

// ErrOutOfSync: a change's previous ETag is not the one the copy holds.
var ErrOutOfSync = errors.New("the copy is out of sync with the table")

// Apply applies a page of changes and moves the copy to the page's next.
// A change whose previous ETag does not match the copy fails the page
// (with ErrOutOfSync); changes before it stay applied, and the position
// does not move.
func (c *Copy) Apply(page *wire.ChangesReply) error {
	for _, ch := range page.Changes {
		k := Key{ch.PartitionKey, ch.RowKey}
		have, ok := c.Entities[k]
		if !ch.PrevUnknown && (ch.PrevETag != have.ETag || ok != (ch.PrevETag != "")) {
			return fmt.Errorf("%w: change %d.%d of (%q, %q) follows %q, the copy has %q", ErrOutOfSync, ch.Seq, ch.Index, ch.PartitionKey, ch.RowKey, ch.PrevETag, have.ETag)
		}
		if ch.Deleted {
			delete(c.Entities, k)
		} else {
			c.Entities[k] = Entry{Entity: ch.Entity, ETag: ch.ETag}
		}
	}
	c.Next = page.Next
	return nil
}

// Follow keeps c in sync with table until ctx ends (then nil): it asks
// for the changes after c.Next (waiting up to 10 s when there are none),
// applies them and calls save after every page that changed something. A
// request that times out or finds no node is tried again after a pause; a
// coded error from the node (TableNotFound, TableFaulted), ErrOutOfSync or
// a failed save ends it.
func Follow(ctx context.Context, cl *client.Client, table string, c *Copy, save func(*Copy) error) error {
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		page, err := cl.Changes(ctx, table, wire.ChangesRequest{From: c.Next, Max: wire.MaxChanges, Wait: 10 * time.Second})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var coded *engine.Error
			if errors.As(err, &coded) && coded.Code != engine.CodeServerBusy {
				return err
			}
			if !errors.As(err, &coded) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, nats.ErrNoResponders) {
				return err
			}
			select { // a node away or busy: ask again
			case <-time.After(pause):
			case <-ctx.Done():
			}
			pause = min(2*pause, 5*time.Second)
			continue
		}
		pause = 100 * time.Millisecond
		before := c.Next
		if err := c.Apply(page); err != nil {
			return err
		}
		if c.Next != before {
			if err := save(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// file is the saved form: the position and the entities as Azure entity
// JSON, in key order.
type file struct {
	Next     uint64            `json:"next"`
	Entities []json.RawMessage `json:"entities"`
}

// Save writes c to path, atomically (a temporary file renamed over it).
func Save(path string, c *Copy) error {
	keys := make([]Key, 0, len(c.Entities))
	for k := range c.Entities {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b Key) int {
		if n := strings.Compare(a.PartitionKey, b.PartitionKey); n != 0 {
			return n
		}
		return strings.Compare(a.RowKey, b.RowKey)
	})
	f := file{Next: c.Next, Entities: make([]json.RawMessage, len(keys))}
	for i, k := range keys {
		e := c.Entities[k]
		f.Entities[i] = wire.AppendEntityJSON(nil, e.Entity, e.ETag, wire.MinimalMetadata)
	}
	b, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Load reads a copy written by Save; a file that does not exist is an
// empty copy at the beginning.
func Load(path string) (*Copy, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return New(), nil
	}
	if err != nil {
		return nil, err
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c := New()
	c.Next = f.Next
	for i, raw := range f.Entities {
		e, err := wire.ParseEntityJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: entity %d: %w", path, i, err)
		}
		var meta struct {
			ETag      string `json:"odata.etag"`
			Timestamp string `json:"Timestamp"`
		}
		_ = json.Unmarshal(raw, &meta)
		if meta.Timestamp != "" {
			if e.Timestamp, err = wire.ParseTime(meta.Timestamp); err != nil {
				return nil, fmt.Errorf("%s: entity %d: %w", path, i, err)
			}
		}
		c.Entities[Key{e.PartitionKey, e.RowKey}] = Entry{Entity: e, ETag: meta.ETag}
	}
	return c, nil
}
