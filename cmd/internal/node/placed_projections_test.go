package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/projections"
)

// staffMember is what the test knows of one entity of Staff.
type staffMember struct {
	email, dept, first string
	salary             int64
	hasSalary          bool
}

// staffModel computes what the projections of Staff must hold: the
// index's entries and each group's count, total, lowest and highest.
type staffModel map[[2]string]staffMember

func (m staffModel) index() []string {
	var out []string
	for k, s := range m {
		if s.email != "" {
			out = append(out, fmt.Sprintf("%s %s|%s %s", s.email, k[0], k[1], s.first))
		}
	}
	slices.Sort(out)
	return out
}

func (m staffModel) groups(by func(staffMember) (string, bool)) []string {
	type agg struct {
		n, total, lo, hi int64
		some             bool
	}
	gs := map[string]*agg{}
	for _, s := range m {
		k, ok := by(s)
		if !ok {
			continue
		}
		g := gs[k]
		if g == nil {
			g = &agg{}
			gs[k] = g
		}
		g.n++
		if s.hasSalary {
			g.total += s.salary
			if !g.some || s.salary < g.lo {
				g.lo = s.salary
			}
			if !g.some || s.salary > g.hi {
				g.hi = s.salary
			}
			g.some = true
		}
	}
	var out []string
	for k, g := range gs {
		lo, hi := "-", "-"
		if g.some {
			lo, hi = fmt.Sprint(g.lo), fmt.Sprint(g.hi)
		}
		out = append(out, fmt.Sprintf("%s %d %d %s %s", k, g.n, g.total, lo, hi))
	}
	slices.Sort(out)
	return out
}

func byDept(s staffMember) (string, bool) { return s.dept, s.dept != "" }

// groupLine is an aggregate entity as staffModel.groups writes it.
func groupLine(e *engine.Entity) string {
	n, _ := e.Get("Employees")
	total, _ := e.Get("Total")
	lo, hi := "-", "-"
	if v, ok := e.Get("Lowest"); ok {
		lo = fmt.Sprint(v.Int())
	}
	if v, ok := e.Get("Highest"); ok {
		hi = fmt.Sprint(v.Int())
	}
	return fmt.Sprintf("%s %d %d %s %s", e.PartitionKey, n.Int(), total.Int(), lo, hi)
}

// TestPlacedProjections: on 3 hosts with 2 replicas, declared projections
// over a table whose shards are spread answer, through every host and
// both doors, what one host holding the whole table answers. The index
// is gathered from the shards' holders, each answering for the entries of
// its shards; each aggregate group is kept per shard and folded (count,
// sum, min, max), one group per department and one for the whole table,
// page by page, filtered on the folded values, and at a write's position
// whichever host decided it.
func TestPlacedProjections(t *testing.T) {
	hosts := startPlaced(t, 3, 2)
	ctx := ctxT(t)
	if _, err := hosts[0].c.CreateTable(ctx, "Staff"); err != nil {
		t.Fatal(err)
	}
	placedViews(t, hosts, "Staff")
	salaries := []projections.Aggregate{{Op: projections.OpCount, As: "Employees"}, {Op: projections.OpSum, Property: "Salary", As: "Total"},
		{Op: projections.OpMin, Property: "Salary", As: "Lowest"}, {Op: projections.OpMax, Property: "Salary", As: "Highest"}}
	defs := []*projections.Definition{
		{Name: "StaffByEmail", Source: "Staff", Version: 1, Kind: projections.KindIndex, Key: []string{"Email"}, Include: []string{"FirstName"}},
		{Name: "StaffByDept", Source: "Staff", Version: 1, Kind: projections.KindAggregate, GroupBy: "Dept", Aggregates: salaries},
		{Name: "StaffTotals", Source: "Staff", Version: 1, Kind: projections.KindAggregate, Aggregates: salaries},
	}
	// Half the writes before the declarations (the projections are built
	// from each host's shards), half after (kept as they are applied).
	model := staffModel{}
	r := rand.New(rand.NewPCG(7, 11))
	var last uint64
	write := func(i int) {
		t.Helper()
		h := hosts[i%len(hosts)]
		pk, rk := fmt.Sprintf("p%02d", r.IntN(40)), fmt.Sprintf("%02d", r.IntN(12))
		if r.IntN(6) == 0 {
			rep, err := h.c.Delete(ctx, "Staff", pk, rk, "*")
			if engine.ErrorCode(err) == engine.CodeResourceNotFound {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			delete(model, [2]string{pk, rk})
			last = max(last, rep.Seq)
			return
		}
		s := staffMember{first: fmt.Sprintf("F%d", r.IntN(30))}
		props := []engine.Property{{Name: "FirstName", Value: engine.String(s.first)}}
		if r.IntN(6) > 0 {
			s.email = fmt.Sprintf("e%03d@contoso.com", r.IntN(400))
			props = append(props, engine.Property{Name: "Email", Value: engine.String(s.email)})
		}
		if r.IntN(5) > 0 {
			s.dept = []string{"Sales", "Ops", "Dev", "Legal"}[r.IntN(4)]
			props = append(props, engine.Property{Name: "Dept", Value: engine.String(s.dept)})
		}
		if r.IntN(4) > 0 {
			s.salary, s.hasSalary = int64(r.IntN(90000)+10000), true
			props = append(props, engine.Property{Name: "Salary", Value: engine.Int64(s.salary)})
		}
		rep, err := h.c.InsertOrReplace(ctx, "Staff", engine.NewEntity(pk, rk, props...))
		if err != nil {
			t.Fatal(err)
		}
		model[[2]string{pk, rk}] = s
		last = max(last, rep.Seq)
	}
	for i := range 250 {
		write(i)
	}
	for _, def := range defs {
		if res, status := declare(t, hosts[0].h, def); status != http.StatusOK {
			t.Fatalf("declare %s: %s (%d)", def.Name, res, status)
		}
	}
	for _, h := range hosts {
		for _, def := range defs {
			waitProjection(t, h.h, def)
		}
	}
	for i := range 250 {
		write(i)
	}
	// Each host keeps a group per shard it holds, and no more.
	for hi, h := range hosts {
		r, ok, err := h.h.Views().Readable(ctx, "StaffByDept")
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if _, err := r.WaitSeq(ctx, last); err != nil {
			t.Fatal(err)
		}
		src, _ := h.h.Views().Table("Staff")
		n := 0
		r.Snapshot().Scan(func(e *engine.Entity) bool {
			sh, err := strconv.ParseUint(e.RowKey, 10, 32)
			if err != nil || projections.ShardRowKey(uint32(sh)) != e.RowKey || !src.HoldsShard(uint32(sh)) {
				t.Fatalf("host %d: group %s/%s", hi, e.PartitionKey, e.RowKey)
			}
			n++
			return true
		})
		if n <= 4 {
			t.Fatalf("host %d keeps %d groups of StaffByDept: not split by shard", hi, n)
		}
	}
	wantIdx, wantDept := model.index(), model.groups(byDept)
	wantAll := model.groups(func(staffMember) (string, bool) { return "", true })
	if len(wantDept) != 4 || len(wantIdx) < 100 {
		t.Fatalf("the model: %d departments, %d index entries", len(wantDept), len(wantIdx))
	}

	for hi, h := range hosts {
		what := func(s string) string { return fmt.Sprintf("host %d: %s", hi, s) }
		// The index over NATS, in pages of 7, at the last write's position.
		var got []string
		for qe, err := range h.c.QueryAll(ctx, "StaffByEmail", client.QueryTop(7), client.QueryAtLeast(last)) {
			if err != nil {
				t.Fatal(what(err.Error()))
			}
			fn, _ := qe.Entity.Get("FirstName")
			got = append(got, fmt.Sprintf("%s %s %s", qe.Entity.PartitionKey, qe.Entity.RowKey, fn.Str()))
		}
		if !slices.Equal(got, wantIdx) {
			t.Fatalf("%s\ngot  %v\nwant %v", what("the index"), got, wantIdx)
		}
		// The groups over NATS, one per page, and the whole table's.
		got = got[:0]
		for qe, err := range h.c.QueryAll(ctx, "StaffByDept", client.QueryTop(1), client.QueryAtLeast(last)) {
			if err != nil {
				t.Fatal(what(err.Error()))
			}
			if qe.Entity.RowKey != "" {
				t.Fatalf("%s: a group's RowKey %q", what("StaffByDept"), qe.Entity.RowKey)
			}
			got = append(got, groupLine(qe.Entity))
		}
		if !slices.Equal(got, wantDept) {
			t.Fatalf("%s\ngot  %v\nwant %v", what("the departments"), got, wantDept)
		}
		e, _, err := h.c.Retrieve(ctx, "StaffTotals", "", "", client.AtLeast(last))
		if err != nil || groupLine(e) != wantAll[0] {
			t.Fatalf("%s: %v, %v; want %s", what("the whole table's group"), e, err, wantAll[0])
		}
		// A filter on the folded values, over HTTP in pages of 1: the
		// departments above the smallest total.
		var lowest int64 = -1
		var wantAbove []string
		for _, line := range wantDept {
			var d string
			var n, total int64
			fmt.Sscan(line, &d, &n, &total)
			if lowest < 0 || total < lowest {
				lowest = total
			}
		}
		for _, line := range wantDept {
			var d string
			var n, total int64
			fmt.Sscan(line, &d, &n, &total)
			if total > lowest {
				wantAbove = append(wantAbove, d)
			}
		}
		svc := accountService(t, h.h, httpapi.DevAccountName, httpapi.DevAccountKey)
		filter, top := fmt.Sprintf("Total gt %dL", lowest), int32(1)
		pager := svc.NewClient("StaffByDept").NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Top: &top})
		var above []string
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				t.Fatal(what(err.Error()))
			}
			for _, raw := range page.Entities {
				var e struct{ PartitionKey string }
				if err := json.Unmarshal(raw, &e); err != nil {
					t.Fatal(err)
				}
				above = append(above, e.PartitionKey)
			}
		}
		if !slices.Equal(above, wantAbove) {
			t.Fatalf("%s: %v, want %v", what(filter), above, wantAbove)
		}
		// A point read of a group over HTTP.
		ent, err := svc.NewClient("StaffByDept").GetEntity(ctx, "Sales", "", nil)
		if err != nil {
			t.Fatal(what(err.Error()))
		}
		var sales map[string]any
		if err := json.Unmarshal(ent.Value, &sales); err != nil {
			t.Fatal(err)
		}
		if want := wantDept[slices.IndexFunc(wantDept, func(l string) bool { return strings.HasPrefix(l, "Sales ") })]; fmt.Sprint("Sales ", sales["Employees"], " ", sales["Total"]) != strings.Join(strings.Fields(want)[:3], " ") {
			t.Fatalf("%s: %v, want %s", what("GET Sales"), sales, want)
		}
	}

	// Read your write: a write through one host, then each host reads the
	// group it changed at the write's position.
	before, salesBefore := last, wantDept[slices.IndexFunc(wantDept, func(l string) bool { return strings.HasPrefix(l, "Sales ") })]
	for hi := range hosts {
		s := staffMember{dept: "Sales", first: "New", salary: int64(1_000_000 + hi), hasSalary: true}
		rep, err := hosts[hi].c.InsertOrReplace(ctx, "Staff", engine.NewEntity("p99", fmt.Sprint(hi),
			engine.Property{Name: "Dept", Value: engine.String(s.dept)}, engine.Property{Name: "FirstName", Value: engine.String(s.first)},
			engine.Property{Name: "Salary", Value: engine.Int64(s.salary)}))
		if err != nil {
			t.Fatal(err)
		}
		model[[2]string{"p99", fmt.Sprint(hi)}] = s
		groups := model.groups(byDept)
		want := groups[slices.IndexFunc(groups, func(l string) bool { return strings.HasPrefix(l, "Sales ") })]
		for oi, o := range hosts {
			e, _, err := o.c.Retrieve(ctx, "StaffByDept", "Sales", "", client.AtLeast(rep.Seq))
			if err != nil || groupLine(e) != want {
				t.Fatalf("host %d after a write through host %d: %v, %v; want %s", oi, hi, e, err, want)
			}
		}
	}
	// Functions read the projections too, on whichever host runs them:
	// the whole table's group, and one index value's entries.
	groups := model.groups(func(staffMember) (string, bool) { return "", true })
	idx := model.index()
	email := strings.Fields(idx[0])[0]
	var wantEntries []string
	for _, l := range idx {
		if f := strings.Fields(l); f[0] == email {
			wantEntries = append(wantEntries, f[1])
		}
	}
	seen := make(chan string, 16)
	m := fast(functions.Manifest{Name: "read-staff", Trigger: functions.Trigger{Queue: "staff"}})
	for _, h := range hosts {
		if err := h.h.Functions().Register(m, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
			e, _, err := inv.Get(ctx, "StaffTotals", "", "")
			if err != nil {
				return err
			}
			ents, err := inv.Query(ctx, "StaffByEmail", email, "", 0)
			if err != nil {
				return err
			}
			var rks []string
			for _, x := range ents {
				rks = append(rks, x.RowKey)
			}
			seen <- groupLine(e) + " " + strings.Join(rks, ",")
			return nil
		})); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		if err := hosts[i%3].h.Functions().Queues().Enqueue(ctx, "staff", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for range 6 {
		select {
		case got := <-seen:
			if want := groups[0] + " " + strings.Join(wantEntries, ","); got != want {
				t.Fatalf("a function read %q, want %q", got, want)
			}
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	// As of the position before those writes, through every host.
	for hi, h := range hosts {
		e, _, err := h.c.Retrieve(ctx, "StaffByDept", "Sales", "", client.AsOf(before))
		if err != nil || groupLine(e) != salesBefore {
			t.Fatalf("host %d as of %d: %v, %v; want %s", hi, before, e, err, salesBefore)
		}
	}
}
