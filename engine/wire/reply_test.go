package wire

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestReplyAllowed(t *testing.T) {
	for reply, want := range map[string]bool{
		"_INBOX.abc":                          true,
		"_INBOX.abc.def":                      true,
		"_INBOX_billing.abc.1":                true,
		"_R_.Ab12Cd.xyZ":                      true,
		"_CAIRN_INBOX.abc.2":                  true,
		"":                                    false, // checked by the guard: no reply, no answer
		"_INBOX":                              false,
		"_INBOX.":                             false,
		"_INBOX..x":                           false,
		"_INBOX.x.":                           false,
		"_INBOX.*":                            false,
		"_INBOX.a.>":                          false,
		"_INBOX_.x":                           false,
		"_inbox.x":                            false,
		"_R_":                                 false,
		"$JS.API.STREAM.DELETE.CAIRN_CATALOG": false,
		"$KV.CAIRN_FUNCTIONS.x":               false,
		"$O.CAIRN_MODULES.M.eA":               false,
		"cairn.j.keep.1.kcA":                  false,
		"cairn.catalog.keep":                  false,
		"cairn.queue.victim":                  false,
		"_INBOXES.x":                          false,
		"_CAIRN_INBOXX.x":                     false,
		"x._INBOX.y":                          false,
		"_INBOX.a b":                          false,
	} {
		if got := ReplyAllowed(reply); got != want {
			t.Errorf("ReplyAllowed(%q) = %v, want %v", reply, got, want)
		}
	}
}

func TestReplyGuard(t *testing.T) {
	var log bytes.Buffer
	g := &ReplyGuard{Log: slog.New(slog.NewTextHandler(&log, nil))}
	if !g.Allow("cairn.cmd.T", "") || !g.Allow("cairn.cmd.T", "_INBOX.x") {
		t.Fatal("a request without a reply, or with an inbox, is dropped")
	}
	for range 100 {
		if g.Allow("cairn.cmd.T", "$JS.API.STREAM.DELETE.X") {
			t.Fatal("a request whose reply is the JetStream API is allowed")
		}
	}
	if g.Dropped() != 100 {
		t.Fatalf("dropped %d, want 100", g.Dropped())
	}
	// One line a second at the most: the hundred drops of one burst write one.
	if n := strings.Count(log.String(), "NATS request dropped"); n != 1 {
		t.Fatalf("%d log lines for a burst of drops:\n%s", n, log.String())
	}
	var m bytes.Buffer
	g.WriteMetrics(&m)
	if !strings.Contains(m.String(), `cairn_nats_requests_dropped_total{reason="reply_subject"} 100`) {
		t.Fatalf("metrics:\n%s", m.String())
	}
}

func FuzzReplyAllowed(f *testing.F) {
	for _, s := range []string{"_INBOX.a", "_R_.x.y", "$JS.API.X", "_INBOX_u.a", "_CAIRN_INBOX.z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reply string) {
		if !ReplyAllowed(reply) {
			return
		}
		// An allowed reply is an inbox: never under $, never a wildcard.
		if strings.HasPrefix(reply, "$") || strings.ContainsAny(reply, "*> \t\r\n") || !strings.HasPrefix(reply, "_") || strings.Contains(reply, "..") {
			t.Fatalf("ReplyAllowed(%q)", reply)
		}
	})
}
