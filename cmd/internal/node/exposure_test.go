package node

import (
	"strings"
	"testing"
)

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

func TestExposures(t *testing.T) {
	for _, c := range []struct {
		http, nats string
		tls, dev   bool
		want       []string // listener and a word of the message
	}{
		{"127.0.0.1:10002", "127.0.0.1:4222", false, true, nil},
		{"", "", false, true, nil},
		{"0.0.0.0:10002", "127.0.0.1:4222", false, true, []string{"http clear"}},
		{"0.0.0.0:10002", "127.0.0.1:4222", true, true, nil},
		{"127.0.0.1:10002", ":4222", false, true, []string{"nats clear"}},
		{"127.0.0.1:10002", ":4222", false, false, []string{"nats clear"}},
		{"[::]:10002", "0.0.0.0:4222", true, true, []string{"nats credentials"}},
		{"[::]:10002", "0.0.0.0:4222", true, false, nil},
		{"10.1.2.3:10002", "10.1.2.3:4222", false, true, []string{"http clear", "nats clear"}},
	} {
		ws := exposures(c.http, c.nats, c.tls, c.dev)
		if len(ws) != len(c.want) {
			t.Errorf("%+v: %d warnings %+v, want %v", c, len(ws), ws, c.want)
			continue
		}
		for i, w := range ws {
			listener, word, _ := strings.Cut(c.want[i], " ")
			if w.listener != listener || !strings.Contains(w.msg, word) {
				t.Errorf("%+v: warning %+v, want %s", c, w, c.want[i])
			}
		}
	}
}
