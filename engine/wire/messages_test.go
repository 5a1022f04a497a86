package wire

import (
	"reflect"
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
