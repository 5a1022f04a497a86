package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal/values"
)

// TestValueCrash: a node killed by SIGKILL after a write that references
// an uploaded value was acknowledged, and between another upload and the
// write that would have referenced it. Started again, it serves the
// acknowledged entity's value intact, and its sweep removes the value
// never referenced (within the window, the margin and one scan interval,
// here a few seconds) while keeping the held one.
func TestValueCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts host processes")
	}
	const window, margin, every = 2 * time.Second, time.Second, time.Second
	dir, listen, httpAddr := t.TempDir(), nodetest.FreeAddr(t), nodetest.FreeAddr(t)
	cc := nodetest.ChildConfig{DataDir: dir, NATSListen: listen, HTTP: httpAddr,
		ClaimWindow: window, ValueSweepMargin: margin, ValueSweepEvery: every}
	base := "http://" + httpAddr
	c1 := nodetest.StartChild(t, cc)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := retryingClient(t, listen)
	if _, err := cl.CreateTable(ctx, "Staff"); err != nil {
		t.Fatal(err)
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	photo := make([]byte, 300<<10) // three chunks of the store
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range photo {
		photo[i] = byte(r.Uint32())
	}
	upload := func(rk string, body []byte) string {
		resp, b := signedValueAt(t, base, http.MethodPut, "Staff", "Sales", rk, "", body)
		var up struct{ Reference string }
		if err := json.Unmarshal(b, &up); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("upload: %s %s", resp.Status, b)
		}
		return up.Reference
	}
	held := upload("1", photo)
	if _, err := cl.Insert(ctx, "Staff", withRef("Sales", "1", "Photo", held)); err != nil {
		t.Fatal(err)
	}
	orphan := upload("2", []byte("uploaded, never referenced"))
	// Killed before the write that would have referenced it.
	c1.Kill(t)
	uploaded := time.Now()

	c2 := nodetest.StartChild(t, cc)
	resp, b := signedValueAt(t, base, http.MethodGet, "Staff", "Sales", "1", "Photo", nil)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(b, photo) {
		t.Fatalf("download after the kill: %s, %d bytes, equal %v", resp.Status, len(b), bytes.Equal(b, photo))
	}
	creds, err := natsauth.Read(filepath.Join(dir, "nats", "node.user"))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect("nats://"+listen, creds.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	store, err := values.Open(ctx, js, "cairn", 1)
	if err != nil {
		t.Fatal(err)
	}
	has := func(rk, ref string) bool {
		k := values.Key{Account: httpapi.DevAccountName, Table: "Staff", PartitionKey: "Sales", RowKey: rk}
		_, err := store.Info(ctx, k, strings.TrimPrefix(ref, engine.ValueRefPrefix))
		if err != nil && !errors.Is(err, values.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	for has("2", orphan) {
		select {
		case <-ctx.Done():
			t.Fatalf("the value never referenced is still stored:\n%s", c2.Tail())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Logf("the value never referenced swept %v after the kill (window %v + margin %v + interval %v)",
		time.Since(uploaded).Round(100*time.Millisecond), window, margin, every)
	// The held value, as old, is looked at by the same scans: give them
	// a few more intervals.
	time.Sleep(3 * every)
	if !has("1", held) {
		t.Fatal("the sweep removed the value an acknowledged entity holds")
	}
	resp, b = signedValueAt(t, base, http.MethodGet, "Staff", "Sales", "1", "Photo", nil)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(b, photo) {
		t.Fatalf("download after the sweep: %s, %d bytes", resp.Status, len(b))
	}
}
