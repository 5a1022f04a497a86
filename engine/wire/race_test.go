//go:build race

package wire

// raceEnabled: the race detector's build, where sync.Pool drops some of
// what is put back, so allocation counts are not the code's own.
const raceEnabled = true
