package wire

import (
	"fmt"
	"testing"

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
