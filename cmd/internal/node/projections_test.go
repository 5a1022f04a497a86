package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/cmd/internal/operator"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/projections"
)

// The projections the tests declare on Employees: an index by email
// carrying the first name, and salaries per department.
func emailIndex(version uint64) *projections.Definition {
	return &projections.Definition{Name: "EmployeesByEmail", Source: "Employees", Version: version, Kind: projections.KindIndex,
		Key: []string{"Email"}, Include: []string{"FirstName"}}
}

func deptSalaries(version uint64) *projections.Definition {
	return &projections.Definition{Name: "SalaryByDept", Source: "Employees", Version: version, Kind: projections.KindAggregate,
		GroupBy: "Dept", Aggregates: []projections.Aggregate{{Op: projections.OpCount, As: "Employees"}, {Op: projections.OpSum, Property: "Salary", As: "Total"}}}
}

// declare deploys a definition through the operators' API and returns the
// result ("declared", "replaced version N", "unchanged") or the error
// code with the HTTP status.
func declare(t *testing.T, h *node.Node, def *projections.Definition) (string, int) {
	t.Helper()
	b, _ := json.Marshal(def)
	resp := operatorDo(t, h.OperatorToken(), http.MethodPut, h.HTTPURL()+projections.AdminPath, bytes.NewReader(b))
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprint(out["code"]), resp.StatusCode
	}
	return fmt.Sprint(out["result"]), resp.StatusCode
}

func waitProjection(t *testing.T, h *node.Node, def *projections.Definition) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Views().WaitProjection(ctx, def); err != nil {
		t.Fatal(err)
	}
}

// randomEmployeeOp writes one random change to Employees: an insert or
// replace (whose email, department and salary may change or vanish), a
// merge of the department alone, or a delete.
func randomEmployeeOp(ctx context.Context, r *rand.Rand, c *client.Client) error {
	pk := fmt.Sprintf("dept%d", r.IntN(4))
	rk := fmt.Sprintf("%03d", r.IntN(150))
	var props []engine.Property
	if r.IntN(6) > 0 {
		props = append(props, engine.Property{Name: "Email", Value: engine.String(fmt.Sprintf("e%d@contoso.com", r.IntN(120)))})
	}
	if r.IntN(5) > 0 {
		props = append(props, engine.Property{Name: "Dept", Value: engine.String([]string{"Sales", "Ops", "Dev"}[r.IntN(3)])})
	}
	if r.IntN(4) > 0 {
		props = append(props, engine.Property{Name: "Salary", Value: engine.Int64(int64(r.IntN(90000) + 10000))})
	}
	props = append(props, engine.Property{Name: "FirstName", Value: engine.String(fmt.Sprintf("F%d", r.IntN(50)))})
	var err error
	switch r.IntN(6) {
	case 0:
		_, err = c.Delete(ctx, "Employees", pk, rk, "*")
		if engine.ErrorCode(err) == engine.CodeResourceNotFound {
			err = nil
		}
	case 1:
		_, err = c.InsertOrMerge(ctx, "Employees", engine.NewEntity(pk, rk, engine.Property{Name: "Dept", Value: engine.String([]string{"Sales", "Ops", "Dev"}[r.IntN(3)])}))
	default:
		_, err = c.InsertOrReplace(ctx, "Employees", engine.NewEntity(pk, rk, props...))
	}
	return err
}

// checkAgainstSource compares the two projections with what a model
// computes from scratch from the source table's snapshot at the same
// journal position.
func checkAgainstSource(t *testing.T, h *node.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, ok := h.Views().Table("Employees")
	if !ok {
		t.Fatal("no Employees")
	}
	s := src.Snapshot()
	var wantIdx []string
	type agg struct{ n, total int64 }
	groups := map[string]*agg{}
	s.Scan(func(e *engine.Entity) bool {
		fn, _ := e.Get("FirstName")
		if v, ok := e.Get("Email"); ok {
			wantIdx = append(wantIdx, fmt.Sprintf("%s %s|%s %s", v.Str(), e.PartitionKey, e.RowKey, fn.Str()))
		}
		if d, ok := e.Get("Dept"); ok {
			g := groups[d.Str()]
			if g == nil {
				g = &agg{}
				groups[d.Str()] = g
			}
			g.n++
			if v, ok := e.Get("Salary"); ok {
				g.total += v.Int()
			}
		}
		return true
	})
	var wantAgg []string
	for d, g := range groups {
		wantAgg = append(wantAgg, fmt.Sprintf("%s %d %d", d, g.n, g.total))
	}
	sort.Strings(wantIdx)
	sort.Strings(wantAgg)

	read := func(name string) *projections.Snapshot {
		r, ok, err := h.Views().Readable(ctx, name)
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", name, ok, err)
		}
		ps, err := r.WaitSeq(ctx, s.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if ps.Seq != s.Seq {
			// Published together: the projection is never ahead of the
			// source's snapshot taken before it, unless the source moved.
			t.Fatalf("%s at %d, source snapshot at %d (writes must have stopped)", name, ps.Seq, s.Seq)
		}
		return ps
	}
	var gotIdx, gotAgg []string
	read("EmployeesByEmail").Scan(func(e *engine.Entity) bool {
		fn, _ := e.Get("FirstName")
		gotIdx = append(gotIdx, fmt.Sprintf("%s %s %s", e.PartitionKey, e.RowKey, fn.Str()))
		return true
	})
	read("SalaryByDept").Scan(func(e *engine.Entity) bool {
		n, _ := e.Get("Employees")
		tot, _ := e.Get("Total")
		gotAgg = append(gotAgg, fmt.Sprintf("%s %d %d", e.PartitionKey, n.Int(), tot.Int()))
		return true
	})
	sort.Strings(gotIdx)
	if strings.Join(gotIdx, "\n") != strings.Join(wantIdx, "\n") {
		t.Fatalf("index at %d: got %d entries, want %d\ngot  %v\nwant %v", s.Seq, len(gotIdx), len(wantIdx), gotIdx, wantIdx)
	}
	if strings.Join(gotAgg, "\n") != strings.Join(wantAgg, "\n") {
		t.Fatalf("aggregate at %d:\ngot  %v\nwant %v", s.Seq, gotAgg, wantAgg)
	}
}

// TestDeclaredProjections: an index and an aggregate declared through the
// operators' API equal a model computed from the source after thousands of
// random writes (replaces that change or drop the key, merges, deletes),
// across a restart, and after a rebuild and a new version built under a
// concurrent write load; they read like tables with the Azure SDK, a read
// that names a write's position on another node waits for it, and every
// write to them is refused.
func TestDeclaredProjections(t *testing.T) {
	r := seededRand(t, 21)
	dir := t.TempDir()
	th := startHost(t, dir)
	ctx := ctxT(t)
	mustTable(t, th.c, "Employees")
	for range 300 {
		if err := randomEmployeeOp(ctx, r, th.c); err != nil {
			t.Fatal(err)
		}
	}
	// Declared on a table with history: built from it.
	for _, def := range []*projections.Definition{emailIndex(1), deptSalaries(1)} {
		if got, status := declare(t, th.h, def); got != "declared" {
			t.Fatalf("declare %s: %s %d", def.Name, got, status)
		}
		waitProjection(t, th.h, def)
	}
	if got, _ := declare(t, th.h, emailIndex(1)); got != "unchanged" {
		t.Fatalf("the same declaration again: %s", got)
	}
	changed := emailIndex(1)
	changed.Include = nil
	if got, status := declare(t, th.h, changed); got != "InvalidInput" || status != http.StatusBadRequest {
		t.Fatalf("another definition under the same version: %s %d", got, status)
	}
	bad := emailIndex(2)
	bad.Key = nil
	if got, status := declare(t, th.h, bad); got != "InvalidInput" || status != http.StatusBadRequest {
		t.Fatalf("an index without a key: %s %d", got, status)
	}
	clash := emailIndex(1)
	clash.Name = "Employees2"
	clash.Source = "Employees3"
	mustTable(t, th.c, "Employees2")
	if got, status := declare(t, th.h, clash); got != "TableAlreadyExists" || status != http.StatusConflict {
		t.Fatalf("a projection named like a table: %s %d", got, status)
	}
	checkAgainstSource(t, th.h)
	for range 2000 {
		if err := randomEmployeeOp(ctx, r, th.c); err != nil {
			t.Fatal(err)
		}
	}
	checkAgainstSource(t, th.h)

	// Read like a table, by the SDK; refused for every write.
	svc := accountService(t, th.h, httpapi.DevAccountName, httpapi.DevAccountKey)
	idx := svc.NewClient("EmployeesByEmail")
	p := idx.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: to("PartitionKey eq 'e7@contoso.com'")})
	for p.More() {
		pg, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range pg.Entities {
			var e map[string]any
			_ = json.Unmarshal(raw, &e)
			src, _, err := th.c.Retrieve(ctx, "Employees", fmt.Sprint(e["SourcePartitionKey"]), fmt.Sprint(e["SourceRowKey"]))
			if err != nil {
				t.Fatalf("index entry %v names a missing employee: %v", e, err)
			}
			if em, _ := src.Get("Email"); em.Str() != "e7@contoso.com" {
				t.Fatalf("index entry %v names %v", e, src)
			}
		}
	}
	all := 0
	for p := idx.NewListEntitiesPager(&aztables.ListEntitiesOptions{Top: to(int32(7))}); p.More(); {
		pg, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		all += len(pg.Entities)
	}
	if want := snapshotLen(t, th.h, "EmployeesByEmail"); all != want {
		t.Fatalf("paged through %d index entities by 7, want %d", all, want)
	}
	if _, err := idx.AddEntity(ctx, []byte(`{"PartitionKey":"x","RowKey":"y"}`), nil); azCode(err) != "ProjectionReadOnly" {
		t.Fatalf("insert into a projection: %v", err)
	}
	if _, err := idx.DeleteEntity(ctx, "x", "y", nil); azCode(err) != "ProjectionReadOnly" {
		t.Fatalf("delete from a projection: %v", err)
	}
	if _, err := svc.CreateTable(ctx, "SalaryByDept", nil); azCode(err) != "ProjectionReadOnly" {
		t.Fatalf("create a table named like a projection: %v", err)
	}
	if _, err := svc.DeleteTable(ctx, "SalaryByDept", nil); azCode(err) != "ProjectionReadOnly" {
		t.Fatalf("delete a projection as a table: %v", err)
	}
	// The refusal names the projection as declared, however the write
	// spelled it (the committer looks tables up in lower case).
	for _, name := range []string{"EmployeesByEmail", "employeesbyemail", "EMPLOYEESBYEMAIL"} {
		_, err := th.c.Insert(ctx, name, engine.NewEntity("x", "y"))
		if engine.ErrorCode(err) != engine.CodeProjectionReadOnly || !strings.Contains(err.Error(), "EmployeesByEmail is a declared projection") {
			t.Fatalf("insert into a projection over NATS, as %s: %v", name, err)
		}
		_, err = th.c.CreateTable(ctx, name)
		if engine.ErrorCode(err) != engine.CodeProjectionReadOnly || !strings.Contains(err.Error(), "EmployeesByEmail is a declared projection") {
			t.Fatalf("create a table named like a projection over NATS, as %s: %v", name, err)
		}
	}
	e, _, err := th.c.Retrieve(ctx, "SalaryByDept", "Sales", "")
	if err != nil {
		t.Fatalf("retrieve a group over NATS: %v", err)
	}
	if n, _ := e.Get("Employees"); n.Int() == 0 {
		t.Fatalf("group Sales: %v", e)
	}

	// Write on a second node, read the index on the first with the write's
	// position: the read waits for it.
	second := startHostOn(t, th)
	rep, err := second.c.InsertOrReplace(ctx, "Employees", engine.NewEntity("dept9", "999",
		engine.Property{Name: "Email", Value: engine.String("new@contoso.com")}, engine.Property{Name: "FirstName", Value: engine.String("New")}))
	if err != nil {
		t.Fatal(err)
	}
	hdr := http.Header{"X-Cairn-Position": []string{fmt.Sprint(rep.Seq)}}
	got, err := idx.GetEntity(runtime.WithHTTPHeader(ctx, hdr), "new@contoso.com", "dept9|999", nil)
	if err != nil {
		t.Fatalf("read the index at the write's position: %v", err)
	}
	if !bytes.Contains(got.Value, []byte(`"New"`)) {
		t.Fatalf("index entity %s", got.Value)
	}
	second.stop(t)

	// A restart replays the journal into the same projections.
	th.stop(t)
	th = startHost(t, dir)
	waitProjection(t, th.h, emailIndex(1))
	checkAgainstSource(t, th.h)

	// A rebuild, then version 2, under a concurrent write load: version 1
	// serves until each swap, and the result equals the model.
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wr := rand.New(rand.NewPCG(uint64(w), 22))
			for !stop.Load() {
				if err := randomEmployeeOp(ctx, wr, th.c); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	resp := operatorDo(t, th.h.OperatorToken(), http.MethodPost, th.h.HTTPURL()+projections.AdminPath+"/SalaryByDept/rebuild", nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("rebuild: %s %s", resp.Status, body)
	}
	rebuilt := deptSalaries(1)
	rebuilt.Generation = 1
	waitProjection(t, th.h, rebuilt)
	v2 := emailIndex(2)
	v2.Include = []string{"FirstName", "Dept"}
	if got, _ := declare(t, th.h, v2); got != "replaced version 1" {
		t.Fatalf("declare version 2: %s", got)
	}
	waitProjection(t, th.h, v2)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkAgainstSource(t, th.h)

	// Dropped: reads answer TableNotFound.
	if code := httpDo(t, th.h.OperatorToken(), http.MethodDelete, th.h.HTTPURL()+projections.AdminPath+"/EmployeesByEmail"); code != http.StatusOK {
		t.Fatalf("drop: %d", code)
	}
	eventually(t, 10*time.Second, "the dropped projection gone", func() bool {
		_, _, err := th.c.Retrieve(ctx, "EmployeesByEmail", "new@contoso.com", "dept9|999")
		return engine.ErrorCode(err) == engine.CodeTableNotFound
	})
}

func snapshotLen(t *testing.T, h *node.Node, name string) int {
	t.Helper()
	r, ok, err := h.Views().Readable(context.Background(), name)
	if err != nil || !ok {
		t.Fatal(name, err)
	}
	return r.Snapshot().Len()
}

// TestProjectionBuildKilled: a node killed with SIGKILL while it builds a
// new version comes back with that version, equal to its source's model
// (the declaration is in the key-value store; the projection is derived
// again from the journal, so nothing is lost or doubled).
func TestProjectionBuildKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts host processes")
	}
	r := seededRand(t, 23)
	dir, listen, httpAddr := t.TempDir(), nodetest.FreeAddr(t), nodetest.FreeAddr(t)
	child := nodetest.StartChild(t, nodetest.ChildConfig{DataDir: dir, NATSListen: listen, HTTP: httpAddr})
	cl := retryingClient(t, listen)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := cl.CreateTable(ctx, "Employees"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		ops := make([]engine.Operation, 100)
		for k := range ops {
			ops[k] = engine.Operation{Op: engine.OpInsertOrReplace, Entity: engine.NewEntity(fmt.Sprintf("p%d", i), fmt.Sprintf("%05d", k),
				engine.Property{Name: "Email", Value: engine.String(fmt.Sprintf("e%d@contoso.com", r.IntN(500)))},
				engine.Property{Name: "Dept", Value: engine.String([]string{"Sales", "Ops"}[r.IntN(2)])},
				engine.Property{Name: "Salary", Value: engine.Int64(int64(r.IntN(1000)))},
				engine.Property{Name: "FirstName", Value: engine.String("F")})}
		}
		if _, err := cl.Batch(ctx, "Employees", ops); err != nil {
			t.Fatal(err)
		}
	}
	token, _, _, _, err := operator.LoadToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	put := func(def *projections.Definition) {
		b, _ := json.Marshal(def)
		resp := operatorDo(t, token, http.MethodPut, "http://"+httpAddr+projections.AdminPath, bytes.NewReader(b))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("declare %s: %s", def.Name, resp.Status)
		}
	}
	put(emailIndex(1))
	put(deptSalaries(1))
	v2 := emailIndex(2)
	v2.Include = []string{"FirstName", "Dept"}
	put(v2)
	// Killed while version 2 builds (or just after: either way the node
	// must come back with it).
	if err := child.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	th := startNode(t, node.Config{DataDir: dir, NATSListen: listen})
	waitProjection(t, th.h, v2)
	waitProjection(t, th.h, deptSalaries(1))
	checkAgainstSource(t, th.h)
}

// TestFunctionReadsProjection: a function finds an employee through the
// email index (the inter-partition secondary index pattern, inside a
// function) and writes what it found; its write to the index itself is
// refused at once with ProjectionReadOnly.
func TestFunctionReadsProjection(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	mustTable(t, th.c, "Employees", "Found")
	if _, err := th.c.Insert(ctx, "Employees", engine.NewEntity("Sales", "007",
		engine.Property{Name: "Email", Value: engine.String("bond@contoso.com")}, engine.Property{Name: "FirstName", Value: engine.String("James")})); err != nil {
		t.Fatal(err)
	}
	if got, _ := declare(t, th.h, emailIndex(1)); got != "declared" {
		t.Fatal(got)
	}
	waitProjection(t, th.h, emailIndex(1))
	refused := make(chan error, 10)
	fr := th.h.Functions()
	m := fast(functions.Manifest{Name: "find", Trigger: functions.Trigger{Queue: "lookups"}, MaxDequeueCount: 2})
	if err := fr.Register(m, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		email := string(inv.Trigger().Body)
		hits, err := inv.Query(ctx, "EmployeesByEmail", email, "", 10)
		if err != nil {
			return err
		}
		if len(hits) != 1 {
			return fmt.Errorf("%d index entries for %s", len(hits), email)
		}
		refused <- inv.Write(ctx, "EmployeesByEmail", engine.Operation{Op: engine.OpInsert, Entity: engine.NewEntity("x", "y")})
		return inv.Write(ctx, "Found", engine.Operation{Op: engine.OpInsert, Entity: engine.NewEntity("found", email,
			engine.Property{Name: "Row", Value: engine.String(hits[0].RowKey)})})
	})); err != nil {
		t.Fatal(err)
	}
	if err := fr.Queues().Enqueue(ctx, "lookups", []byte("bond@contoso.com")); err != nil {
		t.Fatal(err)
	}
	if err := <-refused; engine.ErrorCode(err) != engine.CodeProjectionReadOnly {
		t.Fatalf("a function's write to a projection: %v", err)
	}
	eventually(t, 20*time.Second, "the function's find written", func() bool { return exists(t, th.c, "Found", "found", "bond@contoso.com") })
	e, _, err := th.c.Retrieve(ctx, "Found", "found", "bond@contoso.com")
	if err != nil {
		t.Fatal(err)
	}
	if row, _ := e.Get("Row"); row.Str() != "Sales|007" {
		t.Fatalf("found %v", e)
	}
}

// TestProjectionAsOf: a projection read as of an earlier position of its
// source shows the index as it was then (its source replayed with the
// version declared now).
func TestProjectionAsOf(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	mustTable(t, th.c, "Employees")
	if got, _ := declare(t, th.h, emailIndex(1)); got != "declared" {
		t.Fatal(got)
	}
	waitProjection(t, th.h, emailIndex(1))
	first, err := th.c.Insert(ctx, "Employees", engine.NewEntity("Sales", "007", engine.Property{Name: "Email", Value: engine.String("old@contoso.com")}))
	if err != nil {
		t.Fatal(err)
	}
	second, err := th.c.InsertOrReplace(ctx, "Employees", engine.NewEntity("Sales", "007", engine.Property{Name: "Email", Value: engine.String("new@contoso.com")}))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := th.c.Retrieve(ctx, "EmployeesByEmail", "old@contoso.com", "Sales|007"); engine.ErrorCode(err) != engine.CodeResourceNotFound {
		t.Fatalf("the old email now: %v", err)
	}
	if _, _, err := th.c.Retrieve(ctx, "EmployeesByEmail", "old@contoso.com", "Sales|007", client.AsOf(first.Seq)); err != nil {
		t.Fatalf("the old email as of its write: %v", err)
	}
	if _, _, err := th.c.Retrieve(ctx, "EmployeesByEmail", "new@contoso.com", "Sales|007", client.AsOf(first.Seq)); engine.ErrorCode(err) != engine.CodeResourceNotFound {
		t.Fatalf("the new email before its write: %v", err)
	}
	if _, _, err := th.c.Retrieve(ctx, "EmployeesByEmail", "new@contoso.com", "Sales|007", client.AsOf(second.Seq)); err != nil {
		t.Fatalf("the new email as of its write: %v", err)
	}
	resp := operatorDo(t, th.h.OperatorToken(), http.MethodGet, th.h.HTTPURL()+"/metrics", nil)
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`cairn_projection_entities{projection="EmployeesByEmail",source="Employees"} 1`,
		fmt.Sprintf(`cairn_projection_position{projection="EmployeesByEmail",source="Employees"} %d`, second.Seq),
		`cairn_projection_version{projection="EmployeesByEmail",source="Employees"} 1`,
		`cairn_projection_lag_records{projection="EmployeesByEmail",source="Employees"} 0`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
