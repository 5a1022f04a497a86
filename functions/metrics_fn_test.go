package functions

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestPerFunctionSeries: runs land in their trigger's counter and their
// duration's bucket (cumulative), failures in the function's counter, and
// a label value is escaped.
func TestPerFunctionSeries(t *testing.T) {
	var p perFunction
	p.record("a", "queue", 3*time.Millisecond, false)
	p.record("a", "queue", 2*time.Second, true)
	p.record("a", "invoke", time.Minute, false)
	p.record(`b"\`, "timer", 0, false)
	var b bytes.Buffer
	p.write(&b)
	got := b.String()
	for _, want := range []string{
		`cairn_function_invocations_total{function="a",trigger="invoke"} 1`,
		`cairn_function_invocations_total{function="a",trigger="queue"} 2`,
		`cairn_function_invocations_total{function="b\"\\",trigger="timer"} 1`,
		`cairn_function_failures_total{function="a"} 1`,
		`cairn_function_failures_total{function="b\"\\"} 0`,
		`cairn_function_duration_seconds_bucket{function="a",le="0.001"} 0`,
		`cairn_function_duration_seconds_bucket{function="a",le="0.005"} 1`,
		`cairn_function_duration_seconds_bucket{function="a",le="1"} 1`,
		`cairn_function_duration_seconds_bucket{function="a",le="5"} 2`,
		`cairn_function_duration_seconds_bucket{function="a",le="30"} 2`,
		`cairn_function_duration_seconds_bucket{function="a",le="+Inf"} 3`,
		`cairn_function_duration_seconds_sum{function="a"} 62.003`,
		`cairn_function_duration_seconds_count{function="a"} 3`,
		`cairn_function_duration_seconds_bucket{function="b\"\\",le="0.001"} 1`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("missing %s in\n%s", want, got)
		}
	}
	if strings.Count(got, "# TYPE ") != 3 {
		t.Errorf("families:\n%s", got)
	}
}

// TestPerFunctionTotals: the operators' totals count a run when it
// begins and poisoned deliveries, while /metrics shows a function only
// once a run of it ended; a function never run has zero totals.
func TestPerFunctionTotals(t *testing.T) {
	var p perFunction
	p.start("a")
	p.start("a")
	p.record("a", "queue", time.Millisecond, true)
	p.poison("a")
	if i, f, z := p.totals("a"); i != 2 || f != 1 || z != 1 {
		t.Fatalf("totals(a) = %d, %d, %d; want 2, 1, 1", i, f, z)
	}
	p.start("b") // in flight: no series yet
	if i, f, z := p.totals("never"); i != 0 || f != 0 || z != 0 {
		t.Fatalf("totals(never) = %d, %d, %d", i, f, z)
	}
	var b bytes.Buffer
	p.write(&b)
	if got := b.String(); strings.Contains(got, `function="b"`) || strings.Contains(got, `function="never"`) || !strings.Contains(got, `cairn_function_failures_total{function="a"} 1`+"\n") {
		t.Fatalf("series:\n%s", got)
	}
}
