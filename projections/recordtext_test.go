package projections

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// TestViewKeepsNoRecordText: a decoded record's strings are substrings of
// its event's text; the view keeps its entity packed, a copy, so that it
// keeps no record's text alive, and an entity read from it has none of
// its strings there. The text is large (a span of its own), so no other
// string can lie inside it.
func TestViewKeepsNoRecordText(t *testing.T) {
	big := strings.Repeat("x", 64<<10)
	data, err := journal.EncodeRecord(&engine.Record{Time: 1, PartitionKey: "p", Commands: []engine.CommandRef{{Count: 1}},
		Events: []engine.Event{{Kind: engine.EventPut, RowKey: "r", Properties: []engine.Property{
			{Name: "Big", Value: engine.String(big)}, {Name: "Small", Value: engine.Int32(1)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := journal.DecodeRecord(data)
	if err != nil {
		t.Fatal(err)
	}
	text := rec.Events[0].RowKey
	lo := uintptr(unsafe.Pointer(unsafe.StringData(text)))
	hi := lo + uintptr(len(data))
	inText := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		return p >= lo && p < hi
	}
	if !inText(rec.Events[0].Properties[0].Name) {
		t.Fatal("the decoded names are not cut from the event's text: this test tests nothing")
	}
	vt := NewTable("Names", 1, 0)
	vt.Apply(1, rec)
	vt.Publish()
	e, ok := vt.Snapshot().Get("p", "r")
	if !ok {
		t.Fatal("entity not applied")
	}
	if inText(e.PartitionKey) || inText(e.RowKey) {
		t.Fatal("the entity's keys are substrings of the record's text")
	}
	for _, p := range e.Properties {
		if inText(p.Name) || inText(p.Value.Str()) {
			t.Fatalf("property %q is a substring of the record's text", p.Name)
		}
	}
}
