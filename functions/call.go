package functions

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/abi"
)

// Call serves a WebAssembly guest's cairn.call: it decodes the request of
// op, performs it on the invocation and returns the encoded Response. It
// never fails: errors are answered in the Response. OpFail's text is
// returned through failure.
func (inv *Invocation) Call(ctx context.Context, op abi.Op, req []byte) []byte {
	resp, err := inv.call(ctx, op, req)
	if err != nil {
		resp = abi.Response{Error: abi.ErrorOf(err)}
	}
	b, err := abi.Marshal(&resp)
	if err != nil {
		b, _ = abi.Marshal(&abi.Response{Error: abi.ErrorOf(fmt.Errorf("encode the answer: %w", err))})
	}
	return b
}

func (inv *Invocation) call(ctx context.Context, op abi.Op, req []byte) (abi.Response, error) {
	decode := func(v any) error {
		if err := abi.Unmarshal(req, v); err != nil {
			return engine.Errorf(engine.CodeInvalidInput, "%s: the request is not valid msgpack: %v", op, err)
		}
		return nil
	}
	switch op {
	case abi.OpTrigger:
		return abi.Response{Trigger: &inv.trigger}, nil
	case abi.OpGet:
		var r abi.GetRequest
		if err := decode(&r); err != nil {
			return abi.Response{}, err
		}
		e, etag, err := inv.Get(ctx, r.Table, r.PartitionKey, r.RowKey)
		if err != nil || e == nil {
			return abi.Response{}, err
		}
		return abi.Response{Entity: &abi.Entity{Entity: e, ETag: etag}}, nil
	case abi.OpQuery:
		var r abi.QueryRequest
		if err := decode(&r); err != nil {
			return abi.Response{}, err
		}
		es, err := inv.Query(ctx, r.Table, r.PartitionKey, r.Filter, r.Top)
		return abi.Response{Entities: es}, err
	case abi.OpWrite:
		var r abi.WriteRequest
		if err := decode(&r); err != nil {
			return abi.Response{}, err
		}
		o, ok := engine.ParseOp(r.Op)
		if !ok {
			return abi.Response{}, engine.Errorf(engine.CodeInvalidInput, "write: unknown operation %q (Insert, Replace, Merge, InsertOrReplace, InsertOrMerge, Delete)", r.Op)
		}
		if r.Entity.Entity == nil {
			return abi.Response{}, engine.Errorf(engine.CodeInvalidInput, "write: no entity")
		}
		return abi.Response{}, inv.Write(ctx, r.Table, engine.Operation{Op: o, Entity: r.Entity.Entity, IfMatch: r.IfMatch})
	case abi.OpEnqueue:
		var r abi.EnqueueRequest
		if err := decode(&r); err != nil {
			return abi.Response{}, err
		}
		return abi.Response{}, inv.Enqueue(ctx, r.Queue, r.Body)
	case abi.OpOutput:
		return abi.Response{}, inv.SetOutput(req)
	case abi.OpLog:
		inv.Log(string(req))
		return abi.Response{}, nil
	case abi.OpFail:
		inv.failure = string(req)
		return abi.Response{}, nil
	case abi.OpSetting:
		var r abi.SettingRequest
		if err := decode(&r); err != nil {
			return abi.Response{}, err
		}
		v, ok, err := inv.Setting(r.Name)
		if err != nil || !ok {
			return abi.Response{}, err
		}
		return abi.Response{Value: &v}, nil
	case abi.OpRespond:
		var r abi.RespondRequest
		if err := decode(&r); err != nil {
			return abi.Response{}, err
		}
		return abi.Response{}, inv.SetResponse(r.Status, r.Header)
	}
	return abi.Response{}, engine.Errorf(engine.CodeInvalidInput, "unknown operation %d", int32(op))
}
