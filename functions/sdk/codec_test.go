package sdk

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/abi"
)

// The guest's codec must agree with abi.Marshal and abi.Unmarshal, which
// the runner uses. These tests run natively.

func randString(r *rand.Rand) string {
	n := []int{0, 1, 5, 31, 32, 200, 300, 70000}[r.IntN(8)]
	return strings.Repeat(string(rune('a'+r.IntN(26))), n)
}

func randBytes(r *rand.Rand) []byte {
	if r.IntN(4) == 0 {
		return nil
	}
	return []byte(randString(r))
}

func randInt(r *rand.Rand) int64 {
	return []int64{0, 1, -1, -32, -33, 127, 128, 255, 256, 65535, 65536, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64, r.Int64()}[r.IntN(16)]
}

func randEntity(r *rand.Rand) *engine.Entity {
	e := engine.NewEntity(randString(r), randString(r),
		engine.Property{Name: "S", Value: engine.String(randString(r))},
		engine.Property{Name: "I", Value: engine.Int64(randInt(r))},
		engine.Property{Name: "B", Value: engine.Binary(randBytes(r))},
		engine.Property{Name: "D", Value: engine.Double(r.Float64())},
	)
	e.Timestamp = r.Int64()
	return e
}

func randResponse(r *rand.Rand) abi.Response {
	var resp abi.Response
	if r.IntN(3) == 0 {
		resp.Error = &abi.Error{Code: randString(r), Message: randString(r)}
	}
	if r.IntN(2) == 0 {
		t := &abi.Trigger{ID: randString(r), Kind: randString(r), Function: randString(r), Version: int(randInt(r)),
			Queue: randString(r), Body: randBytes(r), DequeueCount: int(randInt(r)), Time: randInt(r)}
		if r.IntN(2) == 0 {
			t.Change = &abi.Change{Table: randString(r), Seq: uint64(randInt(r)), Index: int(randInt(r)), Deleted: r.IntN(2) == 0,
				Entity: abi.Entity{Entity: randEntity(r), ETag: randString(r)}, ETag: randString(r)}
			switch r.IntN(3) {
			case 0:
				t.Change.PrevUnknown = true
			case 1:
				t.Change.PrevETag = randString(r)
				t.Change.Prev = &abi.Entity{Entity: randEntity(r), ETag: t.Change.PrevETag}
			}
		}
		resp.Trigger = t
	}
	if r.IntN(3) == 0 {
		resp.Entity = &abi.Entity{Entity: randEntity(r), ETag: randString(r)}
	}
	if r.IntN(3) == 0 {
		v := randString(r)
		resp.Value = &v
	}
	for range r.IntN(3) {
		resp.Entities = append(resp.Entities, abi.Entity{Entity: randEntity(r), ETag: randString(r)})
	}
	return resp
}

func TestDecodeResponse(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range 500 {
		in := randResponse(r)
		b, err := abi.Marshal(&in)
		if err != nil {
			t.Fatal(err)
		}
		var want, got abi.Response
		if err := abi.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if err := decodeResponse(b, &got); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%d: decoded\n%#v\nwant\n%#v", i, got, want)
		}
	}
}

func TestDecodeResponseSkipsUnknownFields(t *testing.T) {
	in := abi.Response{Trigger: &abi.Trigger{ID: "1", Body: []byte("x")}}
	b, err := abi.Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	extra, err := msgpack.Marshal(map[string]any{"zz": []any{
		1, -5, 300, -300, 1 << 40, uint64(1 << 63), float32(1.5), 3.5, "s", strings.Repeat("x", 40), strings.Repeat("y", 300), []byte{1, 2},
		nil, true, false, map[string]any{"k": []any{}}, time.Unix(1e9, 5), map[string]any{}, make([]any, 20),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if b[0]&0xf0 != 0x80 || extra[0] != 0x81 {
		t.Fatalf("want fixmaps, got 0x%x 0x%x", b[0], extra[0])
	}
	// Put the extra key first, so that the known ones must be found after it.
	msg := append([]byte{b[0] + 1}, extra[1:]...)
	msg = append(msg, b[1:]...)
	var got abi.Response
	if err := decodeResponse(msg, &got); err != nil {
		t.Fatal(err)
	}
	if got.Trigger == nil || got.Trigger.ID != "1" || string(got.Trigger.Body) != "x" {
		t.Errorf("got %+v", got.Trigger)
	}
	for i := range msg {
		var r abi.Response
		if err := decodeResponse(msg[:i], &r); err == nil {
			t.Fatalf("prefix of %d bytes decoded without an error", i)
		}
	}
}

// randHeader is a header map of n names, each with 1 to most values of
// up to 40 bytes.
func randHeader(r *rand.Rand, n, most int) map[string][]string {
	h := make(map[string][]string, n)
	for len(h) < n {
		vs := make([]string, 1+r.IntN(most))
		for j := range vs {
			vs[j] = strings.Repeat("v", r.IntN(41))
		}
		h["X-"+strconv.Itoa(len(h))] = vs
	}
	return h
}

func TestEncodeRequest(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	// A reply's headers past the 16-bit lengths, once.
	wide := &abi.RespondRequest{Status: 200, Header: map[string][]string{"Many": make([]string, 70_000)}}
	for i := range 70_000 {
		wide.Header["H"+strconv.Itoa(i)] = []string{"v"}
	}
	for i := range 301 {
		reqs := []any{
			&abi.GetRequest{Table: randString(r), PartitionKey: randString(r), RowKey: randString(r)},
			&abi.QueryRequest{Table: randString(r), PartitionKey: randString(r), Filter: randString(r), Top: int(randInt(r))},
			&abi.EnqueueRequest{Queue: randString(r), Body: randBytes(r)},
			&abi.SettingRequest{Name: randString(r)},
			&abi.WriteRequest{Table: randString(r), Op: randString(r), Entity: abi.Entity{Entity: randEntity(r)}, IfMatch: randString(r)},
			&abi.RespondRequest{Status: int(r.IntN(600)), Header: randHeader(r, 1+r.IntN(40), 20)},
		}
		if i == 300 {
			reqs = []any{wide}
		}
		for _, req := range reqs {
			b, err := encodeRequest(req)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := abi.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			typ := reflect.TypeOf(req).Elem()
			got, want := reflect.New(typ).Interface(), reflect.New(typ).Interface()
			if err := abi.Unmarshal(b, got); err != nil {
				t.Fatalf("%d: %T: %v", i, req, err)
			}
			if err := abi.Unmarshal(ref, want); err != nil {
				t.Fatal(err)
			}
			if e, ok := got.(*abi.EnqueueRequest); ok && len(e.Body) == 0 {
				e.Body = want.(*abi.EnqueueRequest).Body // nil and empty are one
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%d: decoded\n%#v\nwant\n%#v", i, got, want)
			}
		}
	}
	if _, err := encodeRequest(42); err == nil {
		t.Error("encoded an int")
	}
}

func BenchmarkDecodeTrigger(b *testing.B) {
	msg, _ := abi.Marshal(&abi.Response{Trigger: &abi.Trigger{ID: "t-1", Kind: "invoke", Function: "echo", Version: 1, Body: []byte("x"), DequeueCount: 1}})
	for _, c := range []struct {
		name string
		dec  func([]byte, *abi.Response) error
	}{
		{"sdk", decodeResponse},
		{"reflect", func(b []byte, r *abi.Response) error { return abi.Unmarshal(b, r) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var r abi.Response
				if err := c.dec(msg, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
