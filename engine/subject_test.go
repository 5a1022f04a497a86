package engine

import (
	"strings"
	"testing"
)

func TestValidateSubject(t *testing.T) {
	long := strings.Repeat("a.", 127) + "a" // 255 bytes
	for s, ok := range map[string]bool{
		"orders":                  true,
		"orders.created":          true,
		"billing.eu-1.created":    true,
		"a.b_c.d$e.f-g":           true, // $ and _ inside a subject are ordinary
		"ordres.créé":             true,
		long:                      true,
		long + "a":                false,
		"":                        false,
		".orders":                 false,
		"orders.":                 false,
		"orders..created":         false,
		".":                       false,
		"orders.*":                false,
		"orders.>":                false,
		"*":                       false,
		">":                       false,
		"orders.a*b":              false,
		"orders.a>":               false,
		"orders created":          false,
		"orders\tcreated":         false,
		"orders.\ncreated":        false,
		"orders.\x00":             false,
		"orders.\x7f":             false,
		"orders.\u00a0":           false,
		"orders.\xff":             false,
		"$JS.API.STREAM.INFO.X":   false,
		"$JS.API.x":               false,
		"$KV.fns.x":               false,
		"$O.mods.x":               false,
		"$SYS.REQ.SERVER.PING":    false,
		"$G":                      false,
		"_INBOX.x":                false,
		"_INBOX_billing.x":        false,
		"_CAIRN_INBOX.abc":        false,
		"_R_.x":                   false,
		"orders.created.v1.final": true,
	} {
		err := ValidateSubject(s)
		if (err == nil) != ok {
			t.Errorf("ValidateSubject(%q) = %v, want ok=%v", s, err, ok)
		}
		if err != nil && code(err) != CodeInvalidInput {
			t.Errorf("ValidateSubject(%q): code %q", s, code(err))
		}
	}
}

func TestValidateSubjectPattern(t *testing.T) {
	for p, ok := range map[string]bool{
		"orders.>":          true,
		"billing.*.created": true,
		"*":                 true,
		">":                 true,
		"*.*.>":             true,
		"orders.created":    true,
		"orders.>.x":        false,
		"orders.a*":         false,
		"orders.>>":         false,
		"orders..>":         false,
		"":                  false,
		"orders.* x":        false,
	} {
		if err := ValidateSubjectPattern(p); (err == nil) != ok {
			t.Errorf("ValidateSubjectPattern(%q) = %v, want ok=%v", p, err, ok)
		}
	}
}

func TestSubjectMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, subject string
		want             bool
	}{
		{"orders.created", "orders.created", true},
		{"orders.created", "orders.deleted", false},
		{"orders.created", "orders", false},
		{"orders", "orders.created", false},
		{"orders.>", "orders.created", true},
		{"orders.>", "orders.created.eu", true},
		{"orders.>", "orders", false},
		{"orders.>", "ordersx.created", false},
		{"orders.*", "orders.created", true},
		{"orders.*", "orders.created.eu", false},
		{"orders.*", "orders", false},
		{"billing.*.created", "billing.eu.created", true},
		{"billing.*.created", "billing.eu.deleted", false},
		{"billing.*.created", "billing.created", false},
		{"billing.*.created", "billing.eu.created.x", false},
		{"*", "orders", true},
		{"*", "orders.created", false},
		{">", "orders", true},
		{">", "a.b.c", true},
		{"*.>", "orders", false},
		{"*.>", "orders.x", true},
		{"a.*.>", "a.b.c.d", true},
		{"a.*.>", "a.b", false},
		{"Orders.>", "orders.x", false}, // subjects are case-sensitive
	} {
		if got := SubjectMatch(c.pattern, c.subject); got != c.want {
			t.Errorf("SubjectMatch(%q, %q) = %v, want %v", c.pattern, c.subject, got, c.want)
		}
	}
}

// TestMessageDestination: a message has exactly one destination, a queue
// or a subject, in a command and in a record alike; subjects reserved to
// the server or to inboxes are refused whatever else is allowed.
func TestMessageDestination(t *testing.T) {
	cases := []struct {
		name string
		m    Message
		ok   bool
	}{
		{"queue", Message{Queue: "archive"}, true},
		{"subject", Message{Subject: "orders.created", Body: []byte("{}")}, true},
		{"both", Message{Queue: "archive", Subject: "orders.created"}, false},
		{"neither", Message{ID: "m1", Body: []byte("x")}, false},
		{"bad queue", Message{Queue: "a.b"}, false},
		{"wildcard subject", Message{Subject: "orders.*"}, false},
		{"tail wildcard subject", Message{Subject: "orders.>"}, false},
		{"JetStream API", Message{Subject: "$JS.API.x"}, false},
		{"system account", Message{Subject: "$SYS.REQ.SERVER.PING"}, false},
		{"inbox", Message{Subject: "_INBOX.x"}, false},
		{"empty token", Message{Subject: "orders..created"}, false},
		{"whitespace", Message{Subject: "orders created"}, false},
		{"too long", Message{Subject: strings.Repeat("a", MaxSubjectLen+1)}, false},
		{"body too large", Message{Subject: "orders.created", Body: make([]byte, MaxMessageBytes+1)}, false},
	}
	for _, c := range cases {
		cmd := insert(NewEntity("p", "r"))
		cmd.Messages = []Message{{Queue: "first"}, c.m}
		err := ValidateCommand(cmd)
		if (err == nil) != c.ok || err != nil && code(err) != CodeInvalidInput {
			t.Errorf("command, %s: %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && !strings.Contains(AsError(err).Message, "message 1") {
			t.Errorf("command, %s: the error does not name message 1: %v", c.name, err)
		}
		rec := &Record{PartitionKey: "p", Messages: []Message{{Queue: "first"}, c.m}}
		err = ValidateRecord(rec)
		if (err == nil) != c.ok || err != nil && code(err) != CodeInvalidInput {
			t.Errorf("record, %s: %v, want ok=%v", c.name, err, c.ok)
		}
	}
	// A subject counts towards the command's size like a queue name.
	a, b := insert(NewEntity("p", "r")), insert(NewEntity("p", "r"))
	a.Messages = []Message{{Queue: "orders"}}
	b.Messages = []Message{{Subject: "orders.created"}}
	if ValidateCommand(a) != nil || ValidateCommand(b) != nil || b.Size()-a.Size() != len("orders.created")-len("orders") {
		t.Errorf("sizes %d and %d", a.Size(), b.Size())
	}
}
