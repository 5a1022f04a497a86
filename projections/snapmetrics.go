package projections

import (
	"fmt"
	"io"
	"os"
	"sort"
	"sync/atomic"
	"time"
)

// snapStats are a node's snapshot figures summed over its tables, by
// kind (0 delta, 1 base), for /metrics.
type snapStats struct {
	writes   [2]atomic.Uint64
	failures [2]atomic.Uint64
	bytes    [2]atomic.Uint64
	nanos    [2]atomic.Uint64 // time spent writing
	shared   [2]atomic.Uint64 // objects put in the store
	sharedB  [2]atomic.Uint64 // their bytes
	removed  atomic.Uint64    // objects the store's retention removed
}

func kindIndex(base bool) int {
	if base {
		return 1
	}
	return 0
}

// noteWrite counts a write of size bytes that took el.
func (st *snapStats) noteWrite(base bool, size int64, el time.Duration, err error) {
	k := kindIndex(base)
	if err != nil {
		st.failures[k].Add(1)
		return
	}
	st.writes[k].Add(1)
	st.bytes[k].Add(uint64(size))
	st.nanos[k].Add(uint64(el))
}

// noteShared counts an object put in the store.
func (st *snapStats) noteShared(base bool, size int64) {
	st.shared[kindIndex(base)].Add(1)
	st.sharedB[kindIndex(base)].Add(uint64(size))
}

// failpoint kills the process if Config.Failpoint names this point: the
// crash tests stop a node in the middle of a snapshot's write with it.
func (v *Views) failpoint(name string) {
	if v.cfg.Failpoint != name {
		return
	}
	v.log.Warn("failpoint reached: killing the process", "failpoint", name)
	p, _ := os.FindProcess(os.Getpid())
	_ = p.Kill()
	select {} // SIGKILL is not handled; wait for it
}

// WriteSnapshotMetrics writes the views' snapshot metrics in the
// Prometheus text format: per table (as the tables' other series) the
// position, age and chain of its last snapshot, the tail since, and what
// its last start replayed after its snapshot; for the node, per kind, the
// writes, bytes, time and failures, and what it shared.
func (v *Views) WriteSnapshotMetrics(w io.Writer) {
	if v.cfg.SnapshotDir == "" {
		return
	}
	type row struct {
		name string
		si   *snapInfo
	}
	var rows []row
	for _, info := range v.Tables() {
		if t, ok := v.Table(info.Name); ok {
			rows = append(rows, row{t.Name(), &t.snapInfo})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	now := time.Now()
	gauge := func(name, help string, val func(si *snapInfo) (float64, bool)) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
		for _, r := range rows {
			if x, ok := val(r.si); ok {
				fmt.Fprintf(w, "%s{table=%q} %g\n", name, r.name, x)
			}
		}
	}
	gauge("cairn_snapshot_position", "Journal position of the table's last snapshot written or loaded (0: none).", func(si *snapInfo) (float64, bool) {
		return float64(si.seq.Load()), true
	})
	gauge("cairn_snapshot_age_seconds", "Seconds since the table's last snapshot was taken.", func(si *snapInfo) (float64, bool) {
		at := si.at.Load()
		return now.Sub(time.Unix(0, at)).Seconds(), at != 0
	})
	gauge("cairn_snapshot_tail_records", "Records the table's view applied since its last snapshot was taken: what a crash now would replay.", func(si *snapInfo) (float64, bool) {
		return float64(si.tail.Load()), true
	})
	gauge("cairn_snapshot_chain_base_position", "Journal position of the base of the table's snapshot chain.", func(si *snapInfo) (float64, bool) {
		return float64(si.baseSeq.Load()), true
	})
	gauge("cairn_snapshot_chain_deltas", "Deltas after the base in the table's snapshot chain.", func(si *snapInfo) (float64, bool) {
		return float64(si.deltas.Load()), true
	})
	gauge("cairn_snapshot_replayed_records", "Records the table's view replayed after its snapshot at the node's start.", func(si *snapInfo) (float64, bool) {
		return float64(si.replayed.Load()), true
	})
	gauge("cairn_snapshot_share_queue", "Deltas of the table written and not yet put in the shared store, the one being put included.", func(si *snapInfo) (float64, bool) {
		return float64(si.shareQueue.Load()), true
	})
	gauge("cairn_snapshot_base_writing_seconds", "Seconds the base being written has taken so far (absent: none being written).", func(si *snapInfo) (float64, bool) {
		at := si.writing.Load()
		return now.Sub(time.Unix(0, at)).Seconds(), at != 0
	})
	st := &v.stats
	counter := func(name, help string, val func(k int) float64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n", name, help, name)
		for k, kind := range []string{"delta", "base"} {
			fmt.Fprintf(w, "%s{kind=%q} %g\n", name, kind, val(k))
		}
	}
	counter("cairn_snapshot_writes_total", "Snapshot files written.", func(k int) float64 { return float64(st.writes[k].Load()) })
	counter("cairn_snapshot_write_failures_total", "Snapshot files that could not be written.", func(k int) float64 { return float64(st.failures[k].Load()) })
	counter("cairn_snapshot_written_bytes_total", "Bytes of the snapshot files written.", func(k int) float64 { return float64(st.bytes[k].Load()) })
	counter("cairn_snapshot_write_seconds_total", "Time spent writing snapshot files.", func(k int) float64 { return time.Duration(st.nanos[k].Load()).Seconds() })
	counter("cairn_snapshot_shared_total", "Snapshots put in the shared store.", func(k int) float64 { return float64(st.shared[k].Load()) })
	counter("cairn_snapshot_shared_bytes_total", "Bytes of the snapshots put in the shared store.", func(k int) float64 { return float64(st.sharedB[k].Load()) })
	fmt.Fprintf(w, "# HELP cairn_snapshot_shared_removed_total Shared snapshots removed by the store's retention.\n# TYPE cairn_snapshot_shared_removed_total counter\ncairn_snapshot_shared_removed_total %d\n", st.removed.Load())
}
