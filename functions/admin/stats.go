package admin

import (
	"time"

	"github.com/cairn-dev/cairn/functions"
)

// RunnerStats are the runner's counters as GET /$cairn/runner shows them:
// this node's, since it started, for all functions together. They live in
// memory: a restarted node counts from 0 again while its queues and poison
// queues keep their messages, so Since says from when they count.
type RunnerStats struct {
	Since          time.Time `json:"since"` // when this node's runner started counting
	Loaded         int       `json:"loaded"`
	Invocations    uint64    `json:"invocations"`
	Failures       uint64    `json:"failures"`
	Poisoned       uint64    `json:"poisoned"`
	Throttled      uint64    `json:"throttled"`
	BacklogRefused uint64    `json:"backlogRefused"`
	QueueFull      uint64    `json:"queueFull"`
	PoisonRefused  uint64    `json:"poisonRefused"`
}

// runnerStats reads the runner's counters, each on its own: a figure may
// count an invocation another does not count yet.
func (h *Handler) runnerStats() RunnerStats {
	s := h.rn.Stats()
	return RunnerStats{Since: h.rn.Since(), Loaded: h.rn.Loaded(), Invocations: s.Invocations.Load(), Failures: s.Failures.Load(), Poisoned: s.Poisoned.Load(),
		Throttled: s.Throttled.Load(), BacklogRefused: s.BacklogRefused.Load(), QueueFull: s.QueueFull.Load(), PoisonRefused: s.PoisonRefused.Load()}
}

// unregistered returns the functions this node runs that the registry does
// not hold (the built-ins and those registered in-process), by name.
func (h *Handler) unregistered(registered []functions.Manifest) []functions.Manifest {
	known := make(map[string]bool, len(registered))
	for _, m := range registered {
		known[m.Name] = true
	}
	var out []functions.Manifest
	for _, m := range h.rn.Running() {
		if !known[m.Name] {
			out = append(out, m)
		}
	}
	return out
}
