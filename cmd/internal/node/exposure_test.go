package node

import "testing"

func TestOnLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:10002": true,
		"127.0.0.2:1":     true,
		"[::1]:4222":      true,
		"localhost:4222":  true,
		"0.0.0.0:10002":   false,
		":10002":          false,
		"[::]:4222":       false,
		"10.0.0.5:4222":   false,
		"cairn.lan:4222":  false,
		"nonsense":        false,
	} {
		if got := onLoopback(addr); got != want {
			t.Errorf("onLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
