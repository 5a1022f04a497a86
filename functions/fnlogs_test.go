package functions

import (
	"fmt"
	"sync"
	"testing"
)

// TestLogRing: the ring keeps the latest LogLinesKept lines, oldest first,
// and loses none of those while writers and readers run at once.
func TestLogRing(t *testing.T) {
	var r logRing
	if got := r.all(); len(got) != 0 {
		t.Fatalf("an empty ring holds %d lines", len(got))
	}
	for i := range 3 {
		r.add(LogLine{Line: fmt.Sprint(i)})
	}
	if got := r.all(); len(got) != 3 || got[0].Line != "0" || got[2].Line != "2" {
		t.Fatalf("three lines: %+v", got)
	}
	const writers, each = 4, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r.add(LogLine{Version: w, Line: fmt.Sprint(i)})
				_ = r.all()
			}
		}()
	}
	wg.Wait()
	got := r.all()
	if len(got) != LogLinesKept {
		t.Fatalf("%d lines kept, want %d", len(got), LogLinesKept)
	}
	// Each writer's lines are in its order, and the last is its last.
	last := map[int]int{}
	for _, l := range got {
		var n int
		fmt.Sscan(l.Line, &n)
		if p, ok := last[l.Version]; ok && n <= p {
			t.Fatalf("writer %d's lines out of order: %d after %d", l.Version, n, p)
		}
		last[l.Version] = n
	}
	for w, n := range last {
		if n != each-1 && got[len(got)-1].Version == w {
			t.Fatalf("the newest line of writer %d is %d, want %d", w, n, each-1)
		}
	}
}
