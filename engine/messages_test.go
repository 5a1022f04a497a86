package engine

import "testing"

// queueMessages returns n messages to queue q with empty bodies.
func queueMessages(n int) []Message {
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{Queue: "q"}
	}
	return msgs
}

// TestValidateMessageBounds: a command carries at most MaxCommandMessages
// outbox messages (InvalidInput past it) and MaxCommandMessageBytes of
// them in all (RequestBodyTooLarge past it), each message counting its
// destination, id and body; a record, which holds a group commit's
// messages, is not bound by them.
func TestValidateMessageBounds(t *testing.T) {
	with := func(msgs []Message) *Command {
		c := insert(NewEntity("p", "r"))
		c.Messages = msgs
		return c
	}
	if err := ValidateCommand(with(queueMessages(MaxCommandMessages))); err != nil {
		t.Fatalf("%d messages: %v", MaxCommandMessages, err)
	}
	if got := code(ValidateCommand(with(queueMessages(MaxCommandMessages + 1)))); got != CodeInvalidInput {
		t.Fatalf("%d messages: %q, want InvalidInput", MaxCommandMessages+1, got)
	}
	if got := code(ValidateCommand(with(queueMessages(300_000)))); got != CodeInvalidInput {
		t.Fatalf("300,000 messages: %q, want InvalidInput", got)
	}

	// Two messages of the largest body, each valid, are over the bound
	// together with their destinations.
	full := []Message{
		{Queue: "a", Body: make([]byte, MaxMessageBytes)},
		{Queue: "b", ID: "id", Body: make([]byte, MaxCommandMessageBytes-MaxMessageBytes-1-1-2)},
	}
	if n := MessageSize(&full[0]) + MessageSize(&full[1]); n != MaxCommandMessageBytes {
		t.Fatalf("the messages are %d bytes, want exactly the bound", n)
	}
	c := with(full)
	if err := ValidateCommand(c); err != nil {
		t.Fatalf("messages of exactly %d bytes: %v", MaxCommandMessageBytes, err)
	}
	if c.Size() < MaxCommandMessageBytes {
		t.Fatalf("the command's size %d leaves out its messages", c.Size())
	}
	full[1].ID += "x"
	if got := code(ValidateCommand(with(full))); got != CodeRequestBodyTooLarge {
		t.Fatalf("messages one byte over the bound: %q, want RequestBodyTooLarge", got)
	}

	rec := &Record{PartitionKey: "p", Messages: queueMessages(3 * MaxCommandMessages)}
	if err := ValidateRecord(rec); err != nil {
		t.Fatalf("a record of a group commit's %d messages: %v", len(rec.Messages), err)
	}
}
