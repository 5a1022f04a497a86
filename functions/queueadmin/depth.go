package queueadmin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/functions"
)

// QueueDepth is a queue's backlog: the messages it holds (delivered but
// not yet acknowledged ones included) and when the oldest was stored.
type QueueDepth struct {
	Queue    string `json:"queue"`
	Messages uint64 `json:"messages"`
	// Oldest is when the queue's oldest message was stored (zero when the
	// queue is empty, or its age was not read: see maxAgedQueues).
	Oldest time.Time `json:"oldest,omitzero"`
	// OldestAgeSeconds is the age of that message when the figures were
	// read (0 with Oldest zero).
	OldestAgeSeconds float64 `json:"oldestAgeSeconds"`
}

// maxAgedQueues bounds the queues whose oldest message Depths reads (the
// deepest ones): one direct get each.
const maxAgedQueues = 1000

// Depths returns every queue that holds messages, poison queues included,
// deepest first, with the age of its oldest message. It costs one stream
// information request listing the queues' subjects and one direct get per
// queue (of the maxAgedQueues deepest).
func (a *Admin) Depths(ctx context.Context) ([]QueueDepth, error) {
	ds, _, err := a.depths(ctx)
	return ds, err
}

// depths is Depths, and the bytes the stream holds, every queue together.
func (a *Admin) depths(ctx context.Context) ([]QueueDepth, uint64, error) {
	prefix := functions.QueueSubject(a.prefix, "")
	info, err := a.stream.Info(ctx, jetstream.WithSubjectFilter(functions.QueueSubject(a.prefix, "*")))
	if err != nil {
		return nil, 0, err
	}
	out := make([]QueueDepth, 0, len(info.State.Subjects))
	for subj, n := range info.State.Subjects {
		if name, ok := strings.CutPrefix(subj, prefix); ok && n > 0 {
			out = append(out, QueueDepth{Queue: name, Messages: n})
		}
	}
	slices.SortFunc(out, func(a, b QueueDepth) int {
		if a.Messages != b.Messages {
			if a.Messages > b.Messages {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Queue, b.Queue)
	})
	now := time.Now()
	for i := range out[:min(len(out), maxAgedQueues)] {
		m, err := a.stream.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(prefix+out[i].Queue))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // consumed since the stream's information
		}
		if err != nil {
			return nil, 0, fmt.Errorf("queue %s: its oldest message: %w", out[i].Queue, err)
		}
		out[i].Oldest = m.Time
		out[i].OldestAgeSeconds = max(now.Sub(m.Time).Seconds(), 0)
	}
	return out, info.State.Bytes, nil
}

// depthEvery is the most often WriteMetrics reads the queues' depths for
// /metrics; a scrape in between sees the last figures.
const depthEvery = 5 * time.Second

// maxKnownQueues bounds the queues /metrics keeps showing once drained.
const maxKnownQueues = 10000

// depthCache keeps the queues' depths for /metrics: read at most every
// depthEvery, and the queues seen with messages since the node started
// shown with 0 once drained (up to maxKnownQueues), so that their series
// do not vanish.
type depthCache struct {
	mu     sync.Mutex
	at     time.Time
	depths []QueueDepth
	bytes  uint64 // the stream's, every queue together
	err    error
	known  map[string]bool
}

// get returns the depths and the bytes of the stream, read again through
// a when older than depthEvery. Concurrent callers wait for one read.
func (c *depthCache) get(a *Admin) ([]QueueDepth, uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < depthEvery {
		return c.depths, c.bytes, c.err
	}
	// Short: a scrape waits for it (NATS unreachable: 2 s every 5 s).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ds, stored, err := a.depths(ctx)
	c.at, c.err = time.Now(), err
	if err != nil {
		return nil, 0, err
	}
	if c.known == nil {
		c.known = map[string]bool{}
	}
	seen := map[string]bool{}
	for _, d := range ds {
		seen[d.Queue] = true
		if len(c.known) < maxKnownQueues {
			c.known[d.Queue] = true
		}
	}
	for name := range c.known {
		if !seen[name] {
			ds = append(ds, QueueDepth{Queue: name})
		}
	}
	slices.SortFunc(ds, func(x, y QueueDepth) int { return strings.Compare(x.Queue, y.Queue) })
	c.depths, c.bytes = ds, stored
	return ds, stored, nil
}

// WriteMetrics writes, in the Prometheus text format (appended to
// /metrics after the runner's series), each queue's depth (as of the last
// read, at most depthEvery ago) and its oldest message's age (that
// message's, now), the bytes of the stream against its bound, and whether
// that read failed (logged as a warning).
func (a *Admin) WriteMetrics(w io.Writer) {
	ds, stored, err := a.cache.get(a)
	failed := 0
	if err != nil {
		failed = 1
		a.log.Warn("functions: the queues' depths", "err", err)
	}
	fmt.Fprintln(w, "# HELP cairn_queue_messages Messages a queue holds (poison queues included; delivered but unacknowledged ones too).")
	fmt.Fprintln(w, "# TYPE cairn_queue_messages gauge")
	for _, d := range ds {
		fmt.Fprintf(w, "cairn_queue_messages{queue=%s} %d\n", label(d.Queue), d.Messages)
	}
	fmt.Fprintln(w, "# HELP cairn_queue_oldest_age_seconds Age of a queue's oldest message (0 when empty).")
	fmt.Fprintln(w, "# TYPE cairn_queue_oldest_age_seconds gauge")
	now := time.Now()
	for _, d := range ds {
		age := 0.0
		if !d.Oldest.IsZero() {
			age = max(now.Sub(d.Oldest).Seconds(), 0) // now, not as of the read
		}
		fmt.Fprintf(w, "cairn_queue_oldest_age_seconds{queue=%s} %.6f\n", label(d.Queue), age) // µs: a message just stored is not 0
	}
	if err == nil {
		fmt.Fprintln(w, "# HELP cairn_queue_stream_bytes Bytes the queue stream holds, every queue together: past cairn_queue_stream_max_bytes it refuses every new message.")
		fmt.Fprintln(w, "# TYPE cairn_queue_stream_bytes gauge")
		fmt.Fprintf(w, "cairn_queue_stream_bytes %d\n", stored)
	}
	fmt.Fprintln(w, "# HELP cairn_queue_stream_max_bytes The queue stream's bound of bytes (-queue-max-bytes; 0: none).")
	fmt.Fprintln(w, "# TYPE cairn_queue_stream_max_bytes gauge")
	fmt.Fprintf(w, "cairn_queue_stream_max_bytes %d\n", a.q.MaxBytes())
	fmt.Fprintln(w, "# HELP cairn_queue_depth_read_failed 1 when the last read of the queues' depths failed (the series above are then missing).")
	fmt.Fprintln(w, "# TYPE cairn_queue_depth_read_failed gauge")
	fmt.Fprintf(w, "cairn_queue_depth_read_failed %d\n", failed)
}

// labelEscaper escapes a Prometheus label value.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func label(s string) string { return `"` + labelEscaper.Replace(s) + `"` }
