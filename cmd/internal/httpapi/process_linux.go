package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc's times: 100 on
// every Linux architecture Go runs on.
const clockTicks = 100

// writeProcessMetrics writes the process's CPU time, resident memory,
// open files and start time, read from getrusage, getrlimit and /proc/self
// (a few small reads, and one directory listing of the open files; the
// start time is read once). A figure that cannot be read is left out.
func writeProcessMetrics(w io.Writer) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
		series(w, "process_cpu_seconds_total", "User and system CPU time of the process.", "counter", formatFloat(cpu))
	}
	if statm, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := bytes.Fields(statm); len(f) > 1 {
			if pages, err := strconv.ParseUint(string(f[1]), 10, 64); err == nil {
				series(w, "process_resident_memory_bytes", "Resident memory of the process.", "gauge", strconv.FormatUint(pages*uint64(os.Getpagesize()), 10))
			}
		}
	}
	if d, err := os.Open("/proc/self/fd"); err == nil {
		names, err := d.Readdirnames(-1)
		d.Close()
		if err == nil {
			// Less the descriptor of the listing itself.
			series(w, "process_open_fds", "Open file descriptors of the process.", "gauge", strconv.Itoa(max(len(names)-1, 0)))
		}
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		series(w, "process_max_fds", "Most file descriptors the process may open.", "gauge", strconv.FormatUint(lim.Cur, 10))
	}
	if start, ok := processStartOnce(); ok {
		series(w, "process_start_time_seconds", "Start of the process, in seconds since the Unix epoch.", "gauge", formatFloat(start))
	}
}

// processStartOnce is processStart, read at the first scrape: the start
// of a process does not change.
var processStartOnce = sync.OnceValues(processStart)

// processStart reads the process's start from /proc: its start in clock
// ticks after boot (/proc/self/stat) plus the boot time (/proc/stat).
func processStart() (float64, bool) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after its closing parenthesis (field 3, state, comes first).
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(stat[i+1:])
	const startField = 22 - 3 // starttime is field 22 of proc(5)
	if len(f) <= startField {
		return 0, false
	}
	ticks, err := strconv.ParseUint(string(f[startField]), 10, 64)
	if err != nil {
		return 0, false
	}
	sys, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for _, line := range bytes.Split(sys, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			boot, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return 0, false
			}
			return float64(boot) + float64(ticks)/clockTicks, true
		}
	}
	return 0, false
}

// series writes one sample with its HELP and TYPE lines.
func series(w io.Writer, name, help, kind, value string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", name, help, name, kind, name, value)
}
