package nodetest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// A test that must know a server's address before the server starts (a
// cluster's routes, a node restarted on its port after a SIGKILL) has to
// choose a port, let it go and bind it again later. A port chosen by
// listening on port 0 comes from the kernel's ephemeral range, from which
// the kernel hands ports to every other listen on port 0 and to the source
// of every outgoing connection on the machine, in this process or in the
// test binaries running beside it: in the gap, one of them may take it and
// the server cannot bind. So ports are chosen outside the ephemeral range,
// where the kernel never hands out a port by itself, and each is claimed
// with a lock file that two test processes cannot both hold; the lock
// lasts as long as the process.
var ports struct {
	sync.Mutex
	lo, hi int        // the range to choose from, [lo, hi)
	held   []*os.File // the claims, kept open until the process ends
}

// portRange returns the ports outside the kernel's ephemeral range, or 0, 0
// where the range cannot be read.
func portRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	first, err1 := strconv.Atoi(f[0])
	last, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	// The larger of the gaps below and above the ephemeral range, keeping
	// clear of the privileged ports.
	if below, above := first-10000, 65535-last; below >= above && below > 1000 {
		return 10000, first
	} else if above > 1000 {
		return last + 1, 65536
	}
	return 0, 0
}

// FreePort returns a loopback TCP port that is free, outside the kernel's
// ephemeral range and claimed by this process: no other FreePort or
// FreeAddr, in this or another test process, returns it while this process
// runs.
func FreePort(t testing.TB) int {
	t.Helper()
	ports.Lock()
	defer ports.Unlock()
	if ports.lo == 0 && ports.hi == 0 {
		ports.lo, ports.hi = portRange()
		if ports.hi == 0 {
			ports.lo = -1
		}
	}
	if ports.lo < 0 {
		return kernelPort(t)
	}
	dir := filepath.Join(os.TempDir(), "cairn-test-ports")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		p := ports.lo + rand.IntN(ports.hi-ports.lo)
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close() // another process holds it
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			f.Close() // a server outside the tests has it
			continue
		}
		l.Close()
		ports.held = append(ports.held, f)
		return p
	}
	t.Fatalf("no free port in [%d, %d) after 1000 tries", ports.lo, ports.hi)
	return 0
}

// kernelPort is a port chosen by the kernel, where the ephemeral range is
// unknown.
func kernelPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// FreeAddr returns a loopback address whose port FreePort chose.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", FreePort(t))
}
