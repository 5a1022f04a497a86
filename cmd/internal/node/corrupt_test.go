package node_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// TestUndecodableRecord puts a record no version of Cairn can decode into a
// table's journal. That table is faulted (its view never skips history):
// its commands and reads fail with TableFaulted naming the record, and the
// host keeps serving every other table.
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
	ack, err := js.Publish(ctx, j.PartitionSubject("Bad", bad.Epoch, engine.DefaultShards, "p"), []byte{0x81, 0xa1, 'v', 0x09})
	if err != nil {
		t.Fatal(err)
	}
	tv, _ := th.h.Views().Table("Bad")
	if _, err := tv.WaitSeq(ctx, ack.Sequence); engine.ErrorCode(err) != engine.CodeTableFaulted {
		t.Fatalf("the view did not fault on an undecodable record: %v", err)
	}
	_, err = th.c.Insert(ctx, "Bad", engine.NewEntity("p", "2"))
	if e := wantCode(t, err, engine.CodeTableFaulted); !strings.Contains(e.Message, fmt.Sprint("record ", ack.Sequence)) {
		t.Fatalf("message %q does not name the record", e.Message)
	}
	_, _, err = th.c.Retrieve(ctx, "Bad", "p", "1")
	wantCode(t, err, engine.CodeTableFaulted)
	if _, err := th.c.Insert(ctx, "Good", engine.NewEntity("p", "1")); err != nil {
		t.Fatalf("another table stopped working: %v", err)
	}
}
