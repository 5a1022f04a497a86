package projections

import (
	"testing"
	"time"

	"github.com/cairn-dev/cairn/journal"
)

func TestParseRetention(t *testing.T) {
	for in, want := range map[string]Retention{
		"":        {},
		"all":     {},
		"7d":      {Age: 7 * 24 * time.Hour},
		"1d12h":   {Age: 36 * time.Hour},
		"36h":     {Age: 36 * time.Hour},
		"90m":     {Age: 90 * time.Minute},
		"1000000": {Records: 1000000},
		"1000":    {Records: 1000},
	} {
		got, err := ParseRetention(in)
		if err != nil || got != want {
			t.Errorf("ParseRetention(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if back, err := ParseRetention(got.String()); err != nil || back != got {
			t.Errorf("%q: String %q reads back as %+v, %v", in, got.String(), back, err)
		}
	}
	for _, in := range []string{"999", "5m", "0", "-1", "7x", "d", "7d-1h", "1.5d", "ten", "1e6", " 7 d"} {
		if r, err := ParseRetention(in); err == nil {
			t.Errorf("ParseRetention(%q) = %+v, want an error", in, r)
		}
	}
}

func TestPlanPrune(t *testing.T) {
	hist := journal.History{First: 1, Last: 10000, Horizon: 1}
	base := pruneInputs{history: hist, retention: Retention{Records: 2000}, relayed: 10000, relayedKnown: true, bases: []uint64{3000, 6000, 9000}}
	for _, c := range []struct {
		name   string
		change func(*pruneInputs)
		before uint64
	}{
		{"records: the newest base at or below last-records", func(*pruneInputs) {}, 6001},
		{"keep everything", func(in *pruneInputs) { in.retention = Retention{} }, 0},
		{"within the retention", func(in *pruneInputs) { in.retention = Retention{Records: 20000} }, 0},
		{"no base low enough", func(in *pruneInputs) { in.bases = []uint64{9500} }, 0},
		{"no base", func(in *pruneInputs) { in.bases = nil }, 0},
		{"the outbox holds it back", func(in *pruneInputs) { in.relayed = 4000 }, 3001},
		{"the outbox's position unknown", func(in *pruneInputs) { in.relayedKnown = false }, 0},
		{"the grace holds it back", func(in *pruneInputs) { in.sinceGrace = 5000 }, 3001},
		{"the grace: every record older", func(in *pruneInputs) { in.sinceGrace = 0 }, 6001},
		{"age: records since the cut kept", func(in *pruneInputs) { in.retention = Retention{Age: time.Hour}; in.sinceAge = 9500 }, 9001},
		{"age: every record older", func(in *pruneInputs) { in.retention = Retention{Age: time.Hour}; in.sinceAge = 0 }, 9001},
		{"already pruned there", func(in *pruneInputs) { in.history.First, in.history.Horizon = 6001, 6001 }, 0},
		{"pruned below, and further now", func(in *pruneInputs) { in.history.First, in.history.Horizon = 3001, 3001 }, 6001},
		{"a base right at the cut", func(in *pruneInputs) { in.bases = []uint64{7999} }, 8000},
		// A crash between the horizon's record and the purge.
		{"a purge left undone, finished", func(in *pruneInputs) { in.history.Horizon = 3001; in.bases = []uint64{9000} }, 3001},
		{"a purge left undone, and further now", func(in *pruneInputs) { in.history.Horizon = 3001 }, 6001},
		{"a purge left undone, beyond the cut now", func(in *pruneInputs) { in.history.Horizon = 7001; in.bases = []uint64{7000, 9000} }, 7001},
		{"a purge left undone, its base gone", func(in *pruneInputs) { in.history.Horizon = 7001; in.bases = []uint64{3000} }, 3001},
		{"a purge left undone, no base", func(in *pruneInputs) { in.history.Horizon = 3001; in.bases = nil }, 0},
		{"no record", func(in *pruneInputs) { in.history = journal.History{First: 1, Horizon: 1} }, 0},
	} {
		in := base
		in.bases = append([]uint64(nil), base.bases...)
		c.change(&in)
		if got, _, why := planPrune(in); got != c.before {
			t.Errorf("%s: prune below %d (%s), want %d", c.name, got, why, c.before)
		}
	}
}
