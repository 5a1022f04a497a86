package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// minVerdictRounds is the fewest rounds each side needs before a row is
// called better or worse. A row is called so only when every round of
// one side lies beyond every round of the other; with 3 rounds each that
// happens by chance once in 10 comparisons of two equal binaries (2 of
// the 20 ways to order 6 values), with 2 each once in 3, which says
// nothing.
const minVerdictRounds = 3

// A comparison gathers the rounds of each metric, base and head, in the
// order the metrics were first seen.
type comparison struct {
	order []string
	rows  map[string]*comparedRow
}

// A comparedRow is one metric's rounds on both sides.
type comparedRow struct {
	names      []string // the row's name in each output it came from
	unit       string
	kind       unitKind
	base, head []float64
}

func newComparison() *comparison {
	return &comparison{rows: map[string]*comparedRow{}}
}

// add records one output's metrics, of the head binary or the base's.
func (c *comparison) add(head bool, ms []metric) {
	for _, m := range ms {
		r, ok := c.rows[m.key]
		if !ok {
			r = &comparedRow{unit: m.unit, kind: m.kind}
			c.rows[m.key] = r
			c.order = append(c.order, m.key)
		}
		r.names = append(r.names, m.name)
		if head {
			r.head = append(r.head, m.value)
		} else {
			r.base = append(r.base, m.value)
		}
	}
}

// name is the row's name: as printed when every output printed it alike,
// otherwise with "…" for each number that changed (a figure of the run
// printed in the name, such as "at 12,345 writes/s").
func (r *comparedRow) name() string {
	first := r.names[0]
	nums := digits.FindAllStringIndex(first, -1)
	varies := make([]bool, len(nums))
	for _, n := range r.names[1:] {
		other := digits.FindAllString(n, -1)
		for i, loc := range nums {
			if i >= len(other) || other[i] != first[loc[0]:loc[1]] {
				varies[i] = true
			}
		}
	}
	var b strings.Builder
	at := 0
	for i, loc := range nums {
		if varies[i] {
			b.WriteString(first[at:loc[0]])
			b.WriteString("…")
			at = loc[1]
		}
	}
	b.WriteString(first[at:])
	return b.String()
}

// verdict says how head compares with base when every round of one side
// lies beyond every round of the other and each side has at least
// minVerdictRounds rounds: "better" or "worse" where the unit says which
// way is better (rates up; durations and sizes down), "higher" or "lower"
// where it does not. Otherwise "-" (too few rounds) or "within the
// spread".
func (r *comparedRow) verdict() string {
	if len(r.base) < minVerdictRounds || len(r.head) < minVerdictRounds {
		return "-"
	}
	bmin, bmax := minMax(r.base)
	hmin, hmax := minMax(r.head)
	higher, lower := "higher", "lower"
	switch r.kind {
	case unitRate:
		higher, lower = "better", "worse"
	case unitDuration, unitSize:
		higher, lower = "worse", "better"
	}
	switch {
	case hmin > bmax:
		return higher
	case hmax < bmin:
		return lower
	}
	return "within the spread"
}

func minMax(xs []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// write prints the comparison as one markdown table: each metric's
// median on either side ("-" where a side never printed it), head/base,
// the verdict and the rounds each side gave.
func (c *comparison) write(w io.Writer, baseLabel, headLabel string) {
	fmt.Fprintf(w, "| workload | base %s median | head %s median | head/base | head is | rounds each side |\n", baseLabel, headLabel)
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, k := range c.order {
		r := c.rows[k]
		base, head, ratio := "-", "-", "-"
		if len(r.base) > 0 {
			base = formatFigure(median(r.base), r.unit, r.kind)
		}
		if len(r.head) > 0 {
			head = formatFigure(median(r.head), r.unit, r.kind)
		}
		if len(r.base) > 0 && len(r.head) > 0 && median(r.base) != 0 {
			ratio = fmt.Sprintf("%.2f", median(r.head)/median(r.base))
		}
		rounds := fmt.Sprint(len(r.base))
		if len(r.base) != len(r.head) {
			rounds = fmt.Sprintf("%d / %d", len(r.base), len(r.head))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.name(), base, head, ratio, r.verdict(), rounds)
	}
}

// formatFigure prints v in its unit: durations as Go prints them, to
// three significant digits; sizes in bytes, KB or MB; anything else to
// three significant digits or as a whole number.
func formatFigure(v float64, unit string, kind unitKind) string {
	switch kind {
	case unitDuration:
		d := time.Duration(v * float64(time.Second))
		return d.Round(significant(d)).String()
	case unitSize:
		switch {
		case v < 1e4:
			return fmt.Sprintf("%.0f bytes", v)
		case v < 1e7:
			return fmt.Sprintf("%.1f KB", v/1e3)
		case v < 1e10:
			return fmt.Sprintf("%.1f MB", v/1e6)
		}
		return fmt.Sprintf("%.2f GB", v/1e9)
	}
	s := fmt.Sprintf("%.3g", v)
	if math.Abs(v) >= 100 {
		s = fmt.Sprintf("%.0f", v)
	}
	if unit != "" {
		s += " " + unit
	}
	return s
}

// significant is the rounding that leaves d three significant digits.
func significant(d time.Duration) time.Duration {
	r := time.Duration(1)
	for d/r >= 1000 {
		r *= 10
	}
	return r
}
