package functions

import (
	"slices"
	"strings"
	"time"
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

func (rn *Runner) runnerStats() RunnerStats {
	rn.mu.Lock()
	loaded := len(rn.fns)
	rn.mu.Unlock()
	s := &rn.stats
	return RunnerStats{Since: rn.since, Loaded: loaded, Invocations: s.Invocations.Load(), Failures: s.Failures.Load(), Poisoned: s.Poisoned.Load(),
		Throttled: s.Throttled.Load(), BacklogRefused: s.BacklogRefused.Load(), QueueFull: s.QueueFull.Load(), PoisonRefused: s.PoisonRefused.Load()}
}

// unregistered returns the functions this node runs that the registry does
// not hold (the built-ins and those registered in-process), by name.
func (rn *Runner) unregistered(registered []Manifest) []Manifest {
	known := make(map[string]bool, len(registered))
	for _, m := range registered {
		known[m.Name] = true
	}
	rn.mu.Lock()
	var out []Manifest
	for name, f := range rn.fns {
		if !known[name] {
			out = append(out, f.cur.Load().m)
		}
	}
	rn.mu.Unlock()
	slices.SortFunc(out, func(a, b Manifest) int { return strings.Compare(a.Name, b.Name) })
	return out
}
