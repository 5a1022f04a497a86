package functions

import (
	"strings"
	"testing"
	"time"
)

func TestManifestValidate(t *testing.T) {
	good := Manifest{Name: "archive-employee", Trigger: Trigger{Queue: "archive-employee"}}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"Orders", "contoso.Orders"} {
		if err := (&Manifest{Name: "on-orders", Trigger: Trigger{Table: table}}).Validate(); err != nil {
			t.Errorf("a trigger on %s: %v", table, err)
		}
	}
	if good.MaxDequeueCount != 5 || good.Timeout.D() != 30*time.Second || good.Concurrency != 4 || good.MemoryMB != 128 ||
		good.EnqueueRate != DefaultEnqueueRate || good.WriteRate != DefaultWriteRate || good.QueueBacklog != DefaultQueueBacklog {
		t.Fatalf("defaults: %+v", good)
	}
	for _, c := range []struct {
		m    Manifest
		want string
	}{
		{Manifest{Name: "Bad_Name"}, "function name"},
		{Manifest{Name: "ab"}, "function name"},
		{Manifest{Name: "double--hyphen"}, "function name"},
		{Manifest{Name: "ok-name", Trigger: Trigger{Queue: "Q"}}, "queue name"},
		{Manifest{Name: "ok-name", Trigger: Trigger{Queue: "q-q", Table: "T"}}, "one of queue, table, every, cron and http"},
		{Manifest{Name: "ok-name", Trigger: Trigger{Every: Duration(time.Millisecond)}}, "minimum of 1s"},
		{Manifest{Name: "ok-name", Trigger: Trigger{Table: "Or-ders"}}, "letters and digits"},
		{Manifest{Name: "ok-name", Trigger: Trigger{Table: "devstoreaccount1.Orders"}}, "without the account"},
		{Manifest{Name: "ok-name", Trigger: Trigger{Table: "Contoso.Orders"}}, "account name"},
		{Manifest{Name: "ok-name", Trigger: Trigger{Cron: "every tuesday"}}, "cron"},
		{Manifest{Name: "ok-name", MaxDequeueCount: 1000}, "maxDequeueCount"},
		{Manifest{Name: "ok-name", Timeout: Duration(time.Hour)}, "timeout"},
		{Manifest{Name: "ok-name", BackoffMin: Duration(time.Minute), BackoffMax: Duration(time.Second)}, "backoff"},
		{Manifest{Name: "ok-name", EnqueueRate: -1}, "enqueueRate"},
		{Manifest{Name: "ok-name", WriteRate: MaxRate + 1}, "writeRate"},
		{Manifest{Name: "ok-name", QueueBacklog: MaxQueueBacklog + 1}, "queueBacklog"},
	} {
		err := c.m.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.m, err, c.want)
		}
	}
	m := Manifest{BackoffMin: Duration(time.Second), BackoffMax: Duration(5 * time.Second)}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 5 * time.Second, 9: 5 * time.Second} {
		if got := m.Backoff(n); got != want {
			t.Errorf("Backoff(%d) = %v, want %v", n, got, want)
		}
	}
	next, err := Trigger{Cron: "0 9 * * *"}.schedule()
	if err != nil {
		t.Fatal(err)
	}
	if got := next(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)); !got.Equal(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("next 9:00 after 10:00: %v", got)
	}
}
