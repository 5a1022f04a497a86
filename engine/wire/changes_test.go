package wire

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// TestChangesRoundTrip: a page of changes survives both encodings, and a
// request both encodings and its defaults.
func TestChangesRoundTrip(t *testing.T) {
	ts := engine.TimeToTicks(time.Date(2026, 11, 23, 10, 0, 0, 1234500, time.UTC))
	e := engine.NewEntity("p", "r", engine.Property{Name: "N", Value: engine.Int64(7)}, engine.Property{Name: "S", Value: engine.String("x")})
	e.Timestamp = ts
	page := &ChangesReply{Next: 9, Head: 12, Changes: []Change{
		{Seq: 7, Index: 0, PartitionKey: "p", RowKey: "r", Entity: e, ETag: `W/"1.7.0"`, PrevETag: `W/"1.3.1"`, Timestamp: ts},
		{Seq: 8, Index: 2, PartitionKey: "p", RowKey: "q", Deleted: true, Timestamp: ts},
		{Seq: 8, Index: 3, PartitionKey: "p", RowKey: "z", Deleted: true, PrevUnknown: true, Timestamp: ts},
	}}
	for _, enc := range []Encoding{JSON, Msgpack} {
		got, err := DecodeChangesReply(EncodeChangesReply(page, enc), enc)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, page) {
			t.Fatalf("encoding %d: got %+v, want %+v", enc, got, page)
		}
		rep, err := DecodeChangesReply(EncodeChangesReply(&ChangesReply{Error: engine.Errorf(engine.CodeTableNotFound, "no")}, enc), enc)
		if err != nil || rep.Error == nil || rep.Error.Code != engine.CodeTableNotFound {
			t.Fatalf("encoding %d: error reply %+v, %v", enc, rep, err)
		}
		req := &ChangesRequest{From: 5, Max: 1000, Partitions: []string{"a", ""}, Wait: 30 * time.Second}
		b, err := EncodeChangesRequest(req, enc)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeChangesRequest(b, enc)
		if err != nil || !reflect.DeepEqual(back, req) {
			t.Fatalf("encoding %d: request %+v, %v", enc, back, err)
		}
	}
	if r, err := DecodeChangesRequest(nil, JSON); err != nil || r.From != 1 || r.Max != DefaultChanges || r.Wait != 0 {
		t.Fatalf("an empty request: %+v, %v", r, err)
	}
	if r, err := DecodeChangesRequest([]byte(`{"from":0}`), JSON); err != nil || r.From != 1 {
		t.Fatalf("from 0: %+v, %v", r, err)
	}
	js := string(EncodeChangesReply(page, JSON))
	for _, want := range []string{`"op":"put"`, `"op":"delete"`, `"prevEtag":"W/\"1.3.1\""`, `"prevUnknown":true`, `"N@odata.type":"Edm.Int64"`, `"timestamp":"2026-11-23T10:00:00.0012345Z"`} {
		if !strings.Contains(js, want) {
			t.Errorf("JSON page lacks %s: %s", want, js)
		}
	}
}

// FuzzDecodeChangesRequest: any bytes in either encoding are decoded or
// refused with a code, never a panic, and what decodes is within the
// limits and encodes into a request that decodes the same.
func FuzzDecodeChangesRequest(f *testing.F) {
	for _, s := range []string{`{}`, `{"from":5,"max":1000,"wait":"30s","partitions":["a",""]}`, `{"max":1001}`, `{"wait":"1h"}`, `{"x":1}`, `{"partitions":["a/b"]}`} {
		f.Add([]byte(s))
	}
	b, _ := EncodeChangesRequest(&ChangesRequest{From: 3, Max: 7, Partitions: []string{"p"}, Wait: time.Second}, Msgpack)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, enc := range []Encoding{JSON, Msgpack} {
			r, err := DecodeChangesRequest(data, enc)
			if err != nil {
				if engine.ErrorCode(err) != engine.CodeInvalidInput {
					t.Fatalf("refused with %v", err)
				}
				continue
			}
			if r.From < 1 || r.Max < 1 || r.Max > MaxChanges || r.Wait < 0 || r.Wait > MaxChangesWait || len(r.Partitions) > MaxFeedPartitions {
				t.Fatalf("decoded out of bounds: %+v", r)
			}
			again, err := EncodeChangesRequest(r, enc)
			if err != nil {
				t.Fatal(err)
			}
			r2, err := DecodeChangesRequest(again, enc)
			if err != nil || !reflect.DeepEqual(r2, r) && !(len(r.Partitions) == 0 && len(r2.Partitions) == 0) {
				t.Fatalf("%+v encodes into a request that decodes as %+v, %v", r, r2, err)
			}
		}
	})
}

// TestChangesPartitionsBound: a change feed request's partitions are
// refused at the first past MaxFeedPartitions, in JSON and msgpack, before
// the rest is decoded: millions of empty keys in a large request cost no
// more than a request as long.
func TestChangesPartitionsBound(t *testing.T) {
	keys := func(n int) string { return `[` + strings.TrimSuffix(strings.Repeat(`"",`, n), ",") + `]` }
	if r, err := DecodeChangesRequest([]byte(`{"partitions":`+keys(MaxFeedPartitions)+`}`), JSON); err != nil || len(r.Partitions) != MaxFeedPartitions {
		t.Fatalf("%d partitions: %v", MaxFeedPartitions, err)
	}
	if _, err := DecodeChangesRequest([]byte(`{"partitions":`+keys(MaxFeedPartitions+1)+`}`), JSON); engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Fatalf("%d partitions: %v, want InvalidInput", MaxFeedPartitions+1, err)
	}
	over := make([]string, MaxFeedPartitions+1)
	body, err := EncodeChangesRequest(&ChangesRequest{Partitions: over}, Msgpack)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeChangesRequest(body, Msgpack); engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Fatalf("%d partitions in msgpack: %v, want InvalidInput", MaxFeedPartitions+1, err)
	}

	spray := []byte(`{"partitions":` + keys(2_000_000) + `}`)
	n := allocated(func() { _, err = DecodeChangesRequest(spray, JSON) })
	if engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Fatalf("2,000,000 partitions: %v, want InvalidInput", err)
	}
	long := []byte(`{"wait":"` + strings.Repeat("x", len(spray)) + `"}`)
	base := allocated(func() { _, _ = DecodeChangesRequest(long, JSON) })
	const room = 1 << 20 // the bound's keys, with room
	if n > base+room {
		t.Fatalf("refusing 2,000,000 partitions allocated %d bytes; a request as long %d", n, base)
	}
}

// TestQuerySelectBound: a Query's select is refused past every property
// an entity may have, in JSON and msgpack, before the rest is decoded.
func TestQuerySelectBound(t *testing.T) {
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "P" + strings.Repeat("x", i%3)
		}
		return out
	}
	for _, enc := range []Encoding{JSON, Msgpack} {
		ok, err := EncodeQueryRequest(&QueryRequest{Select: names(maxSelect)}, enc)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := DecodeQueryRequest(ok, enc); err != nil || len(r.Select) != maxSelect {
			t.Fatalf("%v: %d names: %v", enc, maxSelect, err)
		}
		over, _ := EncodeQueryRequest(&QueryRequest{Select: names(maxSelect + 1)}, enc)
		if _, err := DecodeQueryRequest(over, enc); engine.ErrorCode(err) != engine.CodeInvalidInput {
			t.Fatalf("%v: %d names: %v, want InvalidInput", enc, maxSelect+1, err)
		}
	}
}
