package values

import (
	"context"
	"errors"

	"github.com/cairn-dev/cairn/engine"
)

// Infoer is what Check needs of the store (Store is one).
type Infoer interface {
	Info(ctx context.Context, k Key, id string) (Info, error)
}

// Check checks, before cmd is submitted, that every reference its
// entities take up names a value of that entity in st: the check of every
// door and of the functions' writes (docs/VALUES.md), the decision's
// (engine.Claims) being the other. key returns the store's key of an
// entity of cmd's table (the table as it was created: the view's name);
// it is called only for an entity that holds references. Cost: one Info per reference; a command without
// references costs a scan of its strings' prefixes. A malformed or
// unknown reference is InvalidInput, with the operation's index in a
// batch; a nil st refuses every reference.
func Check(ctx context.Context, st Infoer, cmd *engine.Command, key func(pk, rk string) (Key, error)) error {
	for i, op := range cmd.Ops {
		if op.Op == engine.OpDelete || op.Entity == nil {
			continue
		}
		ids, err := engine.ValueRefs(op.Entity.Properties)
		if err == nil && len(ids) > 0 {
			err = checkRefs(ctx, st, key, op.Entity.PartitionKey, op.Entity.RowKey, ids)
		}
		if err != nil {
			if cmd.Batch {
				return engine.AsError(err).AtIndex(i)
			}
			return err
		}
	}
	return nil
}

func checkRefs(ctx context.Context, st Infoer, key func(pk, rk string) (Key, error), pk, rk string, ids []string) error {
	k, err := key(pk, rk)
	if err != nil {
		return err
	}
	if st == nil {
		return engine.Errorf(engine.CodeInvalidInput, "%s: this node keeps no large values", engine.ValueRef(ids[0]))
	}
	for _, id := range ids {
		_, err := st.Info(ctx, k, id)
		if errors.Is(err, ErrNotFound) {
			return engine.Errorf(engine.CodeInvalidInput, "%s names no value of the entity (%q, %q): upload it first (PUT …/$value; a reference belongs to the entity it was uploaded for)", engine.ValueRef(id), pk, rk)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
