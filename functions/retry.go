package functions

import "time"

// The decision taken for each delivery, before it runs and after it
// failed, is a pure function of the dequeue count and the manifest's
// delivery settings: no NATS, no clock. The triggers carry it out
// (NakWithDelay, Nak, or a move to the poison queue), so that the rules
// are tested as a table (retry_test.go) and every trigger follows the same
// ones.

// retryPolicy is what a manifest says about retries.
type retryPolicy struct {
	// MaxDequeueCount is the delivery whose failure poisons the message.
	MaxDequeueCount int
	// BackoffMin is the delay after the first failure, doubling after each
	// next one, at most BackoffMax.
	BackoffMin, BackoffMax time.Duration
}

// retryPolicy returns m's delivery settings.
func (m *Manifest) retryPolicy() retryPolicy {
	return retryPolicy{MaxDequeueCount: m.MaxDequeueCount, BackoffMin: m.BackoffMin.D(), BackoffMax: m.BackoffMax.D()}
}

// attempt is one delivery of a message, as the decision sees it.
type attempt struct {
	// DequeueCount is JetStream's delivery count of the message: 1 on the
	// first delivery, and counting deliveries that never finished (their
	// node died, or lost its connection).
	DequeueCount int
	// Failed: the function ran on this delivery and failed. False: the
	// delivery is about to run.
	Failed bool
	// Stopped: the runner was stopping while the function ran, so the
	// failure may be the stop's and says nothing about the message.
	Stopped bool
}

// action is what becomes of a delivery.
type action int

const (
	actRun    action = iota // run the function on it
	actRetry                // deliver it again after verdict.Delay (0: at once)
	actPoison               // move it to the poison queue
)

func (a action) String() string {
	switch a {
	case actRun:
		return "run"
	case actRetry:
		return "retry"
	case actPoison:
		return "poison"
	}
	return "action(?)"
}

// verdict is the decision on a delivery.
type verdict struct {
	Action action
	// Delay is how long JetStream waits before delivering it again
	// (actRetry).
	Delay time.Duration
	// Attempts is how many deliveries are counted against the message
	// (actPoison: its Cairn-Attempts header). A message poisoned without
	// running does not count the delivery that poisons it.
	Attempts int
}

// retryOrPoison decides what becomes of a delivery:
//
//   - before it runs, a delivery whose dequeue count is past the maximum is
//     poisoned without running: its earlier deliveries never finished, so
//     running it again would likely take another node down;
//   - a delivery cut short by the runner stopping is delivered again at
//     once, whatever its count (the next node runs it);
//   - a failed delivery at the maximum dequeue count is poisoned;
//   - any other failed delivery is delivered again after BackoffMin ×
//     2^(n-1), at most BackoffMax.
func retryOrPoison(p retryPolicy, a attempt) verdict {
	n := a.DequeueCount
	switch {
	case !a.Failed && n > p.MaxDequeueCount:
		return verdict{Action: actPoison, Attempts: n - 1}
	case !a.Failed:
		return verdict{Action: actRun}
	case a.Stopped:
		return verdict{Action: actRetry, Attempts: n}
	case n >= p.MaxDequeueCount:
		return verdict{Action: actPoison, Attempts: n}
	}
	return verdict{Action: actRetry, Delay: backoff(p.BackoffMin, p.BackoffMax, n), Attempts: n}
}

// backoff is the delay after the n-th failed delivery (n >= 1): first,
// doubling after each next failure, at most limit.
func backoff(first, limit time.Duration, n int) time.Duration {
	d := first
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
