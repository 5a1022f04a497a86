package functions

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/engine"
)

// TestRateLimitThrottles: a bucket of one token per second lets the first
// enqueue through, counts the invocation that finds it empty once, logs it
// once, and fails at once with ServerBusy when the next token would come
// after the invocation's deadline.
func TestRateLimitThrottles(t *testing.T) {
	var buf bytes.Buffer
	var stats Stats
	l := newLimits(&Manifest{Name: "chatty", EnqueueRate: 1}, slog.New(slog.NewTextHandler(&buf, nil)), &stats)
	var throttled bool
	if err := l.wait(context.Background(), l.enqueue, "enqueue", &throttled); err != nil || throttled {
		t.Fatalf("first token: err %v, throttled %v", err, throttled)
	}
	// No deadline is near enough to wait for: a cancelled context fails
	// without waiting.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 3 {
		err := l.wait(ctx, l.enqueue, "enqueue", &throttled)
		if engine.ErrorCode(err) != engine.CodeServerBusy || !strings.Contains(err.Error(), "enqueue rate of 1 per second") {
			t.Fatalf("empty bucket: err %v, want ServerBusy", err)
		}
	}
	if !throttled || stats.Throttled.Load() != 1 {
		t.Errorf("throttled %v, counted %d; want one invocation counted", throttled, stats.Throttled.Load())
	}
	// Another invocation finding the bucket empty counts again; the log
	// line is not repeated within the interval.
	var again bool
	_ = l.wait(ctx, l.enqueue, "enqueue", &again)
	if stats.Throttled.Load() != 2 {
		t.Errorf("counted %d, want 2", stats.Throttled.Load())
	}
	if n := strings.Count(buf.String(), "function throttled"); n != 1 {
		t.Errorf("%d log lines, want 1:\n%s", n, buf.String())
	}
	// The write bucket is its own, with its default.
	if err := l.wait(ctx, l.write, "write", &throttled); err != nil {
		t.Errorf("write: %v", err)
	}
	if l.write.Burst() != DefaultWriteRate || l.backlog != DefaultQueueBacklog {
		t.Errorf("defaults: write burst %d, backlog %d", l.write.Burst(), l.backlog)
	}
}
