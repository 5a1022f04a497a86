package outbox_test

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/outbox"
)

// TestMessageID: with the nodes' key an id is the same on every node and
// every relay of the same message (so destinations de-duplicate it), the
// same for one command id in two records of a table, different for other
// positions, tables or keys, and nothing a client can compute from the
// position or the command's id.
func TestMessageID(t *testing.T) {
	key, other := []byte("node password"), []byte("another system")
	m, withID := engine.Message{Queue: "q"}, engine.Message{Queue: "q", ID: "order-7"}
	id := outbox.MessageID(key, "Orders", 1, 5, 0, m)
	if id != outbox.MessageID(key, "Orders", 1, 5, 0, m) || !strings.HasPrefix(id, "cairn:") {
		t.Fatalf("not deterministic: %s", id)
	}
	for _, diff := range []string{
		outbox.MessageID(key, "Orders", 1, 5, 1, m),
		outbox.MessageID(key, "Orders", 1, 6, 0, m),
		outbox.MessageID(key, "Orders", 2, 5, 0, m),
		outbox.MessageID(key, "contoso.Orders", 1, 5, 0, m),
		outbox.MessageID(other, "Orders", 1, 5, 0, m),
		outbox.MessageID(nil, "Orders", 1, 5, 0, m),
	} {
		if diff == id {
			t.Fatalf("%s for another message", id)
		}
	}
	if strings.Contains(id, "orders") || strings.Contains(id, "/5/") {
		t.Fatalf("the keyed id shows the position: %s", id)
	}
	a, b := outbox.MessageID(key, "Orders", 1, 5, 0, withID), outbox.MessageID(key, "orders", 1, 9, 2, withID)
	if a != b || a == outbox.MessageID(key, "Other", 1, 5, 0, withID) || strings.Contains(a, "order-7") {
		t.Fatalf("command ids: %s %s", a, b)
	}
	if got := outbox.MessageID(nil, "Orders", 1, 5, 0, m); got != "cairn:orders/1/5/0" {
		t.Fatalf("without a key: %s", got)
	}
	if got := outbox.MessageID(nil, "Orders", 1, 5, 0, withID); got != "order-7" {
		t.Fatalf("without a key, a command id: %s", got)
	}
}
