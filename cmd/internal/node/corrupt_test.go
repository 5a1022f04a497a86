package node_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// TestUndecodableRecord puts a record no version of Cairn can decode into a
// table's journal. That table's view stops (it never skips history), its
// commands and reads fail with a message that says so, and the host keeps
// serving every other table.
func TestUndecodableRecord(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	bad, err := th.c.CreateTable(ctx, "Bad")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.c.CreateTable(ctx, "Good"); err != nil {
		t.Fatal(err)
	}
	if _, err := th.c.Insert(ctx, "Bad", engine.NewEntity("p", "1")); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(th.nc)
	j, _ := journal.New(th.nc, journal.Config{})
	if _, err := js.Publish(ctx, j.PartitionSubject("Bad", bad.Epoch, "p"), []byte{0x81, 0xa1, 'v', 0x09}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		tv, _ := th.h.Views().Table("Bad")
		if tv.Err() != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the view did not stop on an undecodable record")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err = th.c.Insert(ctx, "Bad", engine.NewEntity("p", "2"))
	if e := wantCode(t, err, engine.CodeInternalError); !strings.Contains(e.Message, "stopped") {
		t.Fatalf("message %q does not say the view stopped", e.Message)
	}
	_, _, err = th.c.Retrieve(ctx, "Bad", "p", "1")
	wantCode(t, err, engine.CodeInternalError)
	if _, err := th.c.Insert(ctx, "Good", engine.NewEntity("p", "1")); err != nil {
		t.Fatalf("another table stopped working: %v", err)
	}
}
