package wire

import (
	"github.com/cairn-dev/cairn/engine"
)

// ToCommand converts an entity request (Insert, Replace or Update, Merge,
// InsertOrReplace, InsertOrMerge, Delete, Batch) for table into a command.
// It refuses the fields an operation does not take as the decoders do
// (fields.go), for a request built in Go, and checks what each operation
// needs. The limits are engine.ValidateCommand's.
func ToCommand(r *engine.Request, table string) (*engine.Command, error) {
	if err := checkGiven(r, false); err != nil {
		return nil, err
	}
	cmd := &engine.Command{ID: r.ID, Table: table, Messages: r.Messages}
	if r.Op == "Batch" {
		if len(r.Ops) == 0 {
			return nil, invalid("a Batch needs at least one operation in \"ops\"")
		}
		cmd.Batch = true
		cmd.Ops = make([]engine.Operation, len(r.Ops))
		for i := range r.Ops {
			err := checkGiven(&r.Ops[i], true)
			var op engine.Operation
			if err == nil {
				op, err = toOperation(&r.Ops[i], true)
			}
			if err != nil {
				return nil, engine.AsError(err).AtIndex(i)
			}
			cmd.Ops[i] = op
		}
		return cmd, nil
	}
	op, err := toOperation(r, false)
	if err != nil {
		return nil, err
	}
	cmd.Ops = []engine.Operation{op}
	return cmd, nil
}

// FromCommand is the inverse of ToCommand: the request that names cmd, for
// a host that sends a command to another (the table travels apart), and
// for clients. An IfMatch an operation ignores (Insert's, the upserts')
// is left out, since a request is refused with it; a Delete is named by
// its keys.
func FromCommand(cmd *engine.Command) *engine.Request {
	op := func(o *engine.Operation) engine.Request {
		r := engine.Request{Op: o.Op.String(), Entity: o.Entity}
		switch o.Op {
		case engine.OpDelete:
			r.Entity = nil // its keys name it: nothing else travels
			if o.Entity != nil {
				r.PartitionKey, r.RowKey = o.Entity.PartitionKey, o.Entity.RowKey
			}
			r.IfMatch = o.IfMatch
		case engine.OpReplace, engine.OpMerge:
			r.IfMatch = o.IfMatch
		}
		return r
	}
	if !cmd.Batch && len(cmd.Ops) == 1 {
		r := op(&cmd.Ops[0])
		r.ID, r.Messages = cmd.ID, cmd.Messages
		return &r
	}
	r := &engine.Request{Op: "Batch", ID: cmd.ID, Messages: cmd.Messages, Ops: make([]engine.Request, len(cmd.Ops))}
	for i := range cmd.Ops {
		r.Ops[i] = op(&cmd.Ops[i])
	}
	return r
}

// toOperation converts a write, or an operation of a Batch (inBatch).
func toOperation(r *engine.Request, inBatch bool) (engine.Operation, error) {
	o, ok := engine.ParseOp(r.Op)
	if !ok {
		if inBatch {
			return engine.Operation{}, errUnknownBatchOp(r.Op)
		}
		return engine.Operation{}, errUnknownOp(r.Op)
	}
	op := engine.Operation{Op: o, IfMatch: r.IfMatch, Entity: r.Entity}
	if o == engine.OpDelete {
		if r.Entity != nil {
			op.Entity = engine.NewEntity(r.Entity.PartitionKey, r.Entity.RowKey)
		} else {
			op.Entity = engine.NewEntity(r.PartitionKey, r.RowKey)
		}
		return op, nil
	}
	if r.Entity == nil {
		return engine.Operation{}, invalid("%s needs an \"entity\"", r.Op)
	}
	return op, nil
}
