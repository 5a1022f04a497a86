package wire

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
)

// entityStrings are an entity's keys, names and String values.
func entityStrings(e *engine.Entity) []string {
	out := []string{e.PartitionKey, e.RowKey}
	for _, p := range e.Properties {
		out = append(out, p.Name)
		if p.Value.Type() == engine.TypeString {
			out = append(out, p.Value.Str())
		}
	}
	return out
}

// ownStrings is how many strings of their own an entity's text is when
// it is not shared: its keys, names, and String, Guid and Binary values.
func ownStrings(e *engine.Entity) int {
	n := 2 + len(e.Properties)
	for _, p := range e.Properties {
		switch p.Value.Type() {
		case engine.TypeString, engine.TypeGuid, engine.TypeBinary:
			if p.Value.Len() > 0 {
				n++
			}
		}
	}
	return n
}

// oneString reports whether the strings lie within size bytes of memory,
// as substrings of one string of the entity's bytes do.
func oneString(ss []string, size int) bool {
	lo, hi := uintptr(0), uintptr(0)
	for _, s := range ss {
		if len(s) == 0 {
			continue
		}
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		if lo == 0 || p < lo {
			lo = p
		}
		hi = max(hi, p+uintptr(len(s)))
	}
	return hi-lo <= uintptr(size)
}

// TestDecodeEntityText: an entity the store keeps whole (an insert, a
// replacement, a reply's) is cut from one string of its bytes, as many
// allocations whatever its properties; a merge's, or one before its
// operation, is strings of its own, one per key, name and value.
func TestDecodeEntityText(t *testing.T) {
	e := benchSample()
	for _, tc := range []struct {
		op     string
		shared bool
	}{
		{"Insert", true}, {"Replace", true}, {"Update", true}, {"InsertOrReplace", true},
		{"Merge", false}, {"InsertOrMerge", false},
	} {
		data, err := EncodeRequestMsgpack(&engine.Request{Op: tc.op, Entity: e})
		if err != nil {
			t.Fatal(err)
		}
		r, err := DecodeRequestMsgpack(data)
		if err != nil {
			t.Fatal(err)
		}
		sameEntity(t, r.Entity, e)
		if tc.shared && !oneString(entityStrings(r.Entity), len(data)) {
			t.Fatalf("%s: the entity's strings are not one string's", tc.op)
		}
		if raceEnabled {
			continue // the counts below are the pool's there
		}
		allocs := testing.AllocsPerRun(20, func() { _, _ = DecodeRequestMsgpack(data) })
		// Request, Entity, the property slice, and the text: one string,
		// or one per key, name and non-empty string value.
		want := 3.0 + 1
		if !tc.shared {
			want = 3.0 + float64(ownStrings(e))
		}
		if allocs != want {
			t.Fatalf("%s: %v allocations, want %v", tc.op, allocs, want)
		}
	}

	// The operation after the entity: not known when it is read.
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := enc.EncodeMapLen(2); err != nil {
		t.Fatal(err)
	}
	if err := enc.EncodeString("entity"); err != nil {
		t.Fatal(err)
	}
	if err := EncodeEntity(enc, e); err != nil {
		t.Fatal(err)
	}
	if err := enc.EncodeString("op"); err != nil {
		t.Fatal(err)
	}
	if err := enc.EncodeString("Insert"); err != nil {
		t.Fatal(err)
	}
	r, err := DecodeRequestMsgpack(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	sameEntity(t, r.Entity, e)
	if raceEnabled {
		return
	}
	allocs := testing.AllocsPerRun(20, func() { _, _ = DecodeRequestMsgpack(buf.Bytes()) })
	if want := 3.0 + float64(ownStrings(e)); allocs != want {
		t.Fatalf("operation after its entity: %v allocations, want %v", allocs, want)
	}
}

// TestDecodeRequestMsgpackReference: over its bytes, a request decodes as
// msgpack's Decoder alone decodes it (the path of DecodeEntity), which
// FuzzDecodeRequestMsgpack holds it to on any input.
func TestDecodeRequestMsgpackReference(t *testing.T) {
	for _, r := range append(sampleRequests(), &engine.Request{Op: "Insert", Entity: benchSample()}) {
		data, err := EncodeRequestMsgpack(r)
		if err != nil {
			t.Fatal(err)
		}
		checkReference(t, data)
	}
}

// checkReference decodes data as a request both ways and compares.
func checkReference(t *testing.T, data []byte) {
	t.Helper()
	got, err := DecodeRequestMsgpack(data)
	want := &engine.Request{}
	var wantErr error
	if len(data) <= maxBody {
		ref := &decoder{dec: msgpack.NewDecoder(bytes.NewReader(data))}
		wantErr = ref.request(want, false)
	} else {
		wantErr = err
	}
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%x: %v; the reference: %v", data, err, wantErr)
	}
	if err != nil {
		if c, w := engine.AsError(err).Code, engine.AsError(at("request", wantErr)).Code; c != w {
			t.Fatalf("%x: code %s (%v); the reference's %s (%v)", data, c, err, w, wantErr)
		}
		return
	}
	sameRequest(t, got, want)
}
