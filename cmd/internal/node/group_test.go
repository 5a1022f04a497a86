package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeComponent records when it runs and stops; it serves as soon as it
// runs when auto is set, otherwise once the test closes ready, and fails
// with what the test sends on fail.
type fakeComponent struct {
	name  string
	auto  bool
	log   *eventLog
	ready chan struct{}
	fail  chan error
}

type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

func newFake(name string, l *eventLog) *fakeComponent {
	return &fakeComponent{name: name, log: l, ready: make(chan struct{}), fail: make(chan error, 1)}
}

func (f *fakeComponent) Ready() <-chan struct{} { return f.ready }

func (f *fakeComponent) Run(ctx context.Context) error {
	f.log.add("run " + f.name)
	if f.auto {
		close(f.ready)
	}
	select {
	case <-ctx.Done():
		f.log.add("stop " + f.name)
		return nil
	case err := <-f.fail:
		f.log.add("fail " + f.name)
		return err
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestGroupStartsInOrderAndStopsInReverse(t *testing.T) {
	l := &eventLog{}
	g := newGroup(quiet())
	a, b, c := newFake("a", l), newFake("b", l), newFake("c", l)
	for _, f := range []*fakeComponent{a, b, c} {
		f.auto = true
		if err := g.Start(context.Background(), f.name, f); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	want := []string{"run a", "run b", "run c", "stop c", "stop b", "stop a"}
	if got := l.get(); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

func TestGroupWaitsForReadiness(t *testing.T) {
	l := &eventLog{}
	g := newGroup(quiet())
	a := newFake("a", l)
	started := make(chan error, 1)
	go func() { started <- g.Start(context.Background(), "a", a) }()
	select {
	case err := <-started:
		t.Fatalf("Start returned before the component was ready: %v", err)
	default:
	}
	close(a.ready)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestGroupComponentFailingBeforeReady(t *testing.T) {
	l := &eventLog{}
	g := newGroup(quiet())
	a, b := newFake("a", l), newFake("b", l)
	a.auto = true
	if err := g.Start(context.Background(), "a", a); err != nil {
		t.Fatal(err)
	}
	b.fail <- errors.New("no stream")
	err := g.Start(context.Background(), "b", b)
	if err == nil || !strings.Contains(err.Error(), "b: no stream") {
		t.Fatalf("Start: %v", err)
	}
	<-g.Failed()
	err = g.Stop()
	if err == nil || !strings.Contains(err.Error(), "no stream") {
		t.Fatalf("Stop: %v", err)
	}
	if got := l.get(); got[len(got)-1] != "stop a" {
		t.Fatalf("a not stopped after b failed: %q", got)
	}
}

func TestGroupComponentStoppingOnItsOwnFailsTheGroup(t *testing.T) {
	l := &eventLog{}
	g := newGroup(quiet())
	a, b := newFake("a", l), newFake("b", l)
	for _, f := range []*fakeComponent{a, b} {
		f.auto = true
		if err := g.Start(context.Background(), f.name, f); err != nil {
			t.Fatal(err)
		}
	}
	a.fail <- nil // a returns nil without being asked: still a failure
	<-g.Failed()
	err := g.Stop()
	if err == nil || !strings.Contains(err.Error(), "a stopped") {
		t.Fatalf("Stop: %v", err)
	}
	want := []string{"run a", "run b", "fail a", "stop b"}
	if got := l.get(); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

func TestGroupStartBoundedByContext(t *testing.T) {
	g := newGroup(quiet())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a := newFake("a", &eventLog{})
	if err := g.Start(ctx, "a", a); err == nil || !strings.Contains(err.Error(), "did not start") {
		t.Fatalf("Start: %v", err)
	}
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
}
