package commit_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nuid"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/commit"
)

// TestAppliedAtAcknowledgement: while another writer appends to the same
// table (records this host's view learns of only by their delivery),
// the committer's records are applied at their acknowledgement when the
// view stands right before them, and by their delivery otherwise. Every
// reply is visible in the view when it is answered; at the end the view
// holds every record of both writers exactly once, in the journal's
// order.
func TestAppliedAtAcknowledgement(t *testing.T) {
	r := newRig(t)
	c := r.committer(t, r.j)
	info, err := c.CreateTable(r.ctx, "Acks")
	if err != nil {
		t.Fatal(err)
	}
	tv, _ := r.views.Table("Acks")
	// Writes in rounds until one of this host's records was applied at its
	// acknowledgement (in the first round, as a rule): whether the
	// acknowledgement or the delivery comes first is the server's race.
	const foreign, writers, each = 100, 4, 50
	rounds := 0
	for ; rounds < 20 && tv.AppliedAtAck() == 0; rounds++ {
		round(t, r, c, info, rounds, foreign, writers, each)
	}
	if t.Failed() {
		return
	}
	last, err := r.j.LastStreamSeq(r.ctx, "Acks", info.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tv.WaitSeq(r.ctx, last)
	if err != nil {
		t.Fatal(err)
	}
	if s.Seq != last || s.Len() != rounds*(foreign+writers*each) {
		t.Fatalf("the view is at %d with %d entities; the journal ends at %d with %d records", s.Seq, s.Len(), last, rounds*(foreign+writers*each))
	}
	for i := range rounds * foreign {
		if e, ok := s.Get(fmt.Sprintf("f%d-%d", i/foreign, i%foreign%10), fmt.Sprint(i)); !ok || e.Version.Seq == 0 {
			t.Fatalf("the other writer's entity %d is missing: %v", i, e)
		}
	}
	// Every record applied once, in order: each partition's last record
	// is the journal's.
	for p := range 20 {
		pk := fmt.Sprintf("l%d", p)
		got, err := r.j.LastSeq(r.ctx, "Acks", info.Epoch, info.Shards, pk)
		if err != nil {
			t.Fatal(err)
		}
		if want := s.Partition(pk).LastSeq; got != want {
			t.Fatalf("partition %s: the view's last record is %d, the journal's %d", pk, want, got)
		}
	}
	if tv.AppliedAtAck() == 0 {
		t.Fatalf("none of %d records of this host was applied at its acknowledgement", rounds*writers*each)
	}
	t.Logf("%d rounds; %d of %d records of this host applied at their acknowledgement", rounds, tv.AppliedAtAck(), rounds*writers*each)
}

// round writes foreign records from another writer beside writers×each
// inserts through c, all at once, checking that each insert is visible
// when it is answered; n numbers the round.
func round(t *testing.T, r *rig, c *commit.Committer, info engine.TableInfo, n, foreign, writers, each int) {
	t.Helper()
	tv, _ := r.views.Table("Acks")
	var wg sync.WaitGroup
	// Another host: its own partitions, its own expected sequences.
	wg.Go(func() {
		last := map[string]uint64{}
		for k := range foreign {
			i := n*foreign + k
			pk := fmt.Sprintf("f%d-%d", n, k%10) // partitions of this round
			rec := &engine.Record{Time: engine.TimeToTicks(time.Now()), PartitionKey: pk, Nonce: nuid.Next(),
				Commands: []engine.CommandRef{{ID: fmt.Sprintf("foreign-%d", i), Count: 1}},
				Events: []engine.Event{{Kind: engine.EventPut, RowKey: fmt.Sprint(i),
					Properties: []engine.Property{{Name: "N", Value: engine.Int64(int64(i))}}}}}
			seq, err := r.j.Append(r.ctx, "Acks", info.Epoch, info.Shards, rec, last[pk])
			if err != nil {
				t.Errorf("foreign append %d: %v", i, err)
				return
			}
			last[pk] = seq
		}
	})
	for w := range writers {
		wg.Go(func() {
			for k := range each {
				i := n*each + k
				pk, rk := fmt.Sprintf("l%d", (w*each+k)%20), fmt.Sprintf("%d-%d", w, i)
				rep := submit(c, &engine.Command{Table: "Acks", Ops: []engine.Operation{{Op: engine.OpInsert,
					Entity: engine.NewEntity(pk, rk, engine.Property{Name: "N", Value: engine.Int64(int64(i))})}}})
				if rep.Error != nil {
					t.Errorf("insert %s/%s: %v", pk, rk, rep.Error)
					return
				}
				// Answered once visible on this host.
				if s := tv.Snapshot(); s.Seq < rep.Seq {
					t.Errorf("insert %s/%s answered at %d, the view shows %d", pk, rk, rep.Seq, s.Seq)
				} else if e, ok := s.Get(pk, rk); !ok || engine.ETag(info.Epoch, e.Version) != rep.ETag {
					t.Errorf("insert %s/%s: the view holds %v after the reply (ETag %s)", pk, rk, e, rep.ETag)
				}
			}
		})
	}
	wg.Wait()
}
