package projections

import (
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/engine"
)

// TestAckedRecords: a record applied at its acknowledgement is given once
// to its delivery; one whose delivery never comes is dropped after
// ackedKeep more.
func TestAckedRecords(t *testing.T) {
	var a ackedRecords
	recs := make([]*engine.Record, ackedKeep+1)
	for i := range recs {
		recs[i] = &engine.Record{Nonce: fmt.Sprint("n", i)}
	}
	a.keep(recs[0])
	a.keep(recs[1])
	if got := a.take("n1"); got != recs[1] {
		t.Fatalf("take n1 = %v", got)
	}
	if got := a.take("n1"); got != nil {
		t.Fatalf("n1 taken twice: %v", got)
	}
	for _, r := range recs[2:] {
		a.keep(r)
	}
	if got := a.take("n0"); got != nil {
		t.Fatalf("n0 kept past %d more records", ackedKeep)
	}
	if got := a.take(fmt.Sprint("n", ackedKeep)); got != recs[ackedKeep] {
		t.Fatalf("the newest record is gone: %v", got)
	}
	if len(a.recs) != ackedKeep-2 {
		t.Fatalf("%d records kept, want %d", len(a.recs), ackedKeep-2)
	}
}
