//go:build !unix

package node

// lockDataDir is a no-op where flock is not available: do not point two
// hosts at one data directory there.
func lockDataDir(string) (func(), error) { return func() {}, nil }
