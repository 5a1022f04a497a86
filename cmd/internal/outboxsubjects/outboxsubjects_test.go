package outboxsubjects

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/engine"
)

func TestNew(t *testing.T) {
	if _, err := New("cairn", []string{"orders.>", "billing.*.created", "audit"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "orders..x", "orders.>.x", "orders.a*", "$JS.API.>", "_INBOX.>", "cairn.>", "cairn.queue.x", "a b"} {
		if _, err := New("cairn", []string{"orders.>", bad}); err == nil || !strings.Contains(err.Error(), Flag) {
			t.Errorf("pattern %q: %v", bad, err)
		}
	}
	// Another prefix frees "cairn" and claims its own.
	if _, err := New("acme", []string{"cairn.>"}); err != nil {
		t.Errorf("cairn.> under prefix acme: %v", err)
	}
	if _, err := New("acme", []string{"acme.x"}); err == nil {
		t.Error("acme.x under prefix acme accepted")
	}
}

func TestCheck(t *testing.T) {
	a, err := New("cairn", []string{"orders.>", "billing.*.created"})
	if err != nil {
		t.Fatal(err)
	}
	none, _ := New("cairn", nil)
	msgs := func(subjects ...string) []engine.Message {
		out := []engine.Message{{Queue: "archive"}}
		for _, s := range subjects {
			out = append(out, engine.Message{Subject: s})
		}
		return out
	}
	for _, c := range []struct {
		name    string
		a       *Allowlist
		msgs    []engine.Message
		ok      bool
		message string
	}{
		{"queues only, no list", nil, msgs(), true, ""},
		{"queues only, empty list", none, msgs(), true, ""},
		{"no messages", a, nil, true, ""},
		{"allowed by >", a, msgs("orders.created", "orders.eu.created"), true, ""},
		{"allowed by *", a, msgs("billing.eu.created"), true, ""},
		{"outside", a, msgs("orders.created", "shipping.created"), false, "message 2: subject \"shipping.created\" is not allowed on this node: -outbox-subjects allows orders.>,billing.*.created"},
		{"* is one token", a, msgs("billing.eu.x.created"), false, "-outbox-subjects"},
		{"> needs a token", a, msgs("orders"), false, "-outbox-subjects"},
		{"no list", nil, msgs("orders.created"), false, "Cairn queues only (its operator allows NATS subjects with -outbox-subjects)"},
		{"empty list", none, msgs("orders.created"), false, "-outbox-subjects"},
		{"JetStream API", a, msgs("$JS.API.x"), false, "reserved"},
		{"inbox", a, msgs("_INBOX.x"), false, "reserved"},
		{"wildcard", a, msgs("orders.*"), false, "wildcard"},
		{"node's prefix", mustNew(t, "cairn", ">"), msgs("cairn.j.T.1.kx"), false, "node's own prefix"},
	} {
		err := c.a.Check(engine.DevAccount, c.msgs)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok=%v", c.name, err, c.ok)
			continue
		}
		if err != nil && (engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), c.message)) {
			t.Errorf("%s: %v, want InvalidInput with %q", c.name, err, c.message)
		}
	}
	// ">" allows every subject except the reserved ones and the node's own.
	all := mustNew(t, "cairn", ">")
	if err := all.Check("", msgs("anything.at.all", "x")); err != nil {
		t.Errorf("> refused: %v", err)
	}
	// Another account may send to subjects, not to the operator's queues.
	if err := a.Check("contoso", []engine.Message{{Subject: "orders.created"}}); err != nil {
		t.Errorf("contoso to a subject: %v", err)
	}
	if err := a.Check("contoso", msgs()); engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), "development account's writes only") {
		t.Errorf("contoso to a queue: %v", err)
	}
}

func mustNew(t *testing.T, prefix string, patterns ...string) *Allowlist {
	t.Helper()
	a, err := New(prefix, patterns)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
