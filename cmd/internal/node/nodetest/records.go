package nodetest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
)

// Records returns every record of a table's journal, in order, read from
// its stream as the node user and decoded with journal.DecodeRecord;
// table is the full name (engine.FullTableName). A table without a view
// on h, or a record that does not decode, fails the test.
func Records(t testing.TB, h *node.Node, table string) []*engine.Record {
	t.Helper()
	view, ok := h.Views().Table(table)
	if !ok {
		t.Fatalf("no table %s on the node", table)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(Connect(t, h))
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, journal.StreamName("cairn", table, view.Epoch()))
	if err != nil {
		t.Fatalf("stream of %s: %v", table, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*engine.Record
	for seq := info.State.FirstSeq; seq != 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("record %d of %s: %v", seq, table, err)
		}
		r, err := journal.DecodeRecord(m.Data)
		if err != nil {
			t.Fatalf("record %d of %s: %v", seq, table, err)
		}
		out = append(out, r)
	}
	return out
}
