package node_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/examples/tablecopy/copier"
)

// TestTableCopyFollows runs the example consumer (examples/tablecopy)
// against a node while the table is written: inserts, replaces, merges,
// upserts, deletes and batches over a few partitions. Once the copy has
// passed the last write's position it must equal the table, entity for
// entity, ETags included; saved to a file and loaded again, it still does,
// and a consumer restarted from the file goes on from there.
func TestTableCopyFollows(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	if _, err := th.c.CreateTable(ctx, "Source"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "Source.json")
	reached := make(chan uint64, 1024)
	follow := func(c *copier.Copy) (stop func() *copier.Copy) {
		fctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- copier.Follow(fctx, client.New(th.nc, client.WithTimeout(20*time.Second)), "Source", c, func(c *copier.Copy) error {
				if err := copier.Save(path, c); err != nil {
					return err
				}
				reached <- c.Next
				return nil
			})
		}()
		return func() *copier.Copy {
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("the copier stopped: %v", err)
			}
			return c
		}
	}
	waitFor := func(seq uint64) {
		t.Helper()
		for {
			select {
			case next := <-reached:
				if next > seq {
					return
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("the copy did not pass position %d", seq)
			}
		}
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	var last uint64
	write := func(n int) {
		t.Helper()
		for range n {
			pk, rk := fmt.Sprint("p", r.IntN(3)), fmt.Sprint("r", r.IntN(8))
			e := engine.NewEntity(pk, rk, engine.Property{Name: "N", Value: engine.Int64(r.Int64())})
			if r.IntN(2) == 0 {
				e.Properties = append(e.Properties, engine.Property{Name: "S", Value: engine.String(fmt.Sprint(r.IntN(100)))})
			}
			var rep *engine.Reply
			var err error
			switch r.IntN(6) {
			case 0:
				rep, err = th.c.Insert(ctx, "Source", e)
			case 1:
				rep, err = th.c.Replace(ctx, "Source", e, "*")
			case 2:
				rep, err = th.c.Merge(ctx, "Source", engine.NewEntity(pk, rk, engine.Property{Name: "M", Value: engine.Bool(true)}), "*")
			case 3:
				rep, err = th.c.InsertOrMerge(ctx, "Source", e)
			case 4:
				rep, err = th.c.Delete(ctx, "Source", pk, rk, "*")
			case 5:
				rep, err = th.c.Batch(ctx, "Source", []engine.Operation{
					{Op: engine.OpInsertOrReplace, Entity: e},
					{Op: engine.OpInsertOrMerge, Entity: engine.NewEntity(pk, rk+"-b", engine.Property{Name: "B", Value: engine.Int32(1)})},
				})
			}
			if err != nil {
				if c := engine.ErrorCode(err); c == engine.CodeEntityAlreadyExists || c == engine.CodeResourceNotFound {
					continue // the model of a user who guessed wrong
				}
				t.Fatal(err)
			}
			last = max(last, rep.Seq)
		}
	}
	check := func(c *copier.Copy) {
		t.Helper()
		tv, _ := th.h.Views().Table("Source")
		snap := tv.Snapshot()
		n := 0
		snap.Scan(func(e *engine.Entity) bool {
			n++
			got, ok := c.Entities[copier.Key{PartitionKey: e.PartitionKey, RowKey: e.RowKey}]
			if !ok {
				t.Fatalf("(%q, %q) is not in the copy", e.PartitionKey, e.RowKey)
			}
			if got.ETag != engine.ETag(tv.Epoch(), e.Version) || got.Entity.Timestamp != e.Timestamp || len(got.Entity.Properties) != len(e.Properties) {
				t.Fatalf("(%q, %q): copy %s %+v, table %s %+v", e.PartitionKey, e.RowKey, got.ETag, got.Entity, engine.ETag(tv.Epoch(), e.Version), e)
			}
			for i, p := range e.Properties {
				if q := got.Entity.Properties[i]; q.Name != p.Name || !q.Value.Equal(p.Value) {
					t.Fatalf("(%q, %q) property %d: copy %v, table %v", e.PartitionKey, e.RowKey, i, q, p)
				}
			}
			return true
		})
		if n != len(c.Entities) {
			t.Fatalf("the copy has %d entities, the table %d", len(c.Entities), n)
		}
	}

	stop := follow(copier.New())
	write(150)
	waitFor(last)
	c := stop()
	check(c)

	// Saved and loaded, the copy is the same and goes on from its position.
	loaded, err := copier.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	check(loaded)
	if loaded.Next != c.Next {
		t.Fatalf("loaded at %d, saved at %d", loaded.Next, c.Next)
	}
	write(50)
	stop = follow(loaded)
	waitFor(last)
	check(stop())
}
