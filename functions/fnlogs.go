package functions

import (
	"sync"
	"time"
)

// LogLinesKept is how many of its latest log lines the node keeps per
// function for GET /$cairn/functions/<name>/logs.
const LogLinesKept = 100

// LogLine is a line a function logged on this node.
type LogLine struct {
	Time    time.Time `json:"time"`
	Version int       `json:"version"`
	Trigger string    `json:"trigger"` // the trigger's id
	Line    string    `json:"line"`
}

// logRing holds a function's latest LogLinesKept lines. Cost: a lock and
// a copy of the line per line logged; at most LogLinesKept lines of at
// most 4 KiB each per function name this node ever ran.
type logRing struct {
	mu    sync.Mutex
	lines [LogLinesKept]LogLine
	next  int // where the next line goes
	n     int // lines held
}

func (r *logRing) add(l LogLine) {
	r.mu.Lock()
	r.lines[r.next] = l
	r.next = (r.next + 1) % LogLinesKept
	r.n = min(r.n+1, LogLinesKept)
	r.mu.Unlock()
}

// all returns the lines held, oldest first.
func (r *logRing) all() []LogLine {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]LogLine, 0, r.n)
	for i := range r.n {
		out = append(out, r.lines[(r.next-r.n+i+LogLinesKept)%LogLinesKept])
	}
	return out
}

// logRingOf returns the log lines kept for a function, made on first use.
func (rn *Runner) logRingOf(name string) *logRing {
	if r, ok := rn.logs.Load(name); ok {
		return r.(*logRing)
	}
	r, _ := rn.logs.LoadOrStore(name, &logRing{})
	return r.(*logRing)
}

// FunctionLogs returns the latest lines (at most LogLinesKept) a function
// logged on this node since it started, oldest first, and whether it
// logged any here.
func (rn *Runner) FunctionLogs(name string) ([]LogLine, bool) {
	if r, ok := rn.logs.Load(name); ok {
		return r.(*logRing).all(), true
	}
	return []LogLine{}, false
}
