package node_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/journal"
)

// TestChangeTriggerPreviousState: a function on a table's changes gets
// each entity's previous ETag and previous state: none for an insert, the
// state the replace, merge and delete found, the earlier write of the same
// record in a group commit, and "unknown" for a record written before
// previous versions were recorded.
func TestChangeTriggerPreviousState(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	mustTable(t, th.c, "Items", "Seen")
	fr := th.h.Functions()
	if err := fr.Register(functions.Manifest{Name: "seen", Trigger: functions.Trigger{Table: "Items"}}, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		ch := inv.Trigger().Change
		prev := "none"
		if ch.PrevUnknown {
			prev = "unknown"
		}
		if ch.Prev != nil && ch.Prev.Entity != nil {
			var props []string
			for _, p := range ch.Prev.Properties {
				props = append(props, fmt.Sprintf("%s=%d", p.Name, p.Value.Int()))
			}
			prev = strings.Join(props, ",")
			if _, v, err := engine.ParseETag(ch.PrevETag); err != nil || ch.Prev.ETag != ch.PrevETag || v != ch.Prev.Version {
				return fmt.Errorf("previous entity's ETag %s at %v, change's %s", ch.Prev.ETag, ch.Prev.Version, ch.PrevETag)
			}
		}
		return inv.Write(ctx, "Seen", engine.Operation{Op: engine.OpInsert, Entity: engine.NewEntity("s", fmt.Sprintf("%020d-%d", ch.Seq, ch.Index),
			engine.Property{Name: "Prev", Value: engine.String(prev)}, engine.Property{Name: "PrevETag", Value: engine.String(ch.PrevETag)})})
	})); err != nil {
		t.Fatal(err)
	}
	ins, err := th.c.Insert(ctx, "Items", engine.NewEntity("p", "1", engine.Property{Name: "N", Value: engine.Int32(1)}))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := th.c.Replace(ctx, "Items", engine.NewEntity("p", "1", engine.Property{Name: "N", Value: engine.Int32(2)}), ins.ETag)
	if err != nil {
		t.Fatal(err)
	}
	mer, err := th.c.Merge(ctx, "Items", engine.NewEntity("p", "1", engine.Property{Name: "M", Value: engine.Int32(3)}), "*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.c.Delete(ctx, "Items", "p", "1", "*"); err != nil {
		t.Fatal(err)
	}
	// A record as a host before previous versions wrote it, and one of a
	// group commit that writes one entity twice, appended as the committer
	// would.
	items, _ := th.h.Views().Table("Items")
	j, err := journal.New(th.nc, journal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	put := func(rk string, n int32) engine.Event {
		return engine.Event{Kind: engine.EventPut, RowKey: rk, Properties: []engine.Property{{Name: "N", Value: engine.Int32(n)}}}
	}
	old, err := j.Append(ctx, "Items", items.Epoch(), items.Shards(), &engine.Record{Time: 1, PartitionKey: "q", Nonce: "old",
		Commands: []engine.CommandRef{{Count: 1}}, Events: []engine.Event{put("1", 7)}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	chained := []engine.Event{put("2", 8), put("2", 9)}
	chained[1].Prev = &engine.Version{Index: 0}
	group, err := j.Append(ctx, "Items", items.Epoch(), items.Shards(), &engine.Record{Time: 2, PartitionKey: "q", Nonce: "group", HasPrev: true,
		Commands: []engine.CommandRef{{Count: 1}, {First: 1, Count: 1}}, Events: chained}, old)
	if err != nil {
		t.Fatal(err)
	}
	seen, _ := th.h.Views().Table("Seen")
	eventually(t, 30*time.Second, "seven changes seen", func() bool { return seen.Snapshot().Len() == 7 })
	var got []string
	seen.Snapshot().Scan(func(e *engine.Entity) bool {
		p, _ := e.Get("Prev")
		pe, _ := e.Get("PrevETag")
		got = append(got, p.Str()+"@"+pe.Str())
		return true
	})
	want := []string{"none@", "N=1@" + ins.ETag, "N=2@" + rep.ETag, "M=3,N=2@" + mer.ETag,
		"unknown@", "none@", "N=8@" + engine.ETag(items.Epoch(), engine.Version{Seq: group, Index: 0})}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("previous states\n%s\nwant\n%s", strings.Join(got, " "), strings.Join(want, " "))
	}
}
