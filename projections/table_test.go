package projections

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

func putRec(ts int64, pk string, rks ...string) *engine.Record {
	r := &engine.Record{Time: ts, PartitionKey: pk}
	for _, rk := range rks {
		r.Events = append(r.Events, engine.Event{Kind: engine.EventPut, RowKey: rk,
			Properties: []engine.Property{{Name: "V", Value: engine.String(rk)}}})
	}
	return r
}

// TestTableAgainstModel applies random records to a view and to a plain map
// and compares them in key order, and checks that every snapshot stays what
// it was when it was published.
func TestTableAgainstModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	tb := NewTable("T", 1, 0)
	model := map[[2]string]engine.Version{}
	type frozen struct {
		snap *Snapshot
		keys [][2]string
	}
	var snaps []frozen
	pks := []string{"", "a", "b", "ü"}
	for seq := uint64(1); seq <= 3000; seq++ {
		pk := pks[r.IntN(len(pks))]
		rec := &engine.Record{Time: int64(seq), PartitionKey: pk}
		for i := r.IntN(4); i >= 0; i-- {
			rk := fmt.Sprintf("%03d", r.IntN(50))
			if r.IntN(3) == 0 {
				rec.Events = append(rec.Events, engine.Event{Kind: engine.EventDelete, RowKey: rk})
				delete(model, [2]string{pk, rk})
			} else {
				rec.Events = append(rec.Events, engine.Event{Kind: engine.EventPut, RowKey: rk})
				model[[2]string{pk, rk}] = engine.Version{Seq: seq, Index: uint32(len(rec.Events) - 1)}
			}
		}
		tb.Apply(seq, rec)
		tb.Apply(seq, rec) // a redelivered record is ignored
		if r.IntN(50) == 0 {
			tb.Publish()
			snaps = append(snaps, frozen{tb.Snapshot(), sortedKeys(model)})
		}
	}
	tb.Publish()
	snaps = append(snaps, frozen{tb.Snapshot(), sortedKeys(model)})
	for _, f := range snaps {
		var got [][2]string
		f.snap.Scan(func(e *engine.Entity) bool { got = append(got, [2]string{e.PartitionKey, e.RowKey}); return true })
		if fmt.Sprint(got) != fmt.Sprint(f.keys) {
			t.Fatalf("snapshot at %d: %d keys, model had %d", f.snap.Seq, len(got), len(f.keys))
		}
	}
	last := tb.Snapshot()
	for k, v := range model {
		e, ok := last.Get(k[0], k[1])
		if !ok || e.Version != v {
			t.Fatalf("%v: got %+v, want version %+v", k, e, v)
		}
	}
	n := int64(0)
	last.Partitions(func(p Partition) bool { n += p.Entities; return true })
	if n != int64(len(model)) {
		t.Fatalf("partition entity counts sum to %d, want %d", n, len(model))
	}
}

func sortedKeys(m map[[2]string]engine.Version) [][2]string {
	var ks [][2]string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if ks[i][0] != ks[j][0] {
			return ks[i][0] < ks[j][0]
		}
		return ks[i][1] < ks[j][1]
	})
	return ks
}

func TestCommandIDsExpireInJournalTime(t *testing.T) {
	tb := NewTable("T", 1, time.Minute)
	minute := int64(time.Minute / 100)
	rec := putRec(0, "p", "1")
	rec.Commands = []engine.CommandRef{{ID: "c1", Count: 1}, {ID: "", Count: 1}}
	tb.Apply(1, rec)
	tb.Apply(2, putRec(minute, "p", "2"))
	tb.Publish()
	if c, ok := tb.Snapshot().Command("p", "c1"); !ok || c.Seq != 1 {
		t.Fatalf("id within the window: %+v %v", c, ok)
	}
	if _, ok := tb.Snapshot().Command("q", "c1"); ok {
		t.Fatal("ids are per partition")
	}
	tb.Apply(3, putRec(minute+1, "p", "3"))
	tb.Publish()
	if _, ok := tb.Snapshot().Command("p", "c1"); ok {
		t.Fatal("id outside the window is still remembered")
	}
}

func TestWaitSeq(t *testing.T) {
	tb := NewTable("T", 1, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan *Snapshot)
	go func() {
		s, err := tb.WaitSeq(ctx, 2)
		if err != nil {
			t.Error(err)
		}
		done <- s
	}()
	tb.Apply(1, putRec(1, "p", "a"))
	tb.Publish()
	tb.Apply(2, putRec(2, "p", "b"))
	tb.Publish()
	if s := <-done; s.Seq != 2 || s.Len() != 2 {
		t.Fatalf("woke at %d with %d entities", s.Seq, s.Len())
	}
	tb.Fail(fmt.Errorf("boom"))
	if _, err := tb.WaitSeq(ctx, 3); err == nil {
		t.Fatal("WaitSeq on a failed view returned no error")
	}
}
