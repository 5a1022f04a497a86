package main

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Reading the markdown tables a benchmark prints, for -baseline
// (baseline.go): every row becomes one or more metrics, each a figure with
// its unit, keyed so that the same row of two binaries' outputs, and of
// every round, is found again. Nothing here runs a process.

// A unitKind says how a quantity's unit reads: which way is better, and
// how values in different units are brought to one.
type unitKind int

const (
	unitNone     unitKind = iota // a count or a ratio: no way is better
	unitRate                     // "…/s": higher is better
	unitDuration                 // seconds: lower is better
	unitSize                     // bytes: lower is better
)

// A quantity is one number read from a cell. Durations are held in seconds
// and sizes in bytes, so "950µs" and "1.2ms" compare; unit is what is
// printed after a median ("s" and "B" for those two, the rate's own unit,
// or "" for none).
type quantity struct {
	value float64
	unit  string
	kind  unitKind
}

// A metric is one quantity of one row of one output.
type metric struct {
	// key finds the same metric in another output: the table, the row's
	// name with its numbers blanked (a row may print a figure measured in
	// the run in its name), the label, the unit, and the row's place among
	// rows whose key is otherwise the same.
	key string
	// name is the row as printed, with the label and, when the quantity is
	// not in the second column, that column's header.
	name string
	quantity
}

// durationUnits are the units of a duration written with a space after
// the number ("1.23 s"), in seconds.
var durationUnits = map[string]float64{
	"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3,
	"s": 1, "sec": 1, "min": 60, "h": 3600,
}

// sizeUnits are the units of a size, in bytes.
var sizeUnits = map[string]float64{
	"B": 1, "byte": 1, "bytes": 1,
	"KB": 1e3, "MB": 1e6, "GB": 1e9,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
}

var (
	// number is a figure as the benchmarks print it: digits, thousands
	// separated by commas or not, and decimals.
	number = regexp.MustCompile(`^\d+(?:,\d{3})*(?:\.\d+)?`)
	// goDuration is a time.Duration's String form ("92µs", "1m2.5s").
	goDuration = regexp.MustCompile(`^(?:\d+(?:\.\d+)?(?:ns|us|µs|μs|ms|s|m|h))+`)
	// label names the figure that follows it: "p50 92µs, p99 253µs, max 1ms".
	label = regexp.MustCompile(`(?:^|[^\pL\d])(p\d+(?:\.\d+)?|min|max|mean|median)[ :]+\d`)
	// separator is a cell of the line under a table's header.
	separator = regexp.MustCompile(`^:?-{3,}:?$`)
	// digits are what keys leave out when matching rows.
	digits = regexp.MustCompile(`\d+(?:[,.]\d+)*`)
)

// parseRows reads every markdown table row of out. A row followed by a
// separator line is a header (it names the columns, and its first cell
// names the table); the separator is skipped. Each other row gives the
// figure of its first column that holds a rate, a duration or a size,
// looking past columns of bare counts or words and stopping at an empty
// one or "-" (where the figure would have been: a later column is
// another's); failing that, the first number of its second column, in
// the unit its header names if the header is one. A cell of labelled figures
// ("p50 X, p99 Y") gives one metric per label, and a later column whose
// header names CPU one more. Rows without a number are left out.
func parseRows(out string) []metric {
	lines := strings.Split(out, "\n")
	var header []string
	var ms []metric
	seen := map[string]int{}
	for i, line := range lines {
		cells, ok := tableCells(line)
		if !ok {
			header = nil
			continue
		}
		if isSeparator(cells) {
			continue
		}
		if i+1 < len(lines) {
			if next, ok := tableCells(lines[i+1]); ok && isSeparator(next) {
				header = cells
				continue
			}
		}
		for _, m := range rowMetrics(header, cells) {
			seen[m.key]++
			if n := seen[m.key]; n > 1 {
				m.key += "#" + strconv.Itoa(n)
			}
			ms = append(ms, m)
		}
	}
	return ms
}

// tableCells splits a line "| a | b |" into its trimmed cells.
func tableCells(line string) ([]string, bool) {
	line = strings.TrimSpace(line)
	if len(line) < 2 || line[0] != '|' || line[len(line)-1] != '|' {
		return nil, false
	}
	cells := strings.Split(line[1:len(line)-1], "|")
	for i, c := range cells {
		cells[i] = strings.TrimSpace(c)
	}
	return cells, true
}

func isSeparator(cells []string) bool {
	for _, c := range cells {
		if !separator.MatchString(c) {
			return false
		}
	}
	return true
}

// rowMetrics gives the metrics of one row under header (nil: none seen).
func rowMetrics(header, cells []string) []metric {
	if len(cells) < 2 || cells[0] == "" {
		return nil
	}
	col := 1
	figs := cellQuantities(cells[1])
	for i := 1; i < len(cells) && cells[i] != "" && cells[i] != "-"; i++ {
		fs := cellQuantities(cells[i])
		if len(fs) > 0 && fs[0].kind != unitNone {
			col, figs = i, fs
			break
		}
	}
	if len(figs) == 0 {
		return nil
	}
	if col == 1 && len(figs) == 1 && figs[0].kind == unitNone && len(header) > 1 {
		if u, ok := unitOf(header[1]); ok {
			figs[0].quantity = u.scaled(figs[0].value)
		}
	}
	table, name := "", cells[0]
	if len(header) > 0 {
		table = header[0]
		// A row named by a number ("3", "1× (200000 entities)") is
		// read with its table's first header: "hosts 3".
		if name[0] >= '0' && name[0] <= '9' {
			name = header[0] + " " + name
		}
	}
	if col != 1 && col < len(header) {
		name += ": " + header[col]
	}
	ms := make([]metric, 0, len(figs)+1)
	for _, f := range figs {
		n := name
		if f.label != "" {
			n += " " + f.label
		}
		key := table + "\x00" + digits.ReplaceAllString(name, "#") + "\x00" + f.label + "\x00" + f.unit
		ms = append(ms, metric{key: key, name: n, quantity: f.quantity})
	}
	// A later column headed with CPU (the HTTP benchmark's server CPU per
	// entity, what its goals bound) gives a metric of its own.
	for j := col + 1; j < len(cells) && j < len(header); j++ {
		if !strings.Contains(header[j], "CPU") {
			continue
		}
		if q, ok := firstQuantity(cells[j]); ok && q.kind != unitNone {
			n := cells[0] + ": " + header[j]
			key := table + "\x00" + digits.ReplaceAllString(n, "#") + "\x00\x00" + q.unit
			ms = append(ms, metric{key: key, name: n, quantity: q})
		}
	}
	return ms
}

// A labelledQuantity is a quantity with the label printed before it, if any.
type labelledQuantity struct {
	label string
	quantity
}

// cellQuantities reads a cell: each labelled figure if it has labels, else
// its first number. A cell without a number gives none.
func cellQuantities(cell string) []labelledQuantity {
	var out []labelledQuantity
	for _, loc := range label.FindAllStringSubmatchIndex(cell, -1) {
		name := cell[loc[2]:loc[3]]
		if f, ok := firstQuantity(cell[loc[3]:]); ok {
			out = append(out, labelledQuantity{label: name, quantity: f})
		}
	}
	if len(out) > 0 {
		return out
	}
	if f, ok := firstQuantity(cell); ok {
		return []labelledQuantity{{quantity: f}}
	}
	return nil
}

// firstQuantity reads the first number of s that does not belong to a word
// ("p50", "R2"), with the unit right after it.
func firstQuantity(s string) (quantity, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			continue
		}
		if i > 0 && (isWordByte(s[i-1]) || s[i-1] == '.') {
			continue
		}
		if d := goDuration.FindString(s[i:]); d != "" && !followedByWord(s[i+len(d):]) {
			if v, err := time.ParseDuration(d); err == nil {
				return quantity{value: v.Seconds(), unit: "s", kind: unitDuration}, true
			}
		}
		num := number.FindString(s[i:])
		v, err := strconv.ParseFloat(strings.ReplaceAll(num, ",", ""), 64)
		if err != nil {
			return quantity{}, false
		}
		rest := s[i+len(num):]
		if strings.HasPrefix(rest, " ") {
			if u, ok := unitOf(firstWord(rest[1:])); ok {
				return u.scaled(v), true
			}
		}
		return quantity{value: v}, true
	}
	return quantity{}, false
}

// A unit is a unit as printed, with its kind and its factor to seconds
// or bytes.
type unit struct {
	name   string
	kind   unitKind
	factor float64
}

func (u unit) scaled(v float64) quantity {
	switch u.kind {
	case unitDuration:
		return quantity{value: v * u.factor, unit: "s", kind: unitDuration}
	case unitSize:
		return quantity{value: v * u.factor, unit: "B", kind: unitSize}
	}
	return quantity{value: v, unit: u.name, kind: u.kind}
}

// unitOf reads w as a unit: a duration's, a size's, or a rate's ("…/s").
func unitOf(w string) (unit, bool) {
	if f, ok := durationUnits[w]; ok {
		return unit{name: w, kind: unitDuration, factor: f}, true
	}
	if f, ok := sizeUnits[w]; ok {
		return unit{name: w, kind: unitSize, factor: f}, true
	}
	if len(w) > 2 && strings.HasSuffix(w, "/s") && !strings.ContainsAny(w, " \t") {
		return unit{name: w, kind: unitRate, factor: 1}, true
	}
	return unit{}, false
}

// firstWord is s up to the first space or punctuation that ends a unit.
func firstWord(s string) string {
	if i := strings.IndexAny(s, " \t,;()[]|"); i >= 0 {
		return s[:i]
	}
	return s
}

func isWordByte(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b >= 0x80
}

// followedByWord reports whether s goes on with a letter, as "5m" does
// in "5min" or "3ms" in "3msgs": then it was no duration.
func followedByWord(s string) bool {
	return s != "" && (isWordByte(s[0]) || s[0] == '/')
}
