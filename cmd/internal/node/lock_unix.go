//go:build unix

package node

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDataDir takes an exclusive lock on the data directory, so that two
// hosts never run embedded servers on one JetStream store (which would
// corrupt it). The lock goes with the process, also when it is killed.
func lockDataDir(dir string) (release func(), err error) {
	path := filepath.Join(dir, "cairn.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("host: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("host: data directory %s is in use by another host (%s is locked)", dir, path)
	}
	return func() { f.Close() }, nil
}
