package projections

// AsOfCached returns the number of finished as-of views the node keeps.
func (v *Views) AsOfCached() int { return v.asOfCached() }

// CommandLog returns the command ids a snapshot remembers, in the order
// the view evicts them (an id committed twice in the window twice).
func CommandLog(s *Snapshot) []CommandRecord {
	out := make([]CommandRecord, len(s.expiry))
	for i, c := range s.expiry {
		out[i] = *c
	}
	return out
}

// CommandIDs returns the command ids a snapshot answers, in key order.
func CommandIDs(s *Snapshot) []CommandRecord {
	var out []CommandRecord
	s.ids.Scan(func(c *CommandRecord) bool {
		out = append(out, *c)
		return true
	})
	return out
}
