package engine

// PartitionState is what the decider reads: the current entities of one
// partition.
type PartitionState interface {
	Entity(rowKey string) (*Entity, bool)
}

// Decide checks a validated command against the partition's state and
// returns the events it causes, in operation order, or a coded error (for a
// batch, carrying the failing operation's index). It changes neither state
// nor cmd. epoch is the table incarnation, against which ETags are checked.
//
// The operations of a batch see the effects of those before them; if any
// fails, the batch causes no event at all.
//
// claims checks the large values' references an entity written takes up
// (Claims.check): a reference the entity held before in the same property
// passes, any other must be younger than the claim window at claims.Now.
func Decide(state PartitionState, epoch uint64, cmd *Command, claims Claims) ([]Event, error) {
	view := state
	var ov *Overlay
	if len(cmd.Ops) > 1 {
		ov = NewOverlay(state)
		view = ov
	}
	events := make([]Event, 0, len(cmd.Ops))
	for i, op := range cmd.Ops {
		ev, err := decideOp(view, epoch, op, claims)
		if err != nil {
			if cmd.Batch {
				return nil, AsError(err).AtIndex(i)
			}
			return nil, err
		}
		if ov != nil {
			ov.Apply([]Event{ev}, 0)
		}
		events = append(events, ev)
	}
	return events, nil
}

func decideOp(state PartitionState, epoch uint64, op Operation, claims Claims) (Event, error) {
	cur, exists := state.Entity(op.Entity.RowKey)
	ev, err := decidePut(cur, exists, epoch, op)
	if err != nil || ev.Kind != EventPut {
		return ev, err
	}
	// Only the properties the operation gives can take up a reference: a
	// merge keeps the others as they were.
	if err := claims.check(cur, op.Entity.Properties); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// decidePut decides op against cur, the entity at its keys (exists false:
// none).
func decidePut(cur *Entity, exists bool, epoch uint64, op Operation) (Event, error) {
	e := op.Entity
	put := func(props []Property) Event {
		return Event{Kind: EventPut, RowKey: e.RowKey, Properties: props}
	}
	switch op.Op {
	case OpInsert:
		if exists {
			return Event{}, Errorf(CodeEntityAlreadyExists, "entity (%q, %q) already exists", e.PartitionKey, e.RowKey)
		}
		return put(copyProps(e.Properties)), nil
	case OpInsertOrReplace:
		return put(copyProps(e.Properties)), nil
	case OpInsertOrMerge:
		if !exists {
			return put(copyProps(e.Properties)), nil
		}
		return put(Merged(cur.Properties, e.Properties)), nil
	case OpReplace, OpMerge, OpDelete:
		if !exists {
			return Event{}, Errorf(CodeResourceNotFound, "entity (%q, %q) does not exist", e.PartitionKey, e.RowKey)
		}
		if err := checkIfMatch(epoch, cur, op.IfMatch); err != nil {
			return Event{}, err
		}
		switch op.Op {
		case OpReplace:
			return put(copyProps(e.Properties)), nil
		case OpMerge:
			return put(Merged(cur.Properties, e.Properties)), nil
		}
		return Event{Kind: EventDelete, RowKey: e.RowKey}, nil
	}
	return Event{}, Errorf(CodeInvalidInput, "unknown operation %d", op.Op)
}

// checkIfMatch checks an If-Match condition: empty or "*" matches any
// existing entity, anything else must be the entity's current ETag. An
// entity decided but not yet committed (Version.Seq 0) has no ETag a client
// could know, so only "*" matches it.
func checkIfMatch(epoch uint64, cur *Entity, ifMatch string) error {
	if ifMatch == "" || ifMatch == "*" {
		return nil
	}
	if cur.Version.Seq != 0 && ifMatch == ETag(epoch, cur.Version) {
		return nil
	}
	return Errorf(CodeUpdateConditionNotSatisfied, "the entity (%q, %q) has changed since %s was read", cur.PartitionKey, cur.RowKey, ifMatch)
}

func copyProps(p []Property) []Property {
	if len(p) == 0 {
		return nil
	}
	return append([]Property(nil), p...)
}
