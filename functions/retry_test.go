package functions

import (
	"testing"
	"time"
)

func TestRetryOrPoison(t *testing.T) {
	def := retryPolicy{MaxDequeueCount: 5, BackoffMin: time.Second, BackoffMax: time.Minute}
	one := retryPolicy{MaxDequeueCount: 1, BackoffMin: time.Second, BackoffMax: time.Minute}
	flat := retryPolicy{MaxDequeueCount: 5, BackoffMin: 3 * time.Second, BackoffMax: 3 * time.Second}
	long := retryPolicy{MaxDequeueCount: 100, BackoffMin: time.Second, BackoffMax: time.Minute}
	cases := []struct {
		name string
		p    retryPolicy
		a    attempt
		want verdict
	}{
		{"first delivery runs", def, attempt{DequeueCount: 1}, verdict{Action: actRun}},
		{"delivery at the maximum runs", def, attempt{DequeueCount: 5}, verdict{Action: actRun}},
		{"past the maximum: poisoned without running, this delivery not counted", def, attempt{DequeueCount: 6}, verdict{Action: actPoison, Attempts: 5}},
		{"far past the maximum", def, attempt{DequeueCount: 9}, verdict{Action: actPoison, Attempts: 8}},
		{"first failure waits backoffMin", def, attempt{DequeueCount: 1, Failed: true}, verdict{Action: actRetry, Delay: time.Second, Attempts: 1}},
		{"second failure doubles", def, attempt{DequeueCount: 2, Failed: true}, verdict{Action: actRetry, Delay: 2 * time.Second, Attempts: 2}},
		{"fourth failure", def, attempt{DequeueCount: 4, Failed: true}, verdict{Action: actRetry, Delay: 8 * time.Second, Attempts: 4}},
		{"failure at the maximum is poisoned", def, attempt{DequeueCount: 5, Failed: true}, verdict{Action: actPoison, Attempts: 5}},
		{"maximum 1: the first failure is poisoned", one, attempt{DequeueCount: 1, Failed: true}, verdict{Action: actPoison, Attempts: 1}},
		{"maximum 1: a second delivery is poisoned without running", one, attempt{DequeueCount: 2}, verdict{Action: actPoison, Attempts: 1}},
		{"back-off capped at backoffMax", long, attempt{DequeueCount: 10, Failed: true}, verdict{Action: actRetry, Delay: time.Minute, Attempts: 10}},
		{"back-off at a high count does not overflow", long, attempt{DequeueCount: 99, Failed: true}, verdict{Action: actRetry, Delay: time.Minute, Attempts: 99}},
		{"backoffMin equal to backoffMax", flat, attempt{DequeueCount: 3, Failed: true}, verdict{Action: actRetry, Delay: 3 * time.Second, Attempts: 3}},
		{"cut short by a stop: again at once", def, attempt{DequeueCount: 2, Failed: true, Stopped: true}, verdict{Action: actRetry, Attempts: 2}},
		{"cut short by a stop at the maximum: not poisoned", def, attempt{DequeueCount: 5, Failed: true, Stopped: true}, verdict{Action: actRetry, Attempts: 5}},
	}
	for _, c := range cases {
		if got := retryOrPoison(c.p, c.a); got != c.want {
			t.Errorf("%s: retryOrPoison(%+v, %+v) = {%v %v %d}, want {%v %v %d}", c.name, c.p, c.a,
				got.Action, got.Delay, got.Attempts, c.want.Action, c.want.Delay, c.want.Attempts)
		}
	}
}

// TestBackoffIsTheManifests checks that the decision uses the manifest's
// settings as Manifest.Backoff reports them (the whole-system poison test
// measures the gaps against Backoff).
func TestBackoffIsTheManifests(t *testing.T) {
	m := Manifest{Name: "ok-name", BackoffMin: Duration(30 * time.Millisecond), BackoffMax: Duration(200 * time.Millisecond)}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	for n := 1; n < m.MaxDequeueCount; n++ {
		if got := retryOrPoison(m.retryPolicy(), attempt{DequeueCount: n, Failed: true}); got.Delay != m.Backoff(n) {
			t.Errorf("dequeue count %d: delay %v, Backoff %v", n, got.Delay, m.Backoff(n))
		}
	}
}
