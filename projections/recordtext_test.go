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

// TestViewKeepsNoRequestText: a record the committer applies at its
// acknowledgement has the keys of the request it was decided from, which
// the front door cuts from the request's text; the partition's summary
// and the command ids kept for the dedup window hold copies, so that
// they keep no request's text alive for as long as they live.
func TestViewKeepsNoRequestText(t *testing.T) {
	text := "p" + strings.Repeat("x", 64<<10)
	lo := uintptr(unsafe.Pointer(unsafe.StringData(text)))
	hi := lo + uintptr(len(text))
	inText := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		return p >= lo && p < hi
	}
	pk := text[:1]
	vt := NewTable("Keys", 1, 0)
	for seq, rk := range []string{"r1", "r2"} { // a new partition, then one it has
		vt.Apply(uint64(seq+1), &engine.Record{Time: 1, PartitionKey: pk, Commands: []engine.CommandRef{{ID: "c-" + rk, Count: 1}},
			Events: []engine.Event{{Kind: engine.EventPut, RowKey: rk, Properties: []engine.Property{{Name: "N", Value: engine.Int32(1)}}}}})
	}
	vt.Publish()
	snap := vt.Snapshot()
	if p := snap.Partition("p"); p.Entities != 2 || inText(p.Key) {
		t.Fatalf("partition %+v: its key is a substring of the request's text: %v", p, inText(p.Key))
	}
	for _, id := range []string{"c-r1", "c-r2"} {
		c, ok := snap.Command("p", id)
		if !ok {
			t.Fatalf("command %s not remembered", id)
		}
		if inText(c.PartitionKey) {
			t.Fatalf("command %s: its partition key is a substring of the request's text", id)
		}
	}
}

// TestTouchedKeepsNoRequestText: the partitions a snapshot's tail
// touched, noted until the next snapshot, are copies of the records'
// keys, not substrings of the request text they may be cut from.
func TestTouchedKeepsNoRequestText(t *testing.T) {
	text := "p" + strings.Repeat("x", 64<<10)
	lo := uintptr(unsafe.Pointer(unsafe.StringData(text)))
	hi := lo + uintptr(len(text))
	ts := newTouchedSet()
	for _, rk := range []string{"r1", "r2"} {
		ts.note(&engine.Record{PartitionKey: text[:1], Events: []engine.Event{{Kind: engine.EventPut, RowKey: rk}}})
	}
	if len(ts.parts) != 1 {
		t.Fatalf("%d partitions noted, want 1", len(ts.parts))
	}
	for pk := range ts.parts {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(pk))); p >= lo && p < hi {
			t.Fatal("the touched partition's key is a substring of the request's text")
		}
	}
}
