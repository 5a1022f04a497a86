package engine

// Overlay is a partition's state with pending effects on top: the entities
// as they will be once events decided but not yet committed are applied.
// The committer uses one per group commit, so that each command of a group
// is decided after the ones before it. Pending entities have a zero Version.
type Overlay struct {
	base    PartitionState
	pending map[string]*Entity // nil value: deleted
}

// NewOverlay returns an overlay with no pending effects on base.
func NewOverlay(base PartitionState) *Overlay {
	return &Overlay{base: base}
}

// Entity implements PartitionState.
func (o *Overlay) Entity(rk string) (*Entity, bool) {
	if e, ok := o.pending[rk]; ok {
		return e, e != nil
	}
	return o.base.Entity(rk)
}

// Apply records the effects of events; ts becomes the pending entities'
// Timestamp.
func (o *Overlay) Apply(events []Event, ts int64) {
	if o.pending == nil {
		o.pending = make(map[string]*Entity, len(events))
	}
	for _, ev := range events {
		switch ev.Kind {
		case EventPut:
			pk := ""
			if cur, ok := o.Entity(ev.RowKey); ok {
				pk = cur.PartitionKey
			}
			o.pending[ev.RowKey] = &Entity{PartitionKey: pk, RowKey: ev.RowKey, Timestamp: ts, Properties: ev.Properties}
		case EventDelete:
			o.pending[ev.RowKey] = nil
		}
	}
}

// Reset forgets every pending effect.
func (o *Overlay) Reset() { o.pending = nil }
