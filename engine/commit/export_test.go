package commit

import "time"

// WorkersStarted returns how many workers c has started.
func (c *Committer) WorkersStarted() uint64 { return c.started.Load() }

// SetWorkerIdle sets how long a worker waits for another partition, for
// the test that calls it, and returns what restores it.
func SetWorkerIdle(d time.Duration) (restore func()) {
	old := workerIdle
	workerIdle = d
	return func() { workerIdle = old }
}
