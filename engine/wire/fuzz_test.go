package wire

import (
	"errors"
	"testing"

	"github.com/cairn-dev/cairn/engine"
)

// checkDecoded asserts the properties every decoder must have: failures are
// coded errors, and whatever decodes encodes and decodes to the same thing.
func checkDecoded(t *testing.T, r *engine.Request, err error, enc Encoding) {
	if err != nil {
		var e *engine.Error
		if !errors.As(err, &e) || e.Code == engine.CodeInternalError {
			t.Fatalf("uncoded error: %v", err)
		}
		return
	}
	var data []byte
	if enc == JSON {
		data, err = EncodeRequestJSON(r)
	} else {
		data, err = EncodeRequestMsgpack(r)
	}
	if err != nil {
		t.Fatalf("decoded request does not encode: %v", err)
	}
	again, err := DecodeRequest(data, enc)
	if err != nil {
		t.Fatalf("re-encoded request does not decode: %v\n%q", err, data)
	}
	sameRequest(t, again, r)
}

func FuzzDecodeRequestJSON(f *testing.F) {
	for _, r := range sampleRequests() {
		data, _ := EncodeRequestJSON(r)
		f.Add(data)
	}
	f.Add([]byte(`{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r","A@odata.type":"Edm.Int64","A":"5"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRequestJSON(data)
		checkDecoded(t, r, err, JSON)
	})
}

func FuzzDecodeRequestMsgpack(f *testing.F) {
	for _, r := range sampleRequests() {
		data, _ := EncodeRequestMsgpack(r)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRequestMsgpack(data)
		checkDecoded(t, r, err, Msgpack)
		checkReference(t, data)
	})
}

func FuzzParseEntityJSON(f *testing.F) {
	f.Add(AppendEntityJSON(nil, allTypes(), `W/"1.1.1"`, MinimalMetadata))
	f.Add([]byte(`{"PartitionKey":"p","RowKey":"","A":1.5e3,"B@odata.type":"Edm.DateTime","B":"2020-01-01T00:00:00+02:00"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseEntityJSON(data)
		if err != nil {
			if engine.ErrorCode(err) == engine.CodeInternalError {
				t.Fatalf("uncoded error: %v", err)
			}
			return
		}
		again, err := ParseEntityJSON(AppendEntityJSON(nil, e, "", MinimalMetadata))
		if err != nil {
			t.Fatalf("re-encoded entity does not parse: %v", err)
		}
		if e.PartitionKey == again.PartitionKey && len(e.Properties) == len(again.Properties) {
			for i := range e.Properties {
				if e.Properties[i].Name != again.Properties[i].Name || e.Properties[i].Value.Type() != again.Properties[i].Value.Type() {
					t.Fatalf("property %d changed: %#v → %#v", i, e.Properties[i], again.Properties[i])
				}
			}
		}
	})
}

func benchInsert() *engine.Request {
	e := allTypes()
	e.Timestamp = 0
	e.Properties = e.Properties[:10]
	return &engine.Request{Op: "Insert", Entity: e}
}

func BenchmarkDecodeInsertMsgpack(b *testing.B) {
	data, _ := EncodeRequestMsgpack(benchInsert())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRequestMsgpack(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeInsertJSON(b *testing.B) {
	data, _ := EncodeRequestJSON(benchInsert())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRequestJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeReplyMsgpack(b *testing.B) {
	r := &engine.Reply{ETag: `W/"1.123456.0"`, Timestamp: 1234567, Seq: 123456}
	b.ReportAllocs()
	for b.Loop() {
		EncodeReplyMsgpack(r)
	}
}

// FuzzDecodeMessagesJSON: the HTTP API's X-Cairn-Messages header. Whatever
// decodes travels in a request unchanged.
func FuzzDecodeMessagesJSON(f *testing.F) {
	f.Add([]byte(`[{"queue":"archive","id":"m1","body":"text"},{"subject":"orders.created","bodyBase64":"AP8="}]`))
	f.Add([]byte(`[{"subject":"a.b","body":"x","bodyBase64":"eA=="}]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, err := DecodeMessagesJSON(data)
		if err != nil {
			if engine.ErrorCode(err) != engine.CodeInvalidInput {
				t.Fatalf("error without InvalidInput: %v", err)
			}
			return
		}
		checkDecoded(t, &engine.Request{Op: "Insert", Entity: engine.NewEntity("p", "r"), Messages: msgs}, nil, JSON)
	})
}
