package node_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/functions"
)

// eventually polls cond until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustTable(t testing.TB, c *client.Client, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := c.CreateTable(ctxT(t), n); err != nil {
			t.Fatal(err)
		}
	}
}

func namedEmployee(dept, id, name string) *engine.Entity {
	return engine.NewEntity(dept, id, engine.Property{Name: "Name", Value: engine.String(name)})
}

// exists reports whether an entity is in a table.
func exists(t testing.TB, c *client.Client, table, pk, rk string) bool {
	t.Helper()
	_, _, err := c.Retrieve(ctxT(t), table, pk, rk)
	if engine.ErrorCode(err) == engine.CodeResourceNotFound {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func archiveMsg(dept, id string) []byte {
	return fmt.Appendf(nil, `{"from":"Current","to":"Archive","partitionKey":%q,"rowKey":%q}`, dept, id)
}

func fast(m functions.Manifest) functions.Manifest {
	m.BackoffMin = functions.Duration(30 * time.Millisecond)
	m.BackoffMax = functions.Duration(200 * time.Millisecond)
	return m
}

var _ = strings.Contains
