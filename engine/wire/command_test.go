package wire_test

import (
	"reflect"
	"testing"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
)

// TestFromCommand: a command sent to another host as a request (msgpack)
// comes back as the same command, whatever its operations.
func TestFromCommand(t *testing.T) {
	e := engine.NewEntity("p", "r", engine.Property{Name: "N", Value: engine.Int64(7)}, engine.Property{Name: "S", Value: engine.String("x")})
	msgs := []engine.Message{{Queue: "q", ID: "m1", Body: []byte("b")}, {Subject: "orders.created", Body: []byte("c")}}
	cmds := []*engine.Command{
		{ID: "c1", Table: "T", Ops: []engine.Operation{{Op: engine.OpInsert, Entity: e}}, Messages: msgs},
		{Table: "T", Ops: []engine.Operation{{Op: engine.OpReplace, Entity: e, IfMatch: `W/"1.2.0"`}}},
		{Table: "T", Ops: []engine.Operation{{Op: engine.OpMerge, Entity: e, IfMatch: "*"}}},
		{Table: "T", Ops: []engine.Operation{{Op: engine.OpInsertOrReplace, Entity: e}}},
		{Table: "T", Ops: []engine.Operation{{Op: engine.OpInsertOrMerge, Entity: e}}},
		{Table: "T", Ops: []engine.Operation{{Op: engine.OpDelete, Entity: engine.NewEntity("p", "r"), IfMatch: "*"}}},
		{ID: "b", Table: "T", Batch: true, Ops: []engine.Operation{{Op: engine.OpInsert, Entity: e}}},
		{ID: "b2", Table: "T", Batch: true, Messages: msgs, Ops: []engine.Operation{
			{Op: engine.OpInsert, Entity: e}, {Op: engine.OpDelete, Entity: engine.NewEntity("p", "s")}}},
	}
	for i, cmd := range cmds {
		data, err := wire.EncodeRequestMsgpack(wire.FromCommand(cmd))
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		req, err := wire.DecodeRequestMsgpack(data)
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		got, err := wire.ToCommand(req, "T")
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, cmd) {
			t.Errorf("command %d came back as\n%+v\nnot\n%+v", i, got, cmd)
		}
	}
}
