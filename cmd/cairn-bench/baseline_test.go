package main

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestFirstQuantity(t *testing.T) {
	for _, tc := range []struct {
		cell string
		want quantity
		ok   bool
	}{
		{"33146 entities/s", quantity{33146, "entities/s", unitRate}, true},
		{"33,146 entities/s, 40,000 records/s", quantity{33146, "entities/s", unitRate}, true},
		{"92µs", quantity{92e-6, "s", unitDuration}, true},
		{"13.5ms", quantity{0.0135, "s", unitDuration}, true},
		{"1m2.5s (4000 employees/s)", quantity{62.5, "s", unitDuration}, true},
		{"1.23 s", quantity{1.23, "s", unitDuration}, true},
		{"250 ms", quantity{0.25, "s", unitDuration}, true},
		{"1534 bytes", quantity{1534, "B", unitSize}, true},
		{"12 MB / 13 MB / 14 MB", quantity{12e6, "B", unitSize}, true},
		{"3 of 400", quantity{3, "", unitNone}, true},
		{"3 msgs/s", quantity{3, "msgs/s", unitRate}, true},
		{"5min", quantity{5, "", unitNone}, true}, // not a Go duration, and no space before the unit
		{"R2 holds 7 s", quantity{7, "s", unitDuration}, true},
		{"333 / 334 (0.33)", quantity{333, "", unitNone}, true},
		{"2.3×", quantity{2.3, "", unitNone}, true},
		{"-", quantity{}, false},
		{"", quantity{}, false},
		{"native", quantity{}, false},
	} {
		got, ok := firstQuantity(tc.cell)
		if ok != tc.ok || !near(got.value, tc.want.value) || got.unit != tc.want.unit || got.kind != tc.want.kind {
			t.Errorf("firstQuantity(%q) = %+v, %v; want %+v, %v", tc.cell, got, ok, tc.want, tc.ok)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// got is a metric as the tests compare it.
type got struct {
	name  string
	value float64
	unit  string
}

func metrics(ms []metric) []got {
	out := make([]got, len(ms))
	for i, m := range ms {
		out[i] = got{m.name, math.Round(m.value*1e9) / 1e9, m.unit}
	}
	return out
}

func TestParseRowsNats(t *testing.T) {
	out := `# cairn bench: GOMAXPROCS=2, linux/amd64, go1.26.8, n=5000, window=512, rounds=1 (median)

entity: 10 properties, 1023 bytes as a msgpack Insert request

| workload | Cairn | raw JetStream async publish, same run | ratio | goal |
|---|---|---|---|---|
| insert, one partition (group commit) | 92163 entities/s | 140231 msgs/s | 0.66 | ≥ 20,000/s |
| command → visible latency, one at a time | p50 92µs, p99 1.2ms | sync publish p50 32µs, p99 128µs | 2.9× (p50) | |
| memory per entity in a view (10 properties, ~1 KB of values) | 1534 bytes | | | |
| a row without a figure | - | - | - | - |
| a row without its own figure | - | 5000 msgs/s | | |
`
	want := []got{
		{"insert, one partition (group commit)", 92163, "entities/s"},
		{"command → visible latency, one at a time p50", 92e-6, "s"},
		{"command → visible latency, one at a time p99", 1.2e-3, "s"},
		{"memory per entity in a view (10 properties, ~1 KB of values)", 1534, "B"},
	}
	if g := metrics(parseRows(out)); !reflect.DeepEqual(g, want) {
		t.Errorf("parseRows:\n got %+v\nwant %+v", g, want)
	}
}

func TestParseRowsColumns(t *testing.T) {
	// The snapshot cost's unit is in its header; start's second column
	// counts records, and its figures follow; placed's rows are numbers,
	// in two tables, the second's rows numbered again.
	out := `| insert, many partitions (1 entity per command) | entities/s | rounds |
|---|---|---|
| snapshots on (defaults) | 41000 | [41000] |

| history | records | full replay to ready | from the snapshot to ready | ratio |
|---|---|---|---|---|
| 1× (5000 entities) | 5000 | 0.25 s | 0.05 s | 0.20 |

| hosts | R | held | heap per host: min / median / max |
|---|---|---|---|
| 3 | 2 | 333 / 334 (0.33) | 12 MB / 13 MB / 14 MB |
| 6 | 2 | 167 / 168 (0.17) | 7 MB / 8 MB / 9 MB |

| round | views start from | ready after |
|---|---|---|
| 1 | snapshot | 1.5 s |
`
	want := []got{
		{"snapshots on (defaults)", 41000, "entities/s"},
		{"history 1× (5000 entities): full replay to ready", 0.25, "s"},
		{"hosts 3: heap per host: min / median / max", 12e6, "B"},
		{"hosts 6: heap per host: min / median / max", 7e6, "B"},
		{"round 1: ready after", 1.5, "s"},
	}
	ms := parseRows(out)
	if g := metrics(ms); !reflect.DeepEqual(g, want) {
		t.Fatalf("parseRows:\n got %+v\nwant %+v", g, want)
	}
	keys := map[string]bool{}
	for _, m := range ms {
		if keys[m.key] {
			t.Errorf("key of %q repeated", m.name)
		}
		keys[m.key] = true
	}
}

func TestParseRowsCPU(t *testing.T) {
	// The HTTP benchmark's rows: the rate, and the server CPU per entity
	// its goals bound; Azurite's CPU column is not Cairn's.
	out := `| workload | Cairn | Azurite | ratio (Cairn/Azurite) | goal | server CPU per entity: Cairn | Azurite | ratio (Azurite/Cairn) |
|---|---|---|---|---|---|---|---|
| point read, 16 concurrent | 35026 entities/s | 2447 entities/s | 7.9× | the floor's, below | 28.52 µs (2.29× floor) | 443.9 µs | 8.8× |
| floor of a point read | 60641 entities/s | - | 2.29× (Cairn/floor) | ≤ 1.3× floor — **not met** | 12.45 µs | - | - |
| memory per entity, 10000 entities | 1104 bytes (1.22× encoded) | - | - | the encoding's, below | | | |
`
	want := []got{
		{"point read, 16 concurrent", 35026, "entities/s"},
		{"point read, 16 concurrent: server CPU per entity: Cairn", 28.52e-6, "s"},
		{"floor of a point read", 60641, "entities/s"},
		{"floor of a point read: server CPU per entity: Cairn", 12.45e-6, "s"},
		{"memory per entity, 10000 entities", 1104, "B"},
	}
	if g := metrics(parseRows(out)); !reflect.DeepEqual(g, want) {
		t.Errorf("parseRows:\n got %+v\nwant %+v", g, want)
	}
}

func TestParseRowsNoTable(t *testing.T) {
	for _, out := range []string{"", "ready after 1.2 s\n", "| workload | Cairn |\n|---|---|\n", "a | b\n"} {
		if ms := parseRows(out); len(ms) != 0 {
			t.Errorf("parseRows(%q) = %+v, want none", out, ms)
		}
	}
}

func TestCompare(t *testing.T) {
	round := func(rate, p99 string, extra string) []metric {
		return parseRows("| workload | Cairn |\n|---|---|\n" +
			"| insert | " + rate + " entities/s |\n" +
			"| reply → stored, at " + rate + " writes/s | p50 1ms, p99 " + p99 + " |\n" + extra)
	}
	c := newComparison()
	c.add(false, round("100", "9ms", ""))
	c.add(true, round("120", "8ms", "| new row | 5 s |\n"))
	c.add(true, round("130", "7ms", "| new row | 6 s |\n"))
	c.add(false, round("90", "9.5ms", ""))
	c.add(false, round("110", "10ms", ""))
	c.add(true, round("125", "12ms", "| new row | 7 s |\n"))
	var b bytes.Buffer
	c.write(&b, "(v1 abc)", "(def dirty)")
	want := `| workload | base (v1 abc) median | head (def dirty) median | head/base | head is | rounds each side |
|---|---|---|---|---|---|
| insert | 100 entities/s | 125 entities/s | 1.25 | better | 3 |
| reply → stored, at … writes/s p50 | 1ms | 1ms | 1.00 | within the spread | 3 |
| reply → stored, at … writes/s p99 | 9.5ms | 8ms | 0.84 | within the spread | 3 |
| new row | - | 6s | - | - | 0 / 3 |
`
	if b.String() != want {
		t.Errorf("write:\n%s\nwant\n%s", b.String(), want)
	}
}

func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		kind       unitKind
		base, head []float64
		want       string
	}{
		{unitRate, []float64{1, 2, 3}, []float64{4, 5, 6}, "better"},
		{unitRate, []float64{4, 5, 6}, []float64{1, 2, 3}, "worse"},
		{unitDuration, []float64{4, 5, 6}, []float64{1, 2, 3}, "better"},
		{unitSize, []float64{1, 2, 3}, []float64{4, 5, 6}, "worse"},
		{unitNone, []float64{1, 2, 3}, []float64{4, 5, 6}, "higher"},
		{unitNone, []float64{4, 5, 6}, []float64{1, 2, 3}, "lower"},
		{unitRate, []float64{1, 2, 5}, []float64{4, 5, 6}, "within the spread"},
		{unitRate, []float64{1, 2}, []float64{4, 5}, "-"},
		{unitRate, nil, []float64{4, 5, 6}, "-"},
	} {
		r := &comparedRow{kind: tc.kind, base: tc.base, head: tc.head}
		if g := r.verdict(); g != tc.want {
			t.Errorf("verdict(%v, %v, %v) = %q, want %q", tc.kind, tc.base, tc.head, g, tc.want)
		}
	}
}

func TestFormatFigure(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		unit string
		kind unitKind
		want string
	}{
		{92e-6, "s", unitDuration, "92µs"},
		{0.0134567, "s", unitDuration, "13.5ms"},
		{62.5, "s", unitDuration, "1m2.5s"},
		{1534, "B", unitSize, "1534 bytes"},
		{12.5e6, "B", unitSize, "12.5 MB"},
		{33146.4, "entities/s", unitRate, "33146 entities/s"},
		{0.256, "", unitNone, "0.256"},
	} {
		if g := formatFigure(tc.v, tc.unit, tc.kind); g != tc.want {
			t.Errorf("formatFigure(%v, %q) = %q, want %q", tc.v, tc.unit, g, tc.want)
		}
	}
}

func TestCutBaseline(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	for _, tc := range []struct {
		args   []string
		lookup func(string) (string, bool)
		want   baselineRun
		ok     bool
		err    string
	}{
		{args: []string{"-only", "one"}, lookup: noEnv},
		{args: []string{"-only", "one", "-rounds", "5"}, lookup: noEnv},
		{args: []string{"-baseline", "HEAD~1", "-only", "one partition", "-n", "5000"}, lookup: noEnv, ok: true,
			want: baselineRun{ref: "HEAD~1", rounds: 3, sub: "nats", args: []string{"-only", "one partition", "-n", "5000"}}},
		{args: []string{"snapshots", "--baseline=main", "-rounds=5", "-n", "5000"}, lookup: noEnv, ok: true,
			want: baselineRun{ref: "main", rounds: 5, sub: "snapshots", named: true, args: []string{"snapshots", "-n", "5000"}}},
		{args: []string{"-baseline", "v0.1.0", "start", "-kill", "-h"}, lookup: noEnv, ok: true,
			want: baselineRun{ref: "v0.1.0", rounds: 3, sub: "start", named: true, help: true, args: []string{"start", "-kill", "-h"}}},
		{args: []string{"http", "--", "-baseline", "x"}, lookup: noEnv},
		{args: []string{"http"}, lookup: env(map[string]string{"CAIRN_BASELINE": "main", "CAIRN_ROUNDS": "7"}), ok: true,
			want: baselineRun{ref: "main", rounds: 7, sub: "http", named: true, args: []string{"http"}}},
		{args: []string{"-baseline", "main", "-rounds", "2"}, lookup: env(map[string]string{"CAIRN_ROUNDS": "7"}), ok: true,
			want: baselineRun{ref: "main", rounds: 2, sub: "nats"}},
		{args: []string{"-baseline"}, lookup: noEnv, err: "-baseline needs a value"},
		{args: []string{"-baseline="}, lookup: noEnv, err: "-baseline needs a git ref"},
		{args: []string{"-baseline", "main", "-rounds", "0"}, lookup: noEnv, err: `-rounds "0"`},
	} {
		b, ok, err := cutBaseline(tc.args, tc.lookup)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("cutBaseline(%q): error %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || ok != tc.ok || ok && !reflect.DeepEqual(b, tc.want) {
			t.Errorf("cutBaseline(%q) = %+v, %v, %v; want %+v, %v", tc.args, b, ok, err, tc.want, tc.ok)
		}
	}
}

func TestWithRounds(t *testing.T) {
	b := baselineRun{sub: "snapshots", named: true, args: []string{"snapshots", "-n", "5000", "--", "x"}}
	if g, want := b.withRounds(), []string{"snapshots", "-rounds", "1", "-n", "5000", "--", "x"}; !reflect.DeepEqual(g, want) {
		t.Errorf("withRounds = %q, want %q", g, want)
	}
	b = baselineRun{sub: "nats", args: []string{"-only", "one"}}
	if g, want := b.withRounds(), []string{"-rounds", "1", "-only", "one"}; !reflect.DeepEqual(g, want) {
		t.Errorf("withRounds = %q, want %q", g, want)
	}
}

func TestPrefixWriter(t *testing.T) {
	var b bytes.Buffer
	p := &prefixWriter{w: &b, prefix: "base: "}
	p.Write([]byte("one\ntw"))
	p.Write([]byte("o\nthree"))
	p.flush()
	if want := "base: one\nbase: two\nbase: three\n"; b.String() != want {
		t.Errorf("prefixWriter wrote %q, want %q", b.String(), want)
	}
}

func TestParseFractions(t *testing.T) {
	if got, err := parseFractions("0.1, 0.25,0.5"); err != nil || !reflect.DeepEqual(got, []float64{0.1, 0.25, 0.5}) {
		t.Errorf("parseFractions = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "1.5", "-0.5", "half", "0.5,"} {
		if _, err := parseFractions(bad); err == nil {
			t.Errorf("parseFractions(%q) accepted", bad)
		}
	}
}
