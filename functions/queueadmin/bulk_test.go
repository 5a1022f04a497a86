package queueadmin

import (
	"context"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/journal/jstest"
)

// TestParsePoisonFilter: a filter names what it selects; none, or a bad
// time, is InvalidInput.
func TestParsePoisonFilter(t *testing.T) {
	for _, bad := range []string{"", "error=", "poisonedBefore=yesterday", "enqueuedBefore=2026-02-30T00:00:00Z", "all=yes"} {
		v, _ := url.ParseQuery(bad)
		if _, err := ParsePoisonFilter(v); engine.ErrorCode(err) != engine.CodeInvalidInput {
			t.Errorf("%q: %v, want InvalidInput", bad, err)
		}
	}
	v, _ := url.ParseQuery("error=timeout&poisonedBefore=2026-01-02T00:00:00Z")
	f, err := ParsePoisonFilter(v)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		p    PoisonMessage
		want bool
	}{
		{PoisonMessage{Error: "read timeout", Poisoned: at}, true},
		{PoisonMessage{Error: "refused", Poisoned: at}, false},
		{PoisonMessage{Error: "read timeout", Poisoned: at.Add(48 * time.Hour)}, false},
	} {
		if got := f.Match(c.p); got != c.want {
			t.Errorf("%+v: match %v, want %v", c.p, got, c.want)
		}
	}
	v, _ = url.ParseQuery("enqueuedBefore=2026-01-02T00:00:00Z")
	if f, _ = ParsePoisonFilter(v); f.Match(PoisonMessage{}) {
		t.Error("a message with no enqueue time matches enqueuedBefore")
	}
}

// TestBulkPoisonBound: a bulk action takes at most its bound of the
// matching messages, oldest first, says when more remain, and the next
// request takes the rest; what does not match stays.
func TestBulkPoisonBound(t *testing.T) {
	_, nc := jstest.Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	q, err := functions.OpenQueues(ctx, js, "cairn", functions.QueueConfig{Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := New(q, nil)
	for i := range 7 {
		m := nats.NewMsg(functions.QueueSubject("cairn", "jobs-poison"))
		m.Data = []byte(strconv.Itoa(i))
		m.Header.Set(functions.HeaderQueue, "jobs")
		m.Header.Set(functions.HeaderError, map[bool]string{true: "timeout", false: "refused"}[i%3 != 2]) // 2 and 5 refused
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	f := PoisonFilter{ErrorContains: "timeout"}
	var got []int
	for _, want := range []BulkResult{{Affected: 2, More: true}, {Affected: 2, More: true}, {Affected: 1}, {}} {
		res, err := a.bulkPoison(ctx, "jobs-poison", f, true, 2)
		if err != nil || res != want {
			t.Fatalf("bulk requeue: %+v %v, want %+v", res, err, want)
		}
		ms, err := a.Peek(ctx, "jobs", 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, m := range ms {
			n, _ := strconv.Atoi(string(m.Body))
			got = append(got, n)
		}
	}
	if len(got) != 5 || got[0] != 0 || got[1] != 1 || got[2] != 3 || got[3] != 4 || got[4] != 6 {
		t.Fatalf("requeued in order %v, want [0 1 3 4 6]", got)
	}
	left, err := a.Poison(ctx, "jobs", 0, 100)
	if err != nil || len(left) != 2 || string(left[0].Body) != "2" || string(left[1].Body) != "5" {
		t.Fatalf("left in the poison queue: %+v %v", left, err)
	}
	res, err := a.BulkPoison(ctx, "jobs", PoisonFilter{All: true}, false)
	if err != nil || res != (BulkResult{Affected: 2}) {
		t.Fatalf("delete all: %+v %v", res, err)
	}
	if n, _ := q.Depth(ctx, "jobs-poison"); n != 0 {
		t.Fatalf("%d poison messages after deleting all", n)
	}
}
