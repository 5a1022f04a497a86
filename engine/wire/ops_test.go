package wire

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/engine"
)

// jsonBatch is a JSON Batch of n operations, each op.
func jsonBatch(n int, op string) []byte {
	return []byte(`{"op":"Batch","ops":[` + strings.TrimSuffix(strings.Repeat(op+",", n), ",") + `]}`)
}

// TestBatchOpsBoundJSON: a JSON Batch of more than engine.MaxBatchOps
// operations is refused with InvalidInput before the decoder holds them,
// and an operation with operations of its own is refused as it is met:
// 8 MiB of empty operations allocated gigabytes before.
func TestBatchOpsBoundJSON(t *testing.T) {
	insert := `{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r"}}`
	if r, err := DecodeRequestJSON(jsonBatch(engine.MaxBatchOps, insert)); err != nil || len(r.Ops) != engine.MaxBatchOps {
		t.Fatalf("%d operations: %v", engine.MaxBatchOps, err)
	}
	_, err := DecodeRequestJSON(jsonBatch(engine.MaxBatchOps+1, insert))
	if engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), "maximum 100 changes") {
		t.Fatalf("%d operations: %v, want InvalidInput", engine.MaxBatchOps+1, err)
	}
	_, err = DecodeRequestJSON([]byte(`{"op":"Batch","ops":[{"op":"Batch","ops":[]}]}`))
	if engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), `cannot have "ops"`) {
		t.Fatalf("an operation with operations: %v, want InvalidInput", err)
	}

	spray := jsonBatch((maxBody-64)/3, "{}")
	n := allocated(func() { _, err = DecodeRequestJSON(spray) })
	if engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Fatalf("%d bytes of empty operations: %v, want InvalidInput", len(spray), err)
	}
	long := []byte(`{"op":"Batch","id":"` + strings.Repeat("x", len(spray)) + `"}`)
	base := allocated(func() { _, _ = DecodeRequestJSON(long) })
	const room = 1 << 20 // the bound's operations, with room
	if n > base+room {
		t.Fatalf("refusing %d bytes of empty operations allocated %d bytes; a request as long %d", len(spray), n, base)
	}
}

// TestBatchOpsBoundMsgpack: a msgpack array of more than
// engine.MaxBatchOps operations is refused from its length, before
// anything is allocated for it.
func TestBatchOpsBoundMsgpack(t *testing.T) {
	// {"op": "Batch", "ops": <array32 of 65,536>} and nothing more.
	claim := []byte("\x82\xa2op\xa5Batch\xa3ops\xdd\x00\x01\x00\x00")
	var err error
	n := allocated(func() { _, err = DecodeRequestMsgpack(claim) })
	if engine.ErrorCode(err) != engine.CodeInvalidInput || !strings.Contains(err.Error(), "maximum 100 changes") {
		t.Fatalf("an array header of 65,536 operations: %v, want InvalidInput", err)
	}
	const most = 64 << 10
	if n > most {
		t.Fatalf("refusing an array header of 65,536 operations allocated %d bytes, want at most %d", n, most)
	}
}
