package functions

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/cairn-dev/cairn/engine"
)

// Manifest describes a deployed function: what triggers it and how its
// deliveries are retried. It is stored as JSON in the registry and read
// from cairn.json next to a function's source.
type Manifest struct {
	// Name is 3-63 characters of a-z, 0-9 and -, starting with a letter.
	Name    string  `json:"name"`
	Trigger Trigger `json:"trigger"`
	// MaxDequeueCount is the delivery at which a failing message moves to
	// the poison queue (5).
	MaxDequeueCount int `json:"maxDequeueCount,omitempty"`
	// Timeout bounds one invocation (30s).
	Timeout Duration `json:"timeout,omitempty"`
	// Concurrency is how many invocations one node runs at once (4).
	Concurrency int `json:"concurrency,omitempty"`
	// BackoffMin and BackoffMax bound the delay before a failed message is
	// delivered again: BackoffMin after the first failure, doubling after
	// each next one, at most BackoffMax (1s, 1m).
	BackoffMin Duration `json:"backoffMin,omitempty"`
	BackoffMax Duration `json:"backoffMax,omitempty"`
	// MemoryMB caps a WebAssembly instance's memory (128). MemoryMB ×
	// Concurrency is the function's share of each node's sandbox budget.
	MemoryMB int `json:"memoryMB,omitempty"`
	// EnqueueRate bounds the messages the function enqueues per second
	// on each node (DefaultEnqueueRate); past it an invocation waits,
	// within its timeout.
	EnqueueRate int `json:"enqueueRate,omitempty"`
	// WriteRate bounds the entities the function writes per second on
	// each node (DefaultWriteRate), as EnqueueRate.
	WriteRate int `json:"writeRate,omitempty"`
	// QueueBacklog bounds the messages waiting on a queue the function
	// enqueues to (DefaultQueueBacklog): an Enqueue that would pass it
	// fails with QueueBacklogExceeded.
	QueueBacklog int `json:"queueBacklog,omitempty"`

	// Set by the registry.
	Version  int       `json:"version,omitempty"`
	Module   string    `json:"module,omitempty"` // object name in the module store
	Digest   string    `json:"digest,omitempty"` // SHA-256 of the module
	Size     int64     `json:"size,omitempty"`
	Deployed time.Time `json:"deployed,omitzero"`
	// Builtin names a native function instead of a module.
	Builtin string `json:"builtin,omitempty"`
}

// Trigger is what invokes a function besides a direct request over NATS,
// which reaches every function. At most one of the fields is set.
type Trigger struct {
	// Queue: each message published to <prefix>.queue.<Queue>.
	Queue string `json:"queue,omitempty"`
	// Table: each committed change of the table, in journal order.
	Table string `json:"table,omitempty"`
	// Every: a tick at each multiple of the interval (at least 1s),
	// delivered through the queue timer-<name>, once for all nodes.
	Every Duration `json:"every,omitempty"`
	// Cron: a tick at each time of a cron schedule ("*/5 * * * *",
	// "@hourly", "CRON_TZ=Europe/Paris 0 9 * * 1-5"), delivered as Every's.
	Cron string `json:"cron,omitempty"`
	// HTTP: each request on one of its routes, on every host's HTTP
	// listener under /fn/<name>/ (httptrigger.go).
	HTTP *HTTPTrigger `json:"http,omitempty"`
}

// sameFeed reports whether t and u are fed by the same messages: the same
// queue, table or schedule, or both HTTP (routes are matched per request,
// from the version that takes it, so they need no feed of their own).
func (t Trigger) sameFeed(u Trigger) bool {
	if (t.HTTP == nil) != (u.HTTP == nil) {
		return false
	}
	t.HTTP, u.HTTP = nil, nil
	return t == u
}

// schedule returns the timer's schedule: the next tick after a time.
func (t Trigger) schedule() (func(time.Time) time.Time, error) {
	if t.Cron != "" {
		s, err := cron.ParseStandard(t.Cron)
		if err != nil {
			return nil, fmt.Errorf("trigger: cron %q: %v", t.Cron, err)
		}
		return s.Next, nil
	}
	every := t.Every.D()
	return func(now time.Time) time.Time { return now.Truncate(every).Add(every) }, nil
}

// Kind names the trigger ("queue", "table", "timer", "http" or
// "invoke").
func (t Trigger) Kind() string {
	switch {
	case t.HTTP != nil:
		return "http"
	case t.Queue != "":
		return "queue"
	case t.Table != "":
		return "table"
	case t.Every > 0, t.Cron != "":
		return "timer"
	}
	return "invoke"
}

// Duration is a time.Duration written as "30s" in JSON.
type Duration time.Duration

// MarshalJSON writes the duration as text.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "30s", "1m30s" (or a number of seconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var secs float64
		if json.Unmarshal(b, &secs) != nil {
			return fmt.Errorf("a duration is text like \"30s\" or a number of seconds, not %s", b)
		}
		*d = Duration(secs * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// nameRE is the rule for function and queue names (Azure's queue names).
var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{2,62}$`)

// ValidateName checks a function or queue name.
func ValidateName(what, name string) error {
	if !nameRE.MatchString(name) || strings.Contains(name, "--") || strings.HasSuffix(name, "-") {
		return fmt.Errorf("%s name %q: use 3-63 characters of a-z, 0-9 and single hyphens, starting with a letter and not ending with a hyphen", what, name)
	}
	return nil
}

// Defaults fills the zero fields.
func (m *Manifest) Defaults() {
	if m.MaxDequeueCount == 0 {
		m.MaxDequeueCount = 5
	}
	if m.Timeout == 0 {
		m.Timeout = Duration(30 * time.Second)
	}
	if m.Concurrency == 0 {
		m.Concurrency = 4
	}
	if m.BackoffMin == 0 {
		m.BackoffMin = Duration(time.Second)
	}
	if m.BackoffMax == 0 {
		m.BackoffMax = Duration(time.Minute)
	}
	if m.MemoryMB == 0 {
		m.MemoryMB = 128
	}
	if m.EnqueueRate == 0 {
		m.EnqueueRate = DefaultEnqueueRate
	}
	if m.WriteRate == 0 {
		m.WriteRate = DefaultWriteRate
	}
	if m.QueueBacklog == 0 {
		m.QueueBacklog = DefaultQueueBacklog
	}
}

// Validate fills defaults and checks the manifest.
func (m *Manifest) Validate() error {
	m.Defaults()
	var errs []error
	if err := ValidateName("function", m.Name); err != nil {
		errs = append(errs, err)
	}
	t := m.Trigger
	set := 0
	for _, b := range []bool{t.Queue != "", t.Table != "", t.Every != 0, t.Cron != "", t.HTTP != nil} {
		if b {
			set++
		}
	}
	if set > 1 {
		errs = append(errs, errors.New("trigger: give one of queue, table, every, cron and http"))
	}
	if t.HTTP != nil {
		if err := t.HTTP.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if t.Queue != "" {
		if err := ValidateName("queue", t.Queue); err != nil {
			errs = append(errs, fmt.Errorf("trigger: %w", err))
		}
	}
	if t.Table != "" {
		// A table of the development account ("Orders") or of another
		// ("contoso.Orders").
		if err := engine.ValidateFullTableName(t.Table); err != nil {
			errs = append(errs, fmt.Errorf("trigger: %s", engine.AsError(err).Message))
		}
	}
	if t.Every != 0 && t.Every.D() < time.Second {
		errs = append(errs, fmt.Errorf("trigger: every %v is below the minimum of 1s", t.Every.D()))
	}
	if t.Cron != "" {
		if _, err := t.schedule(); err != nil {
			errs = append(errs, err)
		}
	}
	if m.MaxDequeueCount < 1 || m.MaxDequeueCount > 100 {
		errs = append(errs, fmt.Errorf("maxDequeueCount %d: use 1..100", m.MaxDequeueCount))
	}
	if m.Timeout.D() < 10*time.Millisecond || m.Timeout.D() > 15*time.Minute {
		errs = append(errs, fmt.Errorf("timeout %v: use 10ms..15m", m.Timeout.D()))
	}
	if m.Concurrency < 1 || m.Concurrency > 256 {
		errs = append(errs, fmt.Errorf("concurrency %d: use 1..256", m.Concurrency))
	}
	if m.BackoffMin < 0 || m.BackoffMax < m.BackoffMin {
		errs = append(errs, fmt.Errorf("backoff: want 0 <= backoffMin (%v) <= backoffMax (%v)", m.BackoffMin.D(), m.BackoffMax.D()))
	}
	if m.MemoryMB < 1 || m.MemoryMB > 4096 {
		errs = append(errs, fmt.Errorf("memoryMB %d: use 1..4096", m.MemoryMB))
	}
	if m.EnqueueRate < 1 || m.EnqueueRate > MaxRate {
		errs = append(errs, fmt.Errorf("enqueueRate %d: use 1..%d messages per second", m.EnqueueRate, MaxRate))
	}
	if m.WriteRate < 1 || m.WriteRate > MaxRate {
		errs = append(errs, fmt.Errorf("writeRate %d: use 1..%d writes per second", m.WriteRate, MaxRate))
	}
	if m.QueueBacklog < 1 || m.QueueBacklog > MaxQueueBacklog {
		errs = append(errs, fmt.Errorf("queueBacklog %d: use 1..%d messages", m.QueueBacklog, MaxQueueBacklog))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("manifest of %q: %w", m.Name, err)
	}
	return nil
}

// Backoff is the delay after the n-th failed delivery (n >= 1).
func (m *Manifest) Backoff(n int) time.Duration {
	return backoff(m.BackoffMin.D(), m.BackoffMax.D(), n)
}

// AckWait is how long a delivery may stay unanswered before JetStream
// delivers it again: the same for every function, since a delivery being
// worked on says so every third of it (keepAlive). A node that dies
// mid-invocation therefore delays its message by this much at most.
func (m *Manifest) AckWait() time.Duration { return ackWait }
