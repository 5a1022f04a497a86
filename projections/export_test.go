package projections

// AsOfCached returns the number of finished as-of views the node keeps.
func (v *Views) AsOfCached() int { return v.asOfCached() }
