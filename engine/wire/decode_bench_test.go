package wire

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// The decoding a NATS request costs the door: every request is told a
// Query or not (IsQuery), then decoded. BenchmarkDecodeInsertJSON and
// BenchmarkDecodeInsertMsgpack (fuzz_test.go) are the single write.

func benchBatch() *engine.Request {
	r := &engine.Request{Op: "Batch", ID: "b-1", Ops: make([]engine.Request, 10)}
	for i := range r.Ops {
		e := benchInsert().Entity
		e.RowKey = fmt.Sprintf("r%03d", i)
		r.Ops[i] = engine.Request{Op: "Insert", Entity: e}
	}
	r.Ops[9] = engine.Request{Op: "Delete", PartitionKey: r.Ops[0].Entity.PartitionKey, RowKey: "old", IfMatch: "*"}
	return r
}

func benchDecode(b *testing.B, r *engine.Request, enc Encoding) {
	var data []byte
	if enc == JSON {
		data, _ = EncodeRequestJSON(r)
	} else {
		data, _ = EncodeRequestMsgpack(r)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if IsQuery(data, enc) {
			b.Fatal("taken for a query")
		}
		if _, err := DecodeRequest(data, enc); err != nil {
			b.Fatal(err)
		}
	}
}

// benchSample is the entity of cmd/cairn-bench's writes: ten
// properties, five of them strings, 1 KB as a msgpack Insert.
func benchSample() *engine.Entity {
	return engine.NewEntity("p00042", "r0000042",
		engine.Property{Name: "Name", Value: engine.String("Jones, Margaret Anne (Sales)")},
		engine.Property{Name: "Email", Value: engine.String("margaret.jones@contoso.example")},
		engine.Property{Name: "Department", Value: engine.String("Sales")},
		engine.Property{Name: "Address", Value: engine.String(strings.Repeat("12 Market Street, ", 10))},
		engine.Property{Name: "Notes", Value: engine.String(strings.Repeat("quarterly review notes ", 26))},
		engine.Property{Name: "Age", Value: engine.Int32(38)},
		engine.Property{Name: "Salary", Value: engine.Double(72150.5)},
		engine.Property{Name: "Hired", Value: engine.DateTime(time.Date(2012, 3, 1, 9, 0, 0, 0, time.UTC))},
		engine.Property{Name: "Id", Value: engine.Guid([16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})},
		engine.Property{Name: "Active", Value: engine.Bool(true)},
	)
}

// BenchmarkDecodeSampleMsgpack is the request of cmd/cairn-bench's
// inserts; BenchmarkDecodeSampleMergeMsgpack the same entity merged,
// whose strings are each a string of its own (see decoder.entity).
func BenchmarkDecodeSampleMsgpack(b *testing.B) {
	benchDecode(b, &engine.Request{Op: "Insert", Entity: benchSample()}, Msgpack)
}

func BenchmarkDecodeSampleMergeMsgpack(b *testing.B) {
	benchDecode(b, &engine.Request{Op: "Merge", Entity: benchSample()}, Msgpack)
}

func BenchmarkDecodeBatchJSON(b *testing.B)    { benchDecode(b, benchBatch(), JSON) }
func BenchmarkDecodeBatchMsgpack(b *testing.B) { benchDecode(b, benchBatch(), Msgpack) }

func BenchmarkDecodeRetrieveJSON(b *testing.B) {
	benchDecode(b, &engine.Request{Op: "Retrieve", PartitionKey: "Sales", RowKey: "000123", Position: 7}, JSON)
}

func BenchmarkDecodeRetrieveMsgpack(b *testing.B) {
	benchDecode(b, &engine.Request{Op: "Retrieve", PartitionKey: "Sales", RowKey: "000123", Position: 7}, Msgpack)
}

func BenchmarkDecodeQueryJSON(b *testing.B) {
	data := []byte(`{"op":"Query","filter":"PartitionKey eq 'Support' and Salary gt 70000.0","select":["Name","Salary"],"top":100,"position":7}`)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if !IsQuery(data, JSON) {
			b.Fatal("not taken for a query")
		}
		if _, err := DecodeQueryRequest(data, JSON); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeChangesJSON(b *testing.B) {
	data := []byte(`{"from":12,"max":100,"partitions":["Sales","Support"],"wait":"10s"}`)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeChangesRequest(data, JSON); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeRequestMsgpack encodes an insert of the ~1 KB sample
// entity, as a client sends it.
func BenchmarkEncodeRequestMsgpack(b *testing.B) {
	r := &engine.Request{Op: "Insert", Table: "Employees", Entity: benchSample()}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeRequestMsgpack(r); err != nil {
			b.Fatal(err)
		}
	}
}
