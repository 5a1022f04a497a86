package values_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal/jstest"
	"github.com/cairn-dev/cairn/journal/values"
)

func open(t *testing.T) (*values.Store, *nats.Conn) {
	t.Helper()
	_, nc := jstest.Server(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := values.Open(context.Background(), js, "cairn", 1)
	if err != nil {
		t.Fatal(err)
	}
	return s, nc
}

// streamBytes is how many bytes the bucket's stream holds.
func streamBytes(t *testing.T, nc *nats.Conn) uint64 {
	t.Helper()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(context.Background(), "OBJ_"+values.Bucket("cairn"))
	if err != nil {
		t.Fatal(err)
	}
	si, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return si.State.Bytes
}

func TestPutOpenDelete(t *testing.T) {
	s, nc := open(t)
	ctx := context.Background()
	k := values.Key{Account: "devstoreaccount1", Table: "Employees", PartitionKey: strings.Repeat("p", 1024), RowKey: "r/\x01"}
	data := make([]byte, 3<<20+17)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	now := time.Now()
	in, err := s.Put(ctx, k, bytes.NewReader(data), 0, now)
	if err != nil {
		t.Fatal(err)
	}
	if in.Size != uint64(len(data)) || !in.Uploaded.Equal(now.UTC()) || in.Key != k || in.Name != k.Name(in.ID) {
		t.Fatalf("Put = %+v", in)
	}
	got, err := s.Info(ctx, k, in.ID)
	if err != nil || got != in {
		t.Fatalf("Info = %+v, %v; want %+v", got, err, in)
	}
	if got, err := s.Stat(ctx, in.Name); err != nil || got != in {
		t.Fatalf("Stat = %+v, %v; want %+v", got, err, in)
	}
	rc, oi, err := s.Open(ctx, k, in.ID)
	if err != nil || oi != in {
		t.Fatalf("Open = %+v, %v", oi, err)
	}
	back, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("read back %d bytes (%v), want the %d put", len(back), err, len(data))
	}
	// Another entity's keys name nothing.
	other := k
	other.RowKey = "other"
	if _, err := s.Info(ctx, other, in.ID); !errors.Is(err, values.ErrNotFound) {
		t.Fatalf("Info under other keys = %v", err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0] != in {
		t.Fatalf("List = %+v, %v", list, err)
	}
	for range 2 { // idempotent
		if err := s.Delete(ctx, in.Name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Info(ctx, k, in.ID); !errors.Is(err, values.ErrNotFound) {
		t.Fatalf("Info after Delete = %v", err)
	}
	if _, _, err := s.Open(ctx, k, in.ID); !errors.Is(err, values.ErrNotFound) {
		t.Fatalf("Open after Delete = %v", err)
	}
	if list, err := s.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List after Delete = %+v, %v", list, err)
	}
	if b := streamBytes(t, nc); b != 0 {
		t.Fatalf("the stream holds %d bytes after the delete: want nothing left, the description included", b)
	}
}

// failing gives n bytes, then fails as a body cut short does.
type failing struct{ n int }

func (f *failing) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := min(len(p), f.n)
	f.n -= n
	return n, nil
}

func TestPutRefusedLeavesNothing(t *testing.T) {
	s, nc := open(t)
	ctx := context.Background()
	k := values.Key{Account: "a", Table: "T", PartitionKey: "p", RowKey: "r"}
	// At the limit: taken; one byte past it: refused.
	if _, err := s.Put(ctx, k, bytes.NewReader(make([]byte, 1000)), 1000, time.Now()); err != nil {
		t.Fatal(err)
	}
	before := streamBytes(t, nc)
	_, err := s.Put(ctx, k, bytes.NewReader(make([]byte, 1<<20)), 1<<20-1, time.Now())
	if engine.ErrorCode(err) != engine.CodeRequestBodyTooLarge {
		t.Fatalf("Put past the limit = %v", err)
	}
	if _, err := s.Put(ctx, k, &failing{n: 300 << 10}, 0, time.Now()); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Put of a body cut short = %v", err)
	}
	if after := streamBytes(t, nc); after != before {
		t.Fatalf("the stream went from %d to %d bytes with two refused puts", before, after)
	}
	if list, _ := s.List(ctx); len(list) != 1 {
		t.Fatalf("List = %+v", list)
	}
}

// TestOrphans: chunks that no object names (a Put killed before its
// description) are purged once idle, and no others.
func TestOrphans(t *testing.T) {
	s, nc := open(t)
	ctx := context.Background()
	k := values.Key{Account: "a", Table: "T", PartitionKey: "p", RowKey: "r"}
	kept, err := s.Put(ctx, k, bytes.NewReader(make([]byte, 200<<10)), 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// What a killed Put leaves: chunks on a subject of their own.
	js, _ := jetstream.New(nc)
	for range 3 {
		if _, err := js.Publish(ctx, "$O."+values.Bucket("cairn")+".C.killedput", make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Orphans(ctx, time.Minute, time.Now()); err != nil || n != 0 {
		t.Fatalf("Orphans of recent chunks = %d, %v; want them kept", n, err)
	}
	if n, err := s.Orphans(ctx, time.Minute, time.Now().Add(2*time.Minute)); err != nil || n != 1 {
		t.Fatalf("Orphans = %d, %v; want the killed put's chunks", n, err)
	}
	if n, err := s.Orphans(ctx, time.Minute, time.Now().Add(2*time.Minute)); err != nil || n != 0 {
		t.Fatalf("Orphans again = %d, %v", n, err)
	}
	rc, _, err := s.Open(ctx, k, kept.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(rc); err != nil || len(b) != 200<<10 {
		t.Fatalf("the named value after Orphans: %d bytes, %v", len(b), err)
	}
	rc.Close()
}

// TestConcurrentPutsPaced: puts running at once, together past what the
// server takes into a stream's queue (128 MiB), all store their values
// whole, sharing one wait. (On a disk that keeps up, as here, nothing
// queues: the test shows the shared wait lets every put through, not
// that it bounds a slow server's queue.)
func TestConcurrentPutsPaced(t *testing.T) {
	if testing.Short() {
		t.Skip("stores 192 MiB")
	}
	s, _ := open(t)
	ctx := context.Background()
	const puts, size = 4, 48 << 20
	var wg sync.WaitGroup
	errs := make([]error, puts)
	for i := range puts {
		wg.Go(func() {
			k := values.Key{Account: "devstoreaccount1", Table: "Photos", PartitionKey: "p", RowKey: strconv.Itoa(i)}
			body := io.LimitReader(zeros{}, size)
			in, err := s.Put(ctx, k, body, size, time.Now())
			if err == nil && in.Size != size {
				err = fmt.Errorf("stored %d bytes", in.Size)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("put %d: %v", i, err)
		}
	}
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
