package wire

import (
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
)

// TestQueryRoundTrip: a Query and its page survive both encodings, and the
// defaults are filled in.
func TestQueryRoundTrip(t *testing.T) {
	req := &QueryRequest{Filter: "N gt 1", Select: []string{"N", "Tag"}, Top: 7, Continuation: "q1!a!1!0!cA!cg",
		Descending: true, AsOf: 9}
	e := engine.NewEntity("p", "r", engine.Property{Name: "N", Value: engine.Int64(3)}, engine.Property{Name: "When", Value: engine.DateTimeTicks(637000000000000000)})
	e.Timestamp = 638000000000000000
	page := &QueryReply{Entities: []QueryEntity{{Entity: e, ETag: `W/"1.2.0"`}}, Continuation: "next", Seq: 2}
	for _, enc := range []Encoding{Msgpack, JSON} {
		b, err := EncodeQueryRequest(req, enc)
		if err != nil {
			t.Fatal(err)
		}
		if !IsQuery(b, enc) {
			t.Fatalf("%d: IsQuery(%q) is false", enc, b)
		}
		got, err := DecodeQueryRequest(b, enc)
		if err != nil {
			t.Fatalf("%d: %v", enc, err)
		}
		if got.Filter != req.Filter || len(got.Select) != 2 || got.Top != 7 || got.Continuation != req.Continuation || !got.Descending || got.AsOf != 9 || got.Position != 0 {
			t.Fatalf("%d: %+v", enc, got)
		}
		b, _ = EncodeQueryRequest(&QueryRequest{}, enc)
		if got, err := DecodeQueryRequest(b, enc); err != nil || got.Top != MaxQueryPage {
			t.Fatalf("%d: an empty query: %+v %v", enc, got, err)
		}

		b = EncodeQueryReply(page, enc)
		rp, err := DecodeQueryReply(b, enc)
		if err != nil {
			t.Fatalf("%d: %v", enc, err)
		}
		if rp.Continuation != "next" || rp.Seq != 2 || len(rp.Entities) != 1 || rp.Entities[0].ETag != `W/"1.2.0"` ||
			rp.Entities[0].Entity.Timestamp != e.Timestamp {
			t.Fatalf("%d: %+v", enc, rp)
		}
		if v, _ := rp.Entities[0].Entity.Get("When"); !v.Equal(engine.DateTimeTicks(637000000000000000)) {
			t.Fatalf("%d: a typed value came back as %v", enc, v)
		}
		b = EncodeQueryReply(&QueryReply{Error: engine.Errorf(engine.CodeTableNotFound, "gone")}, enc)
		if rp, err := DecodeQueryReply(b, enc); err != nil || rp.Error == nil || rp.Error.Code != engine.CodeTableNotFound {
			t.Fatalf("%d: error reply %q: %+v %v", enc, b, rp, err)
		}
	}
}

// TestQueryRequestRefused: bad queries are coded errors.
func TestQueryRequestRefused(t *testing.T) {
	for body, want := range map[string]engine.Code{
		`{"op":"Query","top":1001}`:      engine.CodeInvalidInput,
		`{"op":"Query","top":-3}`:        engine.CodeInvalidInput,
		`{"op":"Query","asOf":0}`:        engine.CodeInvalidAsOfPosition,
		`{"op":"Query","order":"desc"}`:  engine.CodeInvalidInput,
		`{"op":"Retrieve"}`:              engine.CodeInvalidInput,
		`{"op":"Query","filter":"\xff"}`: engine.CodeInvalidInput,
		`{"op":"Query","filter":1}`:      engine.CodeInvalidInput,
		`{"op":"Query"} {"op":"Query"}`:  engine.CodeInvalidInput,
	} {
		_, err := DecodeQueryRequest([]byte(body), JSON)
		if engine.ErrorCode(err) != want {
			t.Errorf("%s: %v, want %s", body, err, want)
		}
	}
	b, _ := msgpack.Marshal(map[string]any{"op": "Query", "limit": 3})
	if _, err := DecodeQueryRequest(b, Msgpack); engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Errorf("msgpack with an unknown field: %v", err)
	}
}

// TestIsQuery: only a request whose op is Query is one, however the body
// spells it.
func TestIsQuery(t *testing.T) {
	mp := func(v any) []byte { b, _ := msgpack.Marshal(v); return b }
	for _, c := range []struct {
		body []byte
		enc  Encoding
		want bool
	}{
		{[]byte(`{"op":"Query"}`), JSON, true},
		{[]byte(`{"op":"\u0051uery"}`), JSON, true},
		{[]byte(`{"op":"Insert","entity":{"PartitionKey":"Query","RowKey":"r"}}`), JSON, false},
		{[]byte(`{"op":"Query"`), JSON, false},
		{mp(map[string]any{"op": "Query"}), Msgpack, true},
		{mp(map[string]any{"entity": map[string]any{"pk": "Query"}, "op": "Insert"}), Msgpack, false},
		{[]byte("Query"), Msgpack, false},
	} {
		if got := IsQuery(c.body, c.enc); got != c.want {
			t.Errorf("IsQuery(%q) = %v", c.body, got)
		}
	}
}

// TestErrorEncoding: an error goes back in JSON unless the request was
// msgpack (a whole map) or said it was.
func TestErrorEncoding(t *testing.T) {
	mp, _ := msgpack.Marshal(map[string]any{"op": "Insert"})
	for _, c := range []struct {
		body []byte
		ct   string
		want Encoding
	}{
		{[]byte(`{"op":"Query"}`), "", JSON},
		{[]byte(`{broken`), "", JSON},
		{[]byte("hello"), "", JSON},
		{nil, "", JSON},
		{mp, "", Msgpack},
		{mp[:len(mp)-1], "", JSON},
		{append(mp[:len(mp):len(mp)], 'x'), "", JSON},
		{[]byte("hello"), "application/msgpack", Msgpack},
		{[]byte("hello"), "text/plain", JSON},
	} {
		if got := ErrorEncoding(c.body, c.ct); got != c.want {
			t.Errorf("ErrorEncoding(%q, %q) = %v, want %v", c.body, c.ct, got, c.want)
		}
	}
}
