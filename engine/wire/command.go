package wire

import (
	"github.com/cairn-dev/cairn/engine"
)

// ToCommand converts an entity request (Insert, Replace or Update, Merge,
// InsertOrReplace, InsertOrMerge, Delete, Batch) for table into a command.
// It checks the request's shape; the limits are engine.ValidateCommand's.
func ToCommand(r *engine.Request, table string) (*engine.Command, error) {
	if err := readOnly(r); err != nil {
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
			if len(r.Ops[i].Messages) > 0 {
				return nil, engine.AsError(errOpMessages()).AtIndex(i)
			}
			op, err := toOperation(&r.Ops[i])
			if err != nil {
				return nil, engine.AsError(err).AtIndex(i)
			}
			cmd.Ops[i] = op
		}
		return cmd, nil
	}
	if len(r.Ops) > 0 {
		return nil, invalid("\"ops\" is only for a Batch, not %s", r.Op)
	}
	op, err := toOperation(r)
	if err != nil {
		return nil, err
	}
	cmd.Ops = []engine.Operation{op}
	return cmd, nil
}

// FromCommand is the inverse of ToCommand: the request that names cmd, for
// a host that sends a command to another (the table travels apart).
func FromCommand(cmd *engine.Command) *engine.Request {
	op := func(o *engine.Operation) engine.Request {
		return engine.Request{Op: o.Op.String(), IfMatch: o.IfMatch, Entity: o.Entity}
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

// readOnly refuses a write that names read positions: "asOf" and
// "position" are a Retrieve's.
func readOnly(r *engine.Request) error {
	if r.AsOf != 0 || r.Position != 0 {
		return invalid("\"asOf\" and \"position\" are for Retrieve, not %s", r.Op)
	}
	return nil
}

func toOperation(r *engine.Request) (engine.Operation, error) {
	if err := readOnly(r); err != nil {
		return engine.Operation{}, err
	}
	o, ok := engine.ParseOp(r.Op)
	if !ok {
		return engine.Operation{}, invalid("unknown operation %q: use Insert, Replace (or Update), Merge, InsertOrReplace, InsertOrMerge, Delete, Batch or Retrieve", r.Op)
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
