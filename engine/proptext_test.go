package engine

import (
	"bytes"
	"math"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// propTextSamples are property lists of every type, sorted and not, and
// the edges of each encoding's lengths.
func propTextSamples() [][]Property {
	all := []Property{
		{Name: "Name", Value: String("Jones, Margaret Anne (Sales)")},
		{Name: "Empty", Value: String("")},
		{Name: "Long", Value: String(string(bytes.Repeat([]byte("x"), 70_000)))},
		{Name: "Age", Value: Int32(math.MinInt32)},
		{Name: "Max", Value: Int32(math.MaxInt32)},
		{Name: "Big", Value: Int64(math.MinInt64)},
		{Name: "Pos", Value: Int64(1<<62 + 1)},
		{Name: "Pi", Value: Double(math.Pi)},
		{Name: "NaN", Value: Double(math.NaN())},
		{Name: "Inf", Value: Double(math.Inf(-1))},
		{Name: "Active", Value: Bool(true)},
		{Name: "Off", Value: Bool(false)},
		{Name: "Hired", Value: DateTime(time.Date(2012, 3, 1, 9, 0, 0, 0, time.UTC))},
		{Name: "Id", Value: Guid([16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})},
		{Name: "Photo", Value: Binary([]byte{0, 1, 0xfe, 0xff})},
		{Name: "None", Value: Binary(nil)},
		{Name: string(bytes.Repeat([]byte("n"), 255)), Value: String(string(bytes.Repeat([]byte("v"), 256)))},
	}
	sorted := slices.Clone(all)
	(&Entity{Properties: sorted}).sortProperties()
	return [][]Property{nil, {}, all[:1], all, sorted}
}

func encodeProps(t testing.TB, props []Property) []byte {
	var buf bytes.Buffer
	if err := EncodeProperties(msgpack.NewEncoder(&buf), props); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// decodeWithDecoder is the reference: DecodeProperties over msgpack's
// Decoder, and the bytes it read.
func decodeWithDecoder(data []byte) ([]Property, int, error) {
	r := bytes.NewReader(data)
	props, err := DecodeProperties(msgpack.NewDecoder(r))
	return props, len(data) - r.Len(), err
}

func sameProps(a, b []Property) bool {
	return len(a) == len(b) && slices.Equal(a, b)
}

func TestDecodePropertiesString(t *testing.T) {
	for i, props := range propTextSamples() {
		data := encodeProps(t, props)
		want, _, err := decodeWithDecoder(data)
		if err != nil {
			t.Fatal(err)
		}
		// Bytes after the list are left alone.
		more := append(slices.Clone(data), 0x93, 0xc0)
		n, err := PropertiesLen(more)
		if err != nil || n != len(data) {
			t.Fatalf("sample %d: PropertiesLen = %d, %v; want %d", i, n, err, len(data))
		}
		for name, decode := range map[string]func([]byte) ([]Property, int, error){
			"string": func(b []byte) ([]Property, int, error) { return DecodePropertiesString(string(b)) },
			"bytes":  DecodePropertiesBytes,
		} {
			got, n, err := decode(more)
			if err != nil || n != len(data) || !sameProps(got, want) {
				t.Fatalf("sample %d, %s: %d bytes of %d, %v\ngot  %v\nwant %v", i, name, n, len(data), err, got, want)
			}
		}
	}
}

// TestDecodePropertiesStringAllocs: a list's names and values cost no
// allocation of their own, only its slice.
func TestDecodePropertiesStringAllocs(t *testing.T) {
	s := string(encodeProps(t, propTextSamples()[4]))
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := DecodePropertiesString(s); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 1 {
		t.Fatalf("%v allocations, want 1 (the slice)", allocs)
	}
	b := []byte(s)
	if allocs := testing.AllocsPerRun(100, func() { _, _ = PropertiesLen(b) }); allocs != 0 {
		t.Fatalf("PropertiesLen: %v allocations, want 0", allocs)
	}
}

// TestDecodePropertiesStringLeniency: the encodings msgpack's Decoder
// accepts beyond what EncodeProperties writes are accepted alike: nil for
// an empty string, zero and false, bin for str, wide and signed integer
// codes, float32 for a Double, a type number truncated to 8 bits.
func TestDecodePropertiesStringLeniency(t *testing.T) {
	for _, data := range [][]byte{
		{0xc0},                         // nil list
		{0x91, 0x93, 0xc0, 0x01, 0xc0}, // nil name and string
		{0x91, 0x93, 0xc4, 0x01, 'A', 0x01, 0xc4, 0x01, 'b'},           // bin name and string
		{0x91, 0x93, 0xa1, 'A', 0xd0, 0x02, 0xd0, 0xff},                // int8 type number and value
		{0x91, 0x93, 0xa1, 'A', 0xcd, 0x01, 0x02, 0xd2, 0x80, 0, 0, 0}, // type 258 is 2
		{0x91, 0x93, 0xa1, 'A', 0x03, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{0x91, 0x93, 0xa1, 'A', 0x04, 0xca, 0x3f, 0x80, 0, 0},            // float32 1
		{0x91, 0x93, 0xa1, 'A', 0x04, 0x05},                              // fixint 5 as a Double
		{0x91, 0x93, 0xa1, 'A', 0x05, 0xc0},                              // nil as false
		{0x92, 0x93, 0xa1, 'B', 0x05, 0xc3, 0x93, 0xa1, 'A', 0x06, 0xc0}, // unsorted
	} {
		want, wantN, err := decodeWithDecoder(data)
		if err != nil {
			t.Fatalf("%x: reference: %v", data, err)
		}
		got, n, err := DecodePropertiesString(string(data))
		if err != nil || n != wantN || !sameProps(got, want) {
			t.Fatalf("%x: %v, %d bytes, %v; want %v, %d bytes", data, got, n, err, want, wantN)
		}
	}
}

// TestDecodePropertiesStringRefusals: what the reference refuses is
// refused, before a hostile length is allocated.
func TestDecodePropertiesStringRefusals(t *testing.T) {
	for _, data := range [][]byte{
		{},
		{0xdd, 0x00, 0x01, 0x00, 0x00},      // 65,536 properties in no bytes
		{0xdd, 0xff, 0xff, 0xff, 0xff},      // more than maxDecodeProperties
		{0x91, 0x92, 0xa1, 'A', 0x01},       // a pair
		{0x91, 0x93, 0xa1, 'A', 0x09, 0x00}, // unknown type
		{0x91, 0x93, 0xa1, 'A', 0x02, 0xce, 0x80, 0, 0, 0}, // Int32 out of range
		{0x91, 0x93, 0xa1, 'A', 0x07, 0xc4, 0x02, 1, 2},    // a Guid of 2 bytes
		{0x91, 0x93, 0xa1, 'A', 0x07, 0xc0},                // a nil Guid
		{0x91, 0x93, 0xa1, 'B', 0x08, 0xc6, 0xff, 0xff, 0xff, 0xf0},
		{0x91, 0x93, 0xa1, 'B', 0x01, 0xdb, 0xff, 0xff, 0xff, 0xf0},
		{0x91, 0x93, 0xa1, 'A', 0x05, 0x01},      // 1 as a bool
		{0x91, 0x93, 0xa1, 'A', 0x04, 0xa1, '1'}, // a string as a Double
		{0x91, 0x93, 0x01, 0x01, 0xa1, 'a'},      // a number as a name
		{0x91, 0x93, 0xa3, 'A'},                  // short name
	} {
		if _, _, err := decodeWithDecoder(data); err == nil {
			t.Fatalf("%x: the reference accepts it", data)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, err := DecodePropertiesString(string(data))
		_, lenErr := PropertiesLen(data)
		runtime.ReadMemStats(&after)
		if err == nil || lenErr == nil || after.TotalAlloc-before.TotalAlloc > 1<<16 {
			t.Fatalf("%x: %v, %v after allocating %d bytes", data, err, lenErr, after.TotalAlloc-before.TotalAlloc)
		}
	}
}

// FuzzDecodePropertiesString holds the reader to DecodeProperties over
// msgpack's Decoder: the same lists from the same bytes, the same
// refusals.
func FuzzDecodePropertiesString(f *testing.F) {
	for _, props := range propTextSamples()[:3] {
		f.Add(encodeProps(f, props))
	}
	f.Add(encodeProps(f, slices.DeleteFunc(slices.Clone(propTextSamples()[3]), func(p Property) bool { return p.Value.Len() > 1000 })))
	f.Add([]byte{0x92, 0x93, 0xa1, 'B', 0x05, 0xc3, 0x93, 0xc4, 0x01, 'A', 0xd0, 0x06, 0xc0})
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantN, wantErr := decodeWithDecoder(data)
		got, n, err := DecodePropertiesString(string(data))
		gotB, nB, errB := DecodePropertiesBytes(data)
		m, lenErr := PropertiesLen(data)
		if (err == nil) != (wantErr == nil) || (errB == nil) != (wantErr == nil) || (lenErr == nil) != (wantErr == nil) {
			t.Fatalf("%x: errors %v, %v, %v; the reference's %v", data, err, errB, lenErr, wantErr)
		}
		if wantErr != nil {
			return
		}
		if n != wantN || nB != wantN || m != wantN || !sameProps(got, want) || !sameProps(gotB, want) {
			t.Fatalf("%x: %v (%d bytes), %v (%d), len %d; want %v (%d)", data, got, n, gotB, nB, m, want, wantN)
		}
	})
}

// plainWriter takes bytes only, not strings.
type plainWriter struct{ b []byte }

func (w *plainWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// TestEncodePropertiesStringWriter: Guid and Binary values written as
// strings, where the writer takes them, are the bytes EncodeBytes writes.
func TestEncodePropertiesStringWriter(t *testing.T) {
	for _, props := range propTextSamples() {
		var viaString bytes.Buffer // an io.StringWriter
		var plain plainWriter
		if err := EncodeProperties(msgpack.NewEncoder(&viaString), props); err != nil {
			t.Fatal(err)
		}
		if err := EncodeProperties(msgpack.NewEncoder(&plain), props); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(viaString.Bytes(), plain.b) {
			t.Fatalf("%v: the string writer's bytes differ", props)
		}
	}
	// An empty Binary is an empty bin, never nil.
	var buf bytes.Buffer
	if err := EncodeProperties(msgpack.NewEncoder(&buf), []Property{{Name: "B", Value: Binary(nil)}}); err != nil {
		t.Fatal(err)
	}
	if want := []byte{0x91, 0x93, 0xa1, 'B', 0xcc, 0x08, 0xc4, 0x00}; !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("%x, want %x", buf.Bytes(), want)
	}
}
