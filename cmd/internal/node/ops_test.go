package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
)

func wantCode(t *testing.T, err error, code engine.Code) *engine.Error {
	t.Helper()
	var e *engine.Error
	if !errors.As(err, &e) {
		t.Fatalf("want error %s, got %v", code, err)
	}
	if e.Code != code {
		t.Fatalf("want error %s, got %s: %s", code, e.Code, e.Message)
	}
	return e
}

func employee(dept, id string, props ...engine.Property) *engine.Entity {
	return engine.NewEntity(dept, id, props...)
}

func TestTables(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	info, err := th.c.CreateTable(ctx, "Current")
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "Current" || info.Epoch == 0 {
		t.Fatalf("CreateTable returned %+v", info)
	}
	_, err = th.c.CreateTable(ctx, "current")
	wantCode(t, err, engine.CodeTableAlreadyExists)
	_, err = th.c.CreateTable(ctx, "1bad")
	wantCode(t, err, engine.CodeInvalidInput)
	_, err = th.c.CreateTable(ctx, "tables")
	wantCode(t, err, engine.CodeInvalidInput)
	if _, err := th.c.CreateTable(ctx, "Archive"); err != nil {
		t.Fatal(err)
	}
	ts, err := th.c.ListTables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Name != "Archive" || ts[1].Name != "Current" {
		t.Fatalf("ListTables = %+v", ts)
	}
	// Entities of a deleted table are gone, and a table created again under
	// the same name starts empty with a new epoch.
	if _, err := th.c.Insert(ctx, "Current", employee("Sales", "1")); err != nil {
		t.Fatal(err)
	}
	if err := th.c.DeleteTable(ctx, "CURRENT"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, th.c.DeleteTable(ctx, "Current"), engine.CodeTableNotFound)
	_, err = th.c.Insert(ctx, "Current", employee("Sales", "2"))
	wantCode(t, err, engine.CodeTableNotFound)
	info2, err := th.c.CreateTable(ctx, "Current")
	if err != nil {
		t.Fatal(err)
	}
	if info2.Epoch <= info.Epoch {
		t.Fatalf("re-created table has epoch %d, want > %d", info2.Epoch, info.Epoch)
	}
	_, _, err = th.c.Retrieve(ctx, "Current", "Sales", "1")
	wantCode(t, err, engine.CodeResourceNotFound)
}

func TestEntityOperations(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	if _, err := th.c.CreateTable(ctx, "Employees"); err != nil {
		t.Fatal(err)
	}
	const tb = "Employees"
	when := time.Date(2014, 8, 22, 0, 50, 32, 123456700, time.UTC)
	guid := [16]byte{0xc9, 0xda, 0x6a, 0x32, 0x45, 0x4c, 0x4b, 0x52, 0x8d, 0x5f, 0x8c, 0x0c, 0x86, 0x35, 0x1e, 0x14}
	e := employee("Sales", "000123",
		engine.Property{Name: "Name", Value: engine.String("Jones ü 日本")},
		engine.Property{Name: "Age", Value: engine.Int32(-38)},
		engine.Property{Name: "Big", Value: engine.Int64(1<<53 + 1)},
		engine.Property{Name: "Salary", Value: engine.Double(5)},
		engine.Property{Name: "Ratio", Value: engine.Double(math.Inf(-1))},
		engine.Property{Name: "Active", Value: engine.Bool(true)},
		engine.Property{Name: "Hired", Value: engine.DateTime(when)},
		engine.Property{Name: "Id", Value: engine.Guid(guid)},
		engine.Property{Name: "Photo", Value: engine.Binary([]byte{0, 1, 2, 255})},
	)
	rep, err := th.c.Insert(ctx, tb, e)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ETag == "" || rep.Seq == 0 || rep.Timestamp == 0 {
		t.Fatalf("insert reply %+v", rep)
	}
	// The reply is sent after the write is visible: a read right after sees it.
	got, grep, err := th.c.Retrieve(ctx, tb, "Sales", "000123")
	if err != nil {
		t.Fatal(err)
	}
	if grep.ETag != rep.ETag || got.Timestamp != rep.Timestamp {
		t.Fatalf("retrieve etag/timestamp %s/%d, insert said %s/%d", grep.ETag, got.Timestamp, rep.ETag, rep.Timestamp)
	}
	if len(got.Properties) != len(e.Properties) {
		t.Fatalf("got %d properties, want %d", len(got.Properties), len(e.Properties))
	}
	for _, p := range e.Properties {
		v, ok := got.Get(p.Name)
		if !ok || !v.Equal(p.Value) {
			t.Errorf("property %s: got %#v, want %#v", p.Name, v, p.Value)
		}
	}

	_, err = th.c.Insert(ctx, tb, e)
	wantCode(t, err, engine.CodeEntityAlreadyExists)

	// Replace with a stale ETag changes nothing.
	repl := employee("Sales", "000123", engine.Property{Name: "Name", Value: engine.String("Smith")})
	r2, err := th.c.Replace(ctx, tb, repl, rep.ETag)
	if err != nil {
		t.Fatal(err)
	}
	_, err = th.c.Replace(ctx, tb, repl, rep.ETag)
	wantCode(t, err, engine.CodeUpdateConditionNotSatisfied)
	got, _, _ = th.c.Retrieve(ctx, tb, "Sales", "000123")
	if len(got.Properties) != 1 {
		t.Fatalf("after replace: %d properties, want 1", len(got.Properties))
	}
	// Merge keeps what it does not name.
	r3, err := th.c.Merge(ctx, tb, employee("Sales", "000123", engine.Property{Name: "Email", Value: engine.String("s@x")}), r2.ETag)
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ = th.c.Retrieve(ctx, tb, "Sales", "000123")
	if v, _ := got.Get("Name"); v.Str() != "Smith" {
		t.Fatalf("merge lost Name: %#v", got.Properties)
	}
	_, err = th.c.Merge(ctx, tb, employee("Sales", "000123"), r2.ETag)
	wantCode(t, err, engine.CodeUpdateConditionNotSatisfied)
	_, err = th.c.Merge(ctx, tb, employee("Sales", "missing"), "*")
	wantCode(t, err, engine.CodeResourceNotFound)
	_, err = th.c.Replace(ctx, tb, employee("Sales", "missing"), "*")
	wantCode(t, err, engine.CodeResourceNotFound)

	// Upserts.
	if _, err := th.c.InsertOrReplace(ctx, tb, employee("Sales", "000456", engine.Property{Name: "A", Value: engine.Int32(1)})); err != nil {
		t.Fatal(err)
	}
	if _, err := th.c.InsertOrMerge(ctx, tb, employee("Sales", "000456", engine.Property{Name: "B", Value: engine.Int32(2)})); err != nil {
		t.Fatal(err)
	}
	got, _, _ = th.c.Retrieve(ctx, tb, "Sales", "000456")
	if len(got.Properties) != 2 {
		t.Fatalf("InsertOrMerge: %#v", got.Properties)
	}
	if _, err := th.c.InsertOrReplace(ctx, tb, employee("Sales", "000456", engine.Property{Name: "C", Value: engine.Int32(3)})); err != nil {
		t.Fatal(err)
	}
	got, _, _ = th.c.Retrieve(ctx, tb, "Sales", "000456")
	if len(got.Properties) != 1 {
		t.Fatalf("InsertOrReplace: %#v", got.Properties)
	}

	// Delete honours If-Match.
	_, err = th.c.Delete(ctx, tb, "Sales", "000123", rep.ETag)
	wantCode(t, err, engine.CodeUpdateConditionNotSatisfied)
	if _, err := th.c.Delete(ctx, tb, "Sales", "000123", r3.ETag); err != nil {
		t.Fatal(err)
	}
	_, err = th.c.Delete(ctx, tb, "Sales", "000123", "*")
	wantCode(t, err, engine.CodeResourceNotFound)
	_, _, err = th.c.Retrieve(ctx, tb, "Sales", "000123")
	wantCode(t, err, engine.CodeResourceNotFound)

	// Bad input gets a clear error and changes nothing.
	_, err = th.c.Insert(ctx, tb, employee("Sa/les", "1"))
	wantCode(t, err, engine.CodeOutOfRangeInput)
	_, err = th.c.Insert(ctx, tb, employee("Sales", strings.Repeat("x", 513)))
	wantCode(t, err, engine.CodeKeyValueTooLarge)
	_, err = th.c.Insert(ctx, tb, employee("Sales", "1", engine.Property{Name: "S", Value: engine.String(strings.Repeat("x", 32769))}))
	wantCode(t, err, engine.CodePropertyValueTooLarge)
	_, err = th.c.Insert(ctx, "NoSuchTable", employee("Sales", "1"))
	wantCode(t, err, engine.CodeTableNotFound)
	if _, _, err := th.c.Retrieve(ctx, tb, "Sales", "1"); err == nil {
		t.Fatal("rejected insert left an entity")
	}
}

func TestBatch(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	const tb = "Current"
	if _, err := th.c.CreateTable(ctx, tb); err != nil {
		t.Fatal(err)
	}
	// The intra-partition secondary index pattern: the employee under two
	// RowKeys, kept consistent by one batch.
	ops := []engine.Operation{
		{Op: engine.OpInsert, Entity: employee("Sales", "empid_000123", engine.Property{Name: "Email", Value: engine.String("a@x")})},
		{Op: engine.OpInsert, Entity: employee("Sales", "email_a@x", engine.Property{Name: "EmployeeId", Value: engine.String("000123")})},
	}
	rep, err := th.c.Batch(ctx, tb, ops)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || rep.Results[0].ETag == rep.Results[1].ETag {
		t.Fatalf("batch results %+v", rep.Results)
	}
	// A failing batch names the failing operation and applies nothing.
	bad := []engine.Operation{
		{Op: engine.OpInsert, Entity: employee("Sales", "empid_000456")},
		{Op: engine.OpReplace, Entity: employee("Sales", "email_a@x"), IfMatch: rep.Results[0].ETag},
		{Op: engine.OpInsert, Entity: employee("Sales", "email_b@x")},
	}
	_, err = th.c.Batch(ctx, tb, bad)
	if e := wantCode(t, err, engine.CodeUpdateConditionNotSatisfied); e.Index != 1 {
		t.Fatalf("failing index %d, want 1", e.Index)
	}
	if _, _, err := th.c.Retrieve(ctx, tb, "Sales", "empid_000456"); err == nil {
		t.Fatal("a failed batch applied its first operation")
	}
	_, err = th.c.Batch(ctx, tb, []engine.Operation{
		{Op: engine.OpInsert, Entity: employee("Sales", "x")},
		{Op: engine.OpInsert, Entity: employee("HR", "y")},
	})
	if e := wantCode(t, err, engine.CodeCommandsInBatchActOnDifferentPartitions); e.Index != 1 {
		t.Fatalf("index %d, want 1", e.Index)
	}
	_, err = th.c.Batch(ctx, tb, []engine.Operation{
		{Op: engine.OpInsert, Entity: employee("Sales", "x")},
		{Op: engine.OpDelete, Entity: employee("Sales", "x"), IfMatch: "*"},
	})
	wantCode(t, err, engine.CodeInvalidDuplicateRow)
	var many []engine.Operation
	for i := 0; i < 101; i++ {
		many = append(many, engine.Operation{Op: engine.OpInsert, Entity: employee("Sales", fmt.Sprintf("n%03d", i))})
	}
	_, err = th.c.Batch(ctx, tb, many)
	wantCode(t, err, engine.CodeInvalidInput)
	if rep, err := th.c.Batch(ctx, tb, many[:100]); err != nil || len(rep.Results) != 100 {
		t.Fatalf("batch of 100: %v", err)
	}
	// A batch of 100 entities of ~40 KB each (4 MB) passes through NATS and
	// the journal as one record.
	var big []engine.Operation
	for i := 0; i < 100; i++ {
		big = append(big, engine.Operation{Op: engine.OpInsertOrReplace, Entity: employee("Big", fmt.Sprintf("r%03d", i),
			engine.Property{Name: "Blob", Value: engine.Binary(make([]byte, 40_000))})})
	}
	if _, err := th.c.Batch(ctx, tb, big); err != nil {
		t.Fatalf("4 MB batch: %v", err)
	}
}

func TestIdempotentRetry(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	const tb = "Current"
	if _, err := th.c.CreateTable(ctx, tb); err != nil {
		t.Fatal(err)
	}
	e := employee("Sales", "1", engine.Property{Name: "N", Value: engine.Int32(1)})
	r1, err := th.c.Insert(ctx, tb, e, client.WithID("cmd-1"))
	if err != nil {
		t.Fatal(err)
	}
	// The same command again: the first result, not EntityAlreadyExists.
	r2, err := th.c.Insert(ctx, tb, e, client.WithID("cmd-1"))
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !r2.Duplicate || r2.ETag != r1.ETag || r2.Seq != r1.Seq {
		t.Fatalf("retry reply %+v, first %+v", r2, r1)
	}
	// A different id is a different command.
	_, err = th.c.Insert(ctx, tb, e, client.WithID("cmd-2"))
	wantCode(t, err, engine.CodeEntityAlreadyExists)
	// Ids are remembered across a restart: the view is rebuilt from the journal.
	dir := th.dir
	th.stop(t)
	th = startHost(t, dir)
	r3, err := th.c.Insert(ctx, tb, e, client.WithID("cmd-1"))
	if err != nil || !r3.Duplicate || r3.ETag != r1.ETag {
		t.Fatalf("retry after restart: %+v, %v", r3, err)
	}
}

func TestJSONProtocol(t *testing.T) {
	th := startHost(t, "")
	ctx := ctxT(t)
	do := func(subject, body string) map[string]any {
		t.Helper()
		m, err := th.nc.RequestWithContext(ctx, subject, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		if err := json.Unmarshal(m.Data, &out); err != nil {
			t.Fatalf("reply %q is not JSON: %v", m.Data, err)
		}
		return out
	}
	if r := do("cairn.tables", `{"op":"CreateTable","table":"Employees"}`); r["error"] != nil {
		t.Fatalf("create: %v", r)
	}
	r := do("cairn.cmd.Employees", `{"op":"Insert","entity":{"PartitionKey":"Sales","RowKey":"1","Name":"Ann","Big@odata.type":"Edm.Int64","Big":"9007199254740993","Salary":5.0}}`)
	if r["etag"] == nil || r["seq"] == nil {
		t.Fatalf("insert reply %v", r)
	}
	r = do("cairn.cmd.Employees", `{"op":"Retrieve","partitionKey":"Sales","rowKey":"1"}`)
	ent, _ := r["entity"].(map[string]any)
	if ent["Big"] != "9007199254740993" || ent["Big@odata.type"] != "Edm.Int64" || ent["Name"] != "Ann" {
		t.Fatalf("retrieved %v", r)
	}
	r = do("cairn.cmd.Employees", `{"op":"Insert","entity":{"PartitionKey":"Sales","RowKey":"1"}}`)
	if e, _ := r["error"].(map[string]any); e["code"] != "EntityAlreadyExists" {
		t.Fatalf("duplicate insert reply %v", r)
	}
	r = do("cairn.cmd.Employees", `{"op":"Insert","entity":{"PartitionKey":"Sales","RowKey":"2","Age@odata.type":"Edm.Int32","Age":"x"}}`)
	if e, _ := r["error"].(map[string]any); e["code"] == nil || e["message"] == "" {
		t.Fatalf("bad value reply %v", r)
	}
	r = do("cairn.cmd.Employees", `{"op":"Frobnicate"}`)
	if e, _ := r["error"].(map[string]any); e["code"] != "InvalidInput" {
		t.Fatalf("unknown op reply %v", r)
	}
	r = do("cairn.cmd.Employees", `{not json`)
	if r["error"] == nil {
		t.Fatalf("garbage reply %v", r)
	}
}

// TestDataDirectoryLocked refuses a second host on a data directory in use:
// two servers on one JetStream store would corrupt it.
func TestDataDirectoryLocked(t *testing.T) {
	th := startHost(t, "")
	err := node.Run(context.Background(), node.Config{DataDir: th.dir, NATSListen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Log: quietLog()}, nil)
	if err == nil || !strings.Contains(err.Error(), "in use by another host") {
		t.Fatalf("second host on the same data directory: %v", err)
	}
}

// TestHTTPAddress: a busy HTTP port is reported at once; "off" serves no
// HTTP.
func TestHTTPAddress(t *testing.T) {
	th := startHost(t, "")
	busy := strings.TrimPrefix(th.h.HTTPURL(), "http://")
	err := node.Run(context.Background(), node.Config{DataDir: t.TempDir(), NATSListen: "127.0.0.1:0", HTTP: busy, Log: quietLog()}, nil)
	if err == nil || !strings.Contains(err.Error(), "http") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("a host on a busy HTTP port: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- node.Run(ctx, node.Config{DataDir: t.TempDir(), NATSListen: "127.0.0.1:0", HTTP: "off", Log: quietLog()}, func(h *node.Node) {
			if h.HTTPURL() != "" {
				t.Errorf("HTTP off, yet served at %s", h.HTTPURL())
			}
			cancel()
		})
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
