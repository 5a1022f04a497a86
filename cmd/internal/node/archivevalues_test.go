package node_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/engine/commit"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/queueadmin"
	"github.com/cairn-dev/cairn/journal/values"
)

// randomValue is n bytes from seed (logged by the caller, so that a
// failure replays).
func randomValue(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// storedRefs lists the references of the values the store holds for an
// entity of the development account, sorted.
func storedRefs(t *testing.T, s *values.Store, table, pk, rk string) []string {
	t.Helper()
	prefix := values.Key{Account: httpapi.DevAccountName, Table: table, PartitionKey: pk, RowKey: rk}.Prefix()
	infos, err := s.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, in := range infos {
		if strings.HasPrefix(in.Name, prefix) {
			refs = append(refs, engine.ValueRef(in.ID))
		}
	}
	slices.Sort(refs)
	return refs
}

// propString is an entity's String property.
func propString(t *testing.T, e *engine.Entity, name string) string {
	t.Helper()
	v, ok := e.Get(name)
	if !ok || v.Type() != engine.TypeString {
		t.Fatalf("property %s: %v (in %+v)", name, v, e)
	}
	return v.Str()
}

// TestArchiveCopiesValues: the built-in archive moves an entity that holds
// large values. The copy holds references to copies of the values, stored
// under its own keys, which download the same bytes (one value over three
// chunks of the store, and one held by two properties, copied once); the
// original entity is gone, and the sweep then removes the original's
// values and keeps the copy's.
func TestArchiveCopiesValues(t *testing.T) {
	const window, margin, every = time.Second, time.Second, time.Second
	th := startNode(t, node.Config{Commit: commit.Config{ClaimWindow: window},
		Functions: node.FunctionsConfig{ValueSweepMargin: margin, ValueSweepEvery: every}})
	ctx := ctxT(t)
	mustTable(t, th.c, "Current", "Archive")
	store := valueStore(t, th)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	photo := randomValue(seed, 300<<10)
	doc := []byte("a small document")
	photoRef := uploadValue(t, th, "Current", "Sales", "456", photo)
	docRef := uploadValue(t, th, "Current", "Sales", "456", doc)
	e := namedEmployee("Sales", "456", "Jones")
	e.Properties = append(e.Properties,
		engine.Property{Name: "Photo", Value: engine.String(photoRef)},
		engine.Property{Name: "Doc", Value: engine.String(docRef)},
		engine.Property{Name: "Badge", Value: engine.String(photoRef)})
	if _, err := th.c.Insert(ctx, "Current", e); err != nil {
		t.Fatal(err)
	}
	if err := th.h.Functions().Queues().Enqueue(ctx, "archive", archiveMsg("Sales", "456")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "employee 456 archived", func() bool {
		return exists(t, th.c, "Archive", "Sales", "456") && !exists(t, th.c, "Current", "Sales", "456")
	})
	if _, failures, poisoned := th.h.Functions().FunctionTotals("archive"); failures != 0 || poisoned != 0 {
		lines, _ := th.h.Functions().FunctionLogs("archive")
		t.Fatalf("archive: %d failures, %d poisoned; %+v", failures, poisoned, lines)
	}
	got, _, err := th.c.Retrieve(ctx, "Archive", "Sales", "456")
	if err != nil {
		t.Fatal(err)
	}
	newPhoto, newDoc := propString(t, got, "Photo"), propString(t, got, "Doc")
	if newPhoto == photoRef || newDoc == docRef || propString(t, got, "Name") != "Jones" {
		t.Fatalf("the copy holds %+v, want new references and the other properties as they were", got)
	}
	if badge := propString(t, got, "Badge"); badge != newPhoto {
		t.Fatalf("the value two properties hold was copied twice: Photo %s, Badge %s", newPhoto, badge)
	}
	for prop, want := range map[string][]byte{"Photo": photo, "Doc": doc} {
		resp, b := signedValue(t, th, http.MethodGet, "Archive", "Sales", "456", prop, nil)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(b, want) {
			t.Fatalf("download of the copy's %s: %s, %d bytes, equal %v", prop, resp.Status, len(b), bytes.Equal(b, want))
		}
	}
	copies := []string{newDoc, newPhoto}
	slices.Sort(copies)
	if refs := storedRefs(t, store, "Archive", "Sales", "456"); !slices.Equal(refs, copies) {
		t.Fatalf("the store holds %v under the copy's keys, want %v", refs, copies)
	}
	eventually(t, 30*time.Second, "the original's values swept", func() bool {
		return len(storedRefs(t, store, "Current", "Sales", "456")) == 0
	})
	// The copies are a moment younger than the originals: wait until a
	// scan has looked at them too (their age past window + margin, then two
	// scan intervals), polling the clock.
	copied, _ := engine.ParseValueID(strings.TrimPrefix(newPhoto, engine.ValueRefPrefix))
	for time.Since(copied) < window+margin+2*every {
		time.Sleep(50 * time.Millisecond)
	}
	if refs := storedRefs(t, store, "Archive", "Sales", "456"); !slices.Equal(refs, copies) {
		t.Fatalf("after the sweep the store holds %v under the copy's keys, want %v", refs, copies)
	}
	resp, b := signedValue(t, th, http.MethodGet, "Archive", "Sales", "456", "Photo", nil)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(b, photo) {
		t.Fatalf("download of the copy after the sweep: %s, %d bytes", resp.Status, len(b))
	}
}

// TestArchiveValueRefused: an entity whose value is gone from the store
// (removed behind the node's back), or larger than the node's value limit
// (stored behind its back too: no upload takes it), is not archived: the
// invocation fails with an error that says so, every time, until the
// message is in the poison queue; both tables stay as they were and no
// copy is left under the destination's keys. The archive's own code runs
// here under a manifest with a short back-off and two deliveries, so that
// the poison queue is reached in a moment (the built-in's back-off adds up
// to 15 s).
func TestArchiveValueRefused(t *testing.T) {
	const limit = 64 << 10
	th := startNode(t, node.Config{API: httpapi.Config{MaxValue: limit},
		Functions: node.FunctionsConfig{ValueSweepMargin: time.Hour}})
	ctx := ctxT(t)
	mustTable(t, th.c, "Current", "Archive")
	store := valueStore(t, th)
	m := fast(functions.Manifest{Name: "archive-values", Trigger: functions.Trigger{Queue: "archive-values"}, MaxDequeueCount: 2})
	if err := th.h.Functions().Register(m, functions.NativeFunc(functions.Archive)); err != nil {
		t.Fatal(err)
	}
	gone := uploadValue(t, th, "Current", "Sales", "1", []byte("removed behind the node's back"))
	if _, err := th.c.Insert(ctx, "Current", withRef("Sales", "1", "Photo", gone)); err != nil {
		t.Fatal(err)
	}
	k1 := values.Key{Account: httpapi.DevAccountName, Table: "Current", PartitionKey: "Sales", RowKey: "1"}
	if err := store.Delete(ctx, k1.Name(strings.TrimPrefix(gone, engine.ValueRefPrefix))); err != nil {
		t.Fatal(err)
	}
	k2 := values.Key{Account: httpapi.DevAccountName, Table: "Current", PartitionKey: "Sales", RowKey: "2"}
	big, err := store.Put(ctx, k2, bytes.NewReader(make([]byte, limit+1)), 2*limit, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.c.Insert(ctx, "Current", withRef("Sales", "2", "Photo", engine.ValueRef(big.ID))); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"1": "is not in the store",
		"2": "RequestBodyTooLarge",
	}
	for rk := range want {
		if err := th.h.Functions().Queues().Enqueue(ctx, "archive-values", archiveMsg("Sales", rk)); err != nil {
			t.Fatal(err)
		}
	}
	admin := th.h.QueueAdmin()
	eventually(t, 30*time.Second, "both messages poisoned", func() bool {
		ps, err := admin.Poison(ctx, "archive-values", 0, 10)
		return err == nil && len(ps) == 2
	})
	ps, err := admin.Poison(ctx, "archive-values", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		var rk string
		for r := range want {
			if bytes.Equal(p.Body, archiveMsg("Sales", r)) {
				rk = r
			}
		}
		if rk == "" || p.Attempts != 2 || !strings.Contains(p.Error, want[rk]) || !strings.Contains(p.Error, "archive: Current/\"Sales\"/\""+rk+"\" property Photo") {
			t.Errorf("poisoned %s (attempts %d): %q, want an error naming the entity, its property and %q", p.Body, p.Attempts, p.Error, want[rk])
		}
		t.Logf("poisoned: %s", p.Error)
	}
	for _, rk := range []string{"1", "2"} {
		if !exists(t, th.c, "Current", "Sales", rk) || exists(t, th.c, "Archive", "Sales", rk) {
			t.Errorf("(Sales, %s): a refused archive changed a table", rk)
		}
		if refs := storedRefs(t, store, "Archive", "Sales", rk); len(refs) != 0 {
			t.Errorf("(Sales, %s): a refused copy left %v in the store", rk, refs)
		}
	}
	if !stored(t, store, "Current", "Sales", "2", engine.ValueRef(big.ID)) {
		t.Error("the value too large to copy is gone from its entity")
	}
}

// TestArchiveValueSurvivesSIGKILL: the host is killed (SIGKILL) between
// the archive's copy of an entity holding a large value and its delete.
// Started again, the message is delivered again: the archive copies the
// value a second time, its copy write is answered from the first commit,
// and it deletes the original. The copy holds the first copy's reference,
// which downloads the same bytes; the sweep removes the second copy (held
// by nothing) and the original's value, and keeps the first copy.
func TestArchiveValueSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts host processes")
	}
	const window, margin, every = 2 * time.Second, time.Second, time.Second
	dir, listen, httpAddr := t.TempDir(), nodetest.FreeAddr(t), nodetest.FreeAddr(t)
	cc := nodetest.ChildConfig{DataDir: dir, NATSListen: listen, HTTP: httpAddr,
		ClaimWindow: window, ValueSweepMargin: margin, ValueSweepEvery: every}
	base := "http://" + httpAddr
	crash := cc
	crash.Failpoint = "functions.between-commits:archive"
	child := nodetest.StartChild(t, crash)
	ctx := ctxT(t)
	nc, err := nats.Connect("nats://" + listen)
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(nc)
	mustTable(t, c, "Current", "Archive")
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	photo := randomValue(seed, 300<<10)
	resp, b := signedValueAt(t, base, http.MethodPut, "Current", "Sales", "456", "", photo)
	var up struct{ Reference string }
	if err := json.Unmarshal(b, &up); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %s %s", resp.Status, b)
	}
	original := up.Reference
	e := namedEmployee("Sales", "456", "Jones")
	e.Properties = append(e.Properties, engine.Property{Name: "Photo", Value: engine.String(original)})
	if _, err := c.Insert(ctx, "Current", e); err != nil {
		t.Fatal(err)
	}
	archiveUntilKilled(t, ctx, nc, child, "Sales", "456")

	// The state the crash left, read while nothing takes the message: the
	// copy committed with its copy of the value, the delete not.
	still := cc
	still.NoBuiltins = true
	node2 := nodetest.StartChild(t, still)
	nc, err = nats.Connect("nats://" + listen)
	if err != nil {
		t.Fatal(err)
	}
	c = client.New(nc)
	got, _, err := c.Retrieve(ctx, "Archive", "Sales", "456")
	if err != nil || !exists(t, c, "Current", "Sales", "456") {
		t.Fatalf("after the crash the copy should be committed and the delete not: %v", err)
	}
	first := propString(t, got, "Photo")
	if first == original {
		t.Fatal("the copy holds the original's reference")
	}
	nc.Close()
	if err := node2.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := node2.Wait(); err != nil {
		t.Fatalf("the node did not stop cleanly: %v\n%s", err, node2.Log())
	}

	// Started with the archive: the message is delivered again.
	node3 := nodetest.StartChild(t, cc)
	nc, err = nats.Connect("nats://"+listen, nodeCreds(t, dir)...) // the values' bucket and the journal's streams need the node user
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c = client.New(nc)
	js, _ := jetstream.New(nc)
	store, err := values.Open(ctx, js, "cairn", 1)
	if err != nil {
		t.Fatal(err)
	}
	// Every value seen under the copy's keys other than the first copy:
	// the second copy lives at least window + margin, polled far more often.
	second := map[string]bool{}
	look := func() []string {
		refs := storedRefs(t, store, "Archive", "Sales", "456")
		for _, r := range refs {
			if r != first {
				second[r] = true
			}
		}
		return refs
	}
	eventually(t, 90*time.Second, "employee 456 out of Current", func() bool {
		look()
		return !exists(t, c, "Current", "Sales", "456")
	})
	got, _, err = c.Retrieve(ctx, "Archive", "Sales", "456")
	if err != nil {
		t.Fatal(err)
	}
	if ref := propString(t, got, "Photo"); ref != first {
		t.Fatalf("the copy holds %s after the redelivery, want the first copy's %s", ref, first)
	}
	resp, b = signedValueAt(t, base, http.MethodGet, "Archive", "Sales", "456", "Photo", nil)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(b, photo) {
		t.Fatalf("download of the copy: %s, %d bytes, equal %v", resp.Status, len(b), bytes.Equal(b, photo))
	}
	// No write applied twice: Archive's journal holds the copy, Current's
	// the hire and the delete.
	for table, want := range map[string]uint64{"Archive": 1, "Current": 2} {
		if info := tableStream(t, js, table); info.State.Msgs != want {
			t.Errorf("%s's journal holds %d records, want %d", table, info.State.Msgs, want)
		}
	}
	eventually(t, 30*time.Second, "the second copy and the original's value swept", func() bool {
		refs := look()
		return slices.Equal(refs, []string{first}) && len(storedRefs(t, store, "Current", "Sales", "456")) == 0
	})
	if len(second) != 1 {
		t.Fatalf("values seen under the copy's keys besides the first copy: %v, want the redelivery's one", second)
	}
	// The first copy is older than both: every scan since looked at it.
	copied, _ := engine.ParseValueID(strings.TrimPrefix(first, engine.ValueRefPrefix))
	for time.Since(copied) < window+margin+2*every { // polling the clock
		time.Sleep(50 * time.Millisecond)
	}
	if refs := look(); !slices.Equal(refs, []string{first}) {
		t.Fatalf("after the sweep the store holds %v under the copy's keys, want %v", refs, first)
	}
	q, err := functions.OpenQueues(ctx, js, "cairn", functions.QueueConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if ps, _ := queueadmin.New(q, nil).Poison(ctx, "archive", 0, 10); len(ps) != 0 {
		t.Fatalf("poisoned: %+v\n%s", ps, node3.Tail())
	}
}
