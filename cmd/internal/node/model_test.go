package node_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
)

var (
	modelSeed  = flag.Uint64("model.seed", 0, "seed of TestModel (0: random)")
	modelSteps = flag.Int("model.steps", 3000, "commands in TestModel")
)

// modelRow is the model's entity: properties by name and the ETag the host
// gave it.
type modelRow struct {
	props map[string]engine.Value
	etag  string
}

// model is a plain map of the table; it implements SPEC §2 directly and
// independently of the engine.
type model map[[2]string]*modelRow

func (m model) clone() model {
	c := make(model, len(m))
	for k, v := range m {
		p := make(map[string]engine.Value, len(v.props))
		for n, x := range v.props {
			p[n] = x
		}
		c[k] = &modelRow{props: p, etag: v.etag}
	}
	return c
}

// apply applies one operation to m and returns the error code it must fail
// with ("" for success).
func (m model) apply(op engine.Operation) engine.Code {
	k := [2]string{op.Entity.PartitionKey, op.Entity.RowKey}
	cur, exists := m[k]
	props := func() map[string]engine.Value {
		p := map[string]engine.Value{}
		for _, x := range op.Entity.Properties {
			p[x.Name] = x.Value
		}
		return p
	}
	condOK := func() engine.Code {
		if !exists {
			return engine.CodeResourceNotFound
		}
		if op.IfMatch != "" && op.IfMatch != "*" && op.IfMatch != cur.etag {
			return engine.CodeUpdateConditionNotSatisfied
		}
		return ""
	}
	switch op.Op {
	case engine.OpInsert:
		if exists {
			return engine.CodeEntityAlreadyExists
		}
		m[k] = &modelRow{props: props()}
	case engine.OpReplace:
		if c := condOK(); c != "" {
			return c
		}
		m[k] = &modelRow{props: props()}
	case engine.OpMerge:
		if c := condOK(); c != "" {
			return c
		}
		for n, v := range props() {
			cur.props[n] = v
		}
	case engine.OpInsertOrReplace:
		m[k] = &modelRow{props: props()}
	case engine.OpInsertOrMerge:
		if !exists {
			m[k] = &modelRow{props: props()}
		} else {
			for n, v := range props() {
				cur.props[n] = v
			}
		}
	case engine.OpDelete:
		if c := condOK(); c != "" {
			return c
		}
		delete(m, k)
	}
	return ""
}

type modelGen struct {
	r     *rand.Rand
	stale []string // ETags seen before: mostly stale now
}

func (g *modelGen) value() engine.Value {
	switch g.r.IntN(8) {
	case 0:
		return engine.String(fmt.Sprintf("s%d", g.r.IntN(100)))
	case 1:
		return engine.Int32(int32(g.r.Uint32()))
	case 2:
		return engine.Int64(int64(g.r.Uint64()))
	case 3:
		return engine.Double(g.r.NormFloat64())
	case 4:
		return engine.Bool(g.r.IntN(2) == 0)
	case 5:
		return engine.DateTimeTicks(g.r.Int64N(1 << 60))
	case 6:
		var b [16]byte
		for i := range b {
			b[i] = byte(g.r.UintN(256))
		}
		return engine.Guid(b)
	}
	b := make([]byte, g.r.IntN(20))
	for i := range b {
		b[i] = byte(g.r.UintN(256))
	}
	return engine.Binary(b)
}

func (g *modelGen) entity(pk string) *engine.Entity {
	rk := fmt.Sprintf("r%02d", g.r.IntN(12))
	var props []engine.Property
	seen := map[string]bool{}
	for i := g.r.IntN(4); i > 0; i-- {
		n := fmt.Sprintf("P%d", g.r.IntN(6))
		if !seen[n] {
			seen[n] = true
			props = append(props, engine.Property{Name: n, Value: g.value()})
		}
	}
	return engine.NewEntity(pk, rk, props...)
}

func (g *modelGen) ifMatch(m model, e *engine.Entity) string {
	switch g.r.IntN(4) {
	case 0:
		return "*"
	case 1:
		if len(g.stale) > 0 {
			return g.stale[g.r.IntN(len(g.stale))]
		}
	}
	if cur, ok := m[[2]string{e.PartitionKey, e.RowKey}]; ok {
		return cur.etag
	}
	return "*"
}

func (g *modelGen) op(m model, pk string) engine.Operation {
	e := g.entity(pk)
	o := engine.Operation{Op: engine.Op(1 + g.r.IntN(6)), Entity: e}
	switch o.Op {
	case engine.OpReplace, engine.OpMerge, engine.OpDelete:
		o.IfMatch = g.ifMatch(m, e)
	}
	if o.Op == engine.OpDelete {
		o.Entity = engine.NewEntity(e.PartitionKey, e.RowKey)
	}
	return o
}

// TestModel applies thousands of random commands to a host and to the model
// and checks that every command succeeds or fails alike and that the tables
// are identical, before and after a restart (the view rebuilt from the
// journal).
func TestModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -model.seed=%d)", seed, seed)
	g := &modelGen{r: rand.New(rand.NewPCG(seed, seed^0x5eed))}
	th := startHost(t, "")
	ctx := ctxT(t)
	const tb = "Model"
	if _, err := th.c.CreateTable(ctx, tb); err != nil {
		t.Fatal(err)
	}
	m := model{}
	parts := []string{"", "Sales", "HR", "ü"}
	for step := 0; step < *modelSteps; step++ {
		pk := parts[g.r.IntN(len(parts))]
		if g.r.IntN(5) == 0 {
			// A batch on distinct rows of one partition.
			n := 1 + g.r.IntN(5)
			var ops []engine.Operation
			rows := map[string]bool{}
			for len(ops) < n {
				o := g.op(m, pk)
				if !rows[o.Entity.RowKey] {
					rows[o.Entity.RowKey] = true
					ops = append(ops, o)
				}
			}
			next := m.clone()
			want, wantIdx := engine.Code(""), -1
			for i, o := range ops {
				if c := next.apply(o); c != "" {
					want, wantIdx = c, i
					break
				}
			}
			rep, err := th.c.Batch(ctx, tb, ops)
			checkOutcome(t, step, err, want, wantIdx)
			if want == "" {
				for i, o := range ops {
					if o.Op != engine.OpDelete {
						next[[2]string{pk, o.Entity.RowKey}].etag = rep.Results[i].ETag
						g.stale = append(g.stale, rep.Results[i].ETag)
					}
				}
				m = next
			}
			continue
		}
		o := g.op(m, pk)
		next := m.clone()
		want := next.apply(o)
		var rep *engine.Reply
		var err error
		switch o.Op {
		case engine.OpInsert:
			rep, err = th.c.Insert(ctx, tb, o.Entity)
		case engine.OpReplace:
			rep, err = th.c.Replace(ctx, tb, o.Entity, o.IfMatch)
		case engine.OpMerge:
			rep, err = th.c.Merge(ctx, tb, o.Entity, o.IfMatch)
		case engine.OpInsertOrReplace:
			rep, err = th.c.InsertOrReplace(ctx, tb, o.Entity)
		case engine.OpInsertOrMerge:
			rep, err = th.c.InsertOrMerge(ctx, tb, o.Entity)
		case engine.OpDelete:
			rep, err = th.c.Delete(ctx, tb, o.Entity.PartitionKey, o.Entity.RowKey, o.IfMatch)
		}
		checkOutcome(t, step, err, want, -1)
		if want == "" {
			if o.Op != engine.OpDelete {
				next[[2]string{pk, o.Entity.RowKey}].etag = rep.ETag
				g.stale = append(g.stale, rep.ETag)
			}
			m = next
		}
	}
	compareModel(t, th, tb, m)
	dir := th.dir
	th.stop(t)
	th = startHost(t, dir)
	compareModel(t, th, tb, m)
}

func checkOutcome(t *testing.T, step int, err error, want engine.Code, wantIdx int) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("step %d: want success, got %v", step, err)
		}
		return
	}
	var e *engine.Error
	if !errors.As(err, &e) || e.Code != want || (wantIdx >= 0 && e.Index != wantIdx) {
		t.Fatalf("step %d: want %s at %d, got %v", step, want, wantIdx, err)
	}
}

// compareModel checks the host's view against the model: same keys in the
// same order, same properties with the same types, same ETags.
func compareModel(t *testing.T, th *testHost, table string, m model) {
	t.Helper()
	tv, ok := th.h.Views().Table(table)
	if !ok {
		t.Fatalf("no view of %s", table)
	}
	var keys [][2]string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	var got []*engine.Entity
	tv.Snapshot().Scan(func(e *engine.Entity) bool { got = append(got, e); return true })
	if len(got) != len(keys) {
		t.Fatalf("view has %d entities, model %d", len(got), len(keys))
	}
	for i, e := range got {
		k := keys[i]
		if e.PartitionKey != k[0] || e.RowKey != k[1] {
			t.Fatalf("entity %d is (%q,%q), model has (%q,%q)", i, e.PartitionKey, e.RowKey, k[0], k[1])
		}
		row := m[k]
		if et := engine.ETag(tv.Epoch(), e.Version); et != row.etag {
			t.Fatalf("(%q,%q): etag %s, model %s", k[0], k[1], et, row.etag)
		}
		if len(e.Properties) != len(row.props) {
			t.Fatalf("(%q,%q): %d properties, model %d", k[0], k[1], len(e.Properties), len(row.props))
		}
		for _, p := range e.Properties {
			if want, ok := row.props[p.Name]; !ok || !want.Equal(p.Value) {
				t.Fatalf("(%q,%q).%s = %#v, model %#v", k[0], k[1], p.Name, p.Value, want)
			}
		}
	}
}

// TestConcurrentConditionalWrites has many goroutines increment one counter
// with read-modify-write under If-Match: every successful conditional write
// must be reflected, so the counter ends at the number of successes.
func TestConcurrentConditionalWrites(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	const tb, workers, perWorker = "Counters", 8, 40
	if _, err := th.c.CreateTable(ctx, tb); err != nil {
		t.Fatal(err)
	}
	if _, err := th.c.Insert(ctx, tb, engine.NewEntity("c", "1", engine.Property{Name: "N", Value: engine.Int64(0)})); err != nil {
		t.Fatal(err)
	}
	conflicts, err := incrementConcurrently(ctx, th.c, tb, workers, perWorker, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, _, err := th.c.Retrieve(ctx, tb, "c", "1")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := e.Get("N"); n.Int() != workers*perWorker {
		t.Fatalf("counter = %d, want %d (%d conflicts)", n.Int(), workers*perWorker, conflicts)
	}
	t.Logf("%d increments, %d conflicts retried", workers*perWorker, conflicts)
}

// incrementConcurrently has workers goroutines each add perWorker to the
// counter (table, "c", "1") by read-modify-write under If-Match, retrying
// on UpdateConditionNotSatisfied. between, if set, runs between the read
// and the write. It returns the number of conflicts retried.
func incrementConcurrently(ctx context.Context, c *client.Client, table string, workers, perWorker int, between func(w, done int) error) (int64, error) {
	var wg sync.WaitGroup
	var conflicts atomic.Int64
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done := 0; done < perWorker; {
				e, rep, err := c.Retrieve(ctx, table, "c", "1")
				if err != nil {
					errs <- err
					return
				}
				n, _ := e.Get("N")
				if between != nil {
					if err := between(w, done); err != nil {
						errs <- err
						return
					}
				}
				_, err = c.Replace(ctx, table, engine.NewEntity("c", "1", engine.Property{Name: "N", Value: engine.Int64(n.Int() + 1)}), rep.ETag)
				var ce *engine.Error
				switch {
				case err == nil:
					done++
				case errors.As(err, &ce) && ce.Code == engine.CodeUpdateConditionNotSatisfied:
					conflicts.Add(1)
				default:
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return conflicts.Load(), <-errs
}
