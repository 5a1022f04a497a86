package wire_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
)

// TestValueRequests: the value sessions' first requests round-trip in
// both encodings, are told apart from other requests, and every malformed
// one is InvalidInput.
func TestValueRequests(t *testing.T) {
	for _, enc := range []wire.Encoding{wire.JSON, wire.Msgpack} {
		for _, r := range []*wire.ValueRequest{
			{Op: wire.PutValueOp, PartitionKey: "Sales", RowKey: "1"},
			{Op: wire.GetValueOp, PartitionKey: "Sales", RowKey: "1", Property: "Photo", Position: 7},
		} {
			b, err := wire.EncodeValueRequest(r, enc)
			if err != nil {
				t.Fatal(err)
			}
			if op := wire.ValueOp(b, enc); op != r.Op {
				t.Fatalf("%s: ValueOp %q", b, op)
			}
			got, err := wire.DecodeValueRequest(b, enc)
			if err != nil || *got != *r {
				t.Fatalf("%s: %+v %v", b, got, err)
			}
		}
	}
	for _, body := range []string{`{"op":"Retrieve","partitionKey":"p","rowKey":"r"}`, `{"op":"Insert","entity":{"PartitionKey":"p","RowKey":"r","Value":"x"}}`, `not json`} {
		if op := wire.ValueOp([]byte(body), wire.JSON); op != "" {
			t.Errorf("%s: ValueOp %q", body, op)
		}
	}
	if op := wire.ValueOp([]byte(`{"op":"Put\u0056alue","partitionKey":"p","rowKey":"r"}`), wire.JSON); op != wire.PutValueOp {
		t.Errorf("an escaped op: %q", op)
	}
	for _, bad := range []struct{ body, says string }{
		{`{"op":"PutValue","partitionKey":"p","rowKey":"r","property":"Photo"}`, `PutValue does not take`},
		{`{"op":"PutValue","partitionKey":"p","rowKey":"r","position":3}`, `PutValue does not take`},
		{`{"op":"GetValue","partitionKey":"p","rowKey":"r"}`, `needs "property"`},
		{`{"op":"GetValue","partitionKey":"p","rowKey":"r","property":"P","entity":{}}`, `"entity"`},
		{`{"op":"PutValue","partitionKey":"p","rowKey":"r","size":3}`, `unknown field "size"`},
		{`{"op":"PutValue","partitionKey":"p","rowKey":"r","rowKey":"s"}`, `rowKey`},
		{`{"op":"PutValue","partitionKey":"p","rowKey":"r"} {}`, `after`},
	} {
		_, err := wire.DecodeValueRequest([]byte(bad.body), wire.JSON)
		if e := engine.AsError(err); err == nil || e.Code != engine.CodeInvalidInput || !strings.Contains(e.Message, bad.says) {
			t.Errorf("%s: %v, want InvalidInput saying %s", bad.body, err, bad.says)
		}
	}
	up := time.Date(2026, 12, 7, 15, 0, 0, 123456789, time.UTC)
	for _, enc := range []wire.Encoding{wire.JSON, wire.Msgpack} {
		r := &wire.ValueReply{Session: "cairn.cmd.a.T.x", Chunk: 1 << 18, Reference: "cairn-value:x", Size: 9, Uploaded: up}
		got, err := wire.DecodeValueReply(wire.EncodeValueReply(r, enc), enc)
		if err != nil || *got != *r {
			t.Fatalf("reply: %+v %v", got, err)
		}
		e := engine.Errorf(engine.CodeServerBusy, "busy")
		got, err = wire.DecodeValueReply(wire.EncodeValueReply(&wire.ValueReply{Error: e}, enc), enc)
		if err != nil || got.Error == nil || got.Error.Code != engine.CodeServerBusy {
			t.Fatalf("an error reply: %+v %v", got, err)
		}
	}
}
