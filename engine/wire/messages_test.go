package wire

import (
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/engine"
)

// TestMessagesJSON: a request's "messages" (and the HTTP API's header,
// which has the same shape) name a queue or a subject, with a text or a
// base64 body; anything else is refused with InvalidInput.
func TestMessagesJSON(t *testing.T) {
	in := `[{"queue":"archive","id":"m1","body":"text"},
		{"subject":"orders.created","bodyBase64":"AP8="},
		{"subject":"billing.eu.created","body":""}]`
	want := []engine.Message{
		{Queue: "archive", ID: "m1", Body: []byte("text")},
		{Subject: "orders.created", Body: []byte{0, 0xff}},
		{Subject: "billing.eu.created"},
	}
	got, err := DecodeMessagesJSON([]byte(in))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v", got, err)
	}
	req, err := DecodeRequestJSON([]byte(`{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r"},"messages":` + in + `}`))
	if err != nil || !reflect.DeepEqual(req.Messages, want) {
		t.Fatalf("request: got %+v, %v", req, err)
	}
	if got, err := DecodeMessagesJSON([]byte(" [] ")); err != nil || len(got) != 0 {
		t.Fatalf("empty array: %+v, %v", got, err)
	}
	for name, bad := range map[string]string{
		"an object":            `{"queue":"archive"}`,
		"null":                 `null`,
		"empty":                ``,
		"a string":             `"archive"`,
		"unknown field":        `[{"queue":"archive","topic":"x"}]`,
		"body both ways":       `[{"subject":"a.b","body":"x","bodyBase64":"eA=="}]`,
		"bad base64":           `[{"subject":"a.b","bodyBase64":"%%"}]`,
		"subject not text":     `[{"subject":7}]`,
		"truncated":            `[{"subject":"a.b"}`,
		"two arrays":           `[] []`,
		"bad UTF-8":            "[{\"subject\":\"a.\xff\"}]",
		"lone surrogate":       `[{"subject":"a.\ud800"}]`,
		"an element not a map": `[["archive","m","x"]]`,
	} {
		_, err := DecodeMessagesJSON([]byte(bad))
		if engine.ErrorCode(err) != engine.CodeInvalidInput {
			t.Errorf("%s: %v, want InvalidInput", name, err)
		}
	}
	_, err = DecodeRequestJSON([]byte(`{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r"},"messages":[{"queue":"q","body":"x","bodyBase64":"eA=="}]}`))
	if engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), "bodyBase64") {
		t.Fatalf("request with a body both ways: %v", err)
	}
}

// TestMessagesMsgpack: a subject's message is ["", id, body, subject]; an
// entry of another length is refused.
func TestMessagesMsgpack(t *testing.T) {
	req := &engine.Request{Op: "Insert", Entity: engine.NewEntity("p", "r"), Messages: []engine.Message{{Subject: "orders.created", ID: "m", Body: []byte("x")}}}
	data, err := EncodeRequestMsgpack(req)
	if err != nil {
		t.Fatal(err)
	}
	// The last entry's shape: fixarray of 4, "", "m", bin "x", "orders.created".
	if !strings.Contains(string(data), "\x94\xa0\xa1m\xc4\x01x\xaeorders.created") {
		t.Fatalf("encoded as %x", data)
	}
	for _, bad := range []string{"\x92\xa0\xa1m", "\x95\xa0\xa1m\xc4\x01x\xa1s\xa1t"} {
		b := []byte(strings.Replace(string(data), "\x94\xa0\xa1m\xc4\x01x\xaeorders.created", bad, 1))
		if _, err := DecodeRequestMsgpack(b); engine.ErrorCode(err) != engine.CodeInvalidInput {
			t.Errorf("entry %x: %v", bad, err)
		}
	}
}

// allocated returns the fewest bytes f allocated in three runs: the
// least disturbed by anything else the test binary allocates meanwhile.
func allocated(f func()) uint64 {
	least := ^uint64(0)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

// jsonQueueMessages returns a JSON array of n messages to queue q.
func jsonQueueMessages(n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(`{"queue":"q"},`, n), ",") + "]"
}

// TestMessagesBoundJSON: a JSON request (or the HTTP API's header) of
// more than engine.MaxCommandMessages messages is refused with
// InvalidInput before the decoder holds them: 300,000 messages in 4.2 MB
// are refused having allocated about what the bound's worth of them
// costs, not 300,000 of them (which is tens of MB).
func TestMessagesBoundJSON(t *testing.T) {
	request := func(msgs string) []byte {
		return []byte(`{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r"},"messages":` + msgs + `}`)
	}
	at := jsonQueueMessages(engine.MaxCommandMessages)
	if r, err := DecodeRequestJSON(request(at)); err != nil || len(r.Messages) != engine.MaxCommandMessages {
		t.Fatalf("%d messages: %v", engine.MaxCommandMessages, err)
	}
	if msgs, err := DecodeMessagesJSON([]byte(at)); err != nil || len(msgs) != engine.MaxCommandMessages {
		t.Fatalf("a header of %d messages: %v", engine.MaxCommandMessages, err)
	}
	over := jsonQueueMessages(engine.MaxCommandMessages + 1)
	if _, err := DecodeRequestJSON(request(over)); engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Fatalf("%d messages: %v, want InvalidInput", engine.MaxCommandMessages+1, err)
	}
	if _, err := DecodeMessagesJSON([]byte(over)); engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Fatalf("a header of %d messages: %v, want InvalidInput", engine.MaxCommandMessages+1, err)
	}

	spray := request(jsonQueueMessages(300_000))
	var err error
	n := allocated(func() { _, err = DecodeRequestJSON(spray) })
	if engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("300,000 messages: %v, want InvalidInput naming the bound", err)
	}
	t.Logf("refused: %v", err)
	// What decoding costs for the bytes alone (the decoder's buffer, a
	// string of them): a request as long, whose id takes the bytes.
	long := []byte(`{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r"},"id":"` + strings.Repeat("x", len(spray)) + `"}`)
	base := allocated(func() { _, err = DecodeRequestJSON(long) })
	if err != nil {
		t.Fatal(err)
	}
	const room = 4 << 20 // the bound's messages, with room
	if n > base+room {
		t.Fatalf("refusing 300,000 messages allocated %d bytes; a request as long %d", n, base)
	}
	t.Logf("%d bytes allocated to refuse %d bytes of 300,000 messages (a request as long: %d)", n, len(spray), base)
}

// TestMessagesBoundMsgpack: a msgpack array of more than
// engine.MaxCommandMessages messages is refused from its length, before
// anything is allocated for it (an array header may claim 65,536 entries
// in five bytes).
func TestMessagesBoundMsgpack(t *testing.T) {
	msgs := make([]engine.Message, engine.MaxCommandMessages+1)
	for i := range msgs {
		msgs[i] = engine.Message{Queue: "q"}
	}
	req := &engine.Request{Op: "Insert", Entity: engine.NewEntity("p", "r"), Messages: msgs[:engine.MaxCommandMessages]}
	data, err := EncodeRequestMsgpack(req)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := DecodeRequestMsgpack(data); err != nil || len(r.Messages) != engine.MaxCommandMessages {
		t.Fatalf("%d messages: %v", engine.MaxCommandMessages, err)
	}
	req.Messages = msgs
	if data, err = EncodeRequestMsgpack(req); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeRequestMsgpack(data); engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Fatalf("%d messages: %v, want InvalidInput", len(msgs), err)
	}

	// {"op": "Insert", "messages": <array32 of 65,536>} and nothing more.
	claim := []byte("\x82\xa2op\xa6Insert\xa8messages\xdd\x00\x01\x00\x00")
	n := allocated(func() { _, err = DecodeRequestMsgpack(claim) })
	if engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Fatalf("an array header of 65,536 messages: %v, want InvalidInput", err)
	}
	const most = 64 << 10
	if n > most {
		t.Fatalf("refusing an array header of 65,536 messages allocated %d bytes, want at most %d", n, most)
	}
}

// TestMessagesOnBatchOperations: messages go on a Batch, not on its
// operations, where they used to be dropped; an operation's are refused in
// both encodings and in a request built in Go.
func TestMessagesOnBatchOperations(t *testing.T) {
	_, err := DecodeRequestJSON([]byte(`{"op":"Batch","ops":[{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r"},"messages":[{"queue":"q"}]}]}`))
	if engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), "on the Batch") {
		t.Fatalf("JSON: %v, want InvalidInput", err)
	}
	req := &engine.Request{Op: "Batch", Ops: []engine.Request{
		{Op: "Insert", Entity: engine.NewEntity("p", "r"), Messages: []engine.Message{{Queue: "q"}}},
	}}
	data, err := EncodeRequestMsgpack(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeRequestMsgpack(data); engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), "on the Batch") {
		t.Fatalf("msgpack: %v, want InvalidInput", err)
	}
	if _, err := ToCommand(req, "t"); engine.ErrorCode(err) != engine.CodeInvalidInput || engine.AsError(err).Index != 0 {
		t.Fatalf("ToCommand: %v, want InvalidInput at operation 0", err)
	}
}
