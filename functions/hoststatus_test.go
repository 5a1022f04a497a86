package functions

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/journal/jstest"
)

// TestHostStatus: two runners on one server each answer the status
// request with their node name and the functions they run (the built-in
// archive on one, a native function on the other, marked as such), and
// a stopped runner answers no more.
func TestHostStatus(t *testing.T) {
	_, nc := jstest.Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _, stopA, doneA := startRunner(t, ctx, nc, Config{Node: "a"})
	b, _, stopB, doneB := startRunner(t, ctx, nc, Config{Node: "b", NoBuiltins: true})
	defer func() { stopB(); <-doneB }()
	if err := b.Register(Manifest{Name: "native", Trigger: Trigger{Queue: "native"}}, NativeFunc(func(context.Context, *Invocation) error { return nil })); err != nil {
		t.Fatal(err)
	}

	sts, err := GatherHostStatus(ctx, nc, "cairn", 10*time.Second, time.Second)
	if err != nil || len(sts) != 2 || sts[0].Node != "a" || sts[1].Node != "b" {
		t.Fatalf("statuses %+v, %v; want a and b", sts, err)
	}
	if v, ok := sts[0].Running("archive"); !ok || v != 0 || len(sts[0].Functions) != 1 || sts[0].Functions[0].Builtin != "archive" {
		t.Fatalf("a runs %+v", sts[0].Functions)
	}
	if _, ok := sts[1].Running("archive"); ok || len(sts[1].Functions) != 1 || sts[1].Functions[0].Builtin != "native" {
		t.Fatalf("b runs %+v", sts[1].Functions)
	}

	stopA()
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	sts, err = GatherHostStatus(ctx, nc, "cairn", 10*time.Second, time.Second)
	if err != nil || len(sts) != 1 || sts[0].Node != "b" {
		t.Fatalf("after a stopped: %+v, %v", sts, err)
	}
}
