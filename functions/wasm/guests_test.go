package wasm

import (
	"bytes"
	"context"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/abi"
	"github.com/cairn-dev/cairn/functions/guesttest"
)

// buildGuest builds testdata/<name> for wasip1: as a reactor
// (-buildmode=c-shared) except noexport, a plain command.
func buildGuest(t testing.TB, name string) []byte {
	t.Helper()
	return guesttest.Module(t, guesttest.Build{Dir: "testdata/" + name, Command: name == "noexport"})
}

// logs collects what the shared runtime logs.
var logs syncBuffer

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var shared struct {
	once sync.Once
	rt   *Runtime
	err  error
}

// sharedRuntime is one runtime for the tests.
func sharedRuntime(t testing.TB) *Runtime {
	t.Helper()
	shared.once.Do(func() {
		shared.rt, shared.err = NewRuntime(context.Background(), Config{
			Log: slog.New(slog.NewTextHandler(&logs, nil)),
		})
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.rt
}

var pinned sync.Map // guest name -> struct{}

// pin compiles a guest on the shared runtime and never closes it, so that
// the tests' Loads and Validates reuse the compiled code instead of
// compiling again when the last module using it is closed (runtimes of
// other memory limits share the compilation cache).
func pin(t testing.TB, name string) []byte {
	t.Helper()
	module := buildGuest(t, name)
	if _, done := pinned.LoadOrStore(name, struct{}{}); !done {
		rt := sharedRuntime(t)
		e, err := rt.engine(context.Background(), rt.cfg.MemoryLimitPages)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.rt.CompileModule(context.Background(), module); err != nil {
			t.Fatal(err)
		}
	}
	return module
}

// loadEcho loads the echo guest on the shared runtime.
func loadEcho(t testing.TB, o LoadOptions) *Module {
	t.Helper()
	if o.Name == "" {
		o.Name = "echo"
	}
	m, err := sharedRuntime(t).Load(context.Background(), pin(t, "echo"), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// fakeRunner answers the runner calls of one invocation, as the function
// runner does, over a map instead of the store.
type fakeRunner struct {
	trigger  abi.Trigger
	rows     map[string]*engine.Entity // by pk + "/" + rk
	writes   []abi.WriteRequest
	queries  []abi.QueryRequest
	enqueued []abi.EnqueueRequest
	output   []byte
	status   int
	header   map[string][]string
	logs     []string
	failure  string
	ops      []abi.Op
}

func newFakeRunner(body string) *fakeRunner {
	return &fakeRunner{
		trigger: abi.Trigger{ID: "t-1", Kind: abi.KindInvoke, Function: "echo", Version: 1, Body: []byte(body), DequeueCount: 1},
		rows:    map[string]*engine.Entity{},
	}
}

func (h *fakeRunner) call(op abi.Op, req []byte) []byte {
	h.ops = append(h.ops, op)
	resp, err := h.serve(op, req)
	if err != nil {
		resp = abi.Response{Error: abi.ErrorOf(err)}
	}
	b, err := abi.Marshal(&resp)
	if err != nil {
		panic(err)
	}
	return b
}

func (h *fakeRunner) serve(op abi.Op, req []byte) (abi.Response, error) {
	switch op {
	case abi.OpTrigger:
		return abi.Response{Trigger: &h.trigger}, nil
	case abi.OpGet:
		var r abi.GetRequest
		if err := abi.Unmarshal(req, &r); err != nil {
			return abi.Response{}, err
		}
		e := h.rows[r.PartitionKey+"/"+r.RowKey]
		if e == nil {
			return abi.Response{}, nil
		}
		return abi.Response{Entity: &abi.Entity{Entity: e, ETag: "etag-" + e.RowKey}}, nil
	case abi.OpQuery:
		var r abi.QueryRequest
		if err := abi.Unmarshal(req, &r); err != nil {
			return abi.Response{}, err
		}
		h.queries = append(h.queries, r)
		var es []abi.Entity
		for k, e := range h.rows {
			if strings.HasPrefix(k, r.PartitionKey+"/") {
				es = append(es, abi.Entity{Entity: e})
			}
		}
		sort.Slice(es, func(i, j int) bool { return es[i].RowKey < es[j].RowKey })
		if r.Top > 0 && len(es) > r.Top {
			es = es[:r.Top]
		}
		return abi.Response{Entities: es}, nil
	case abi.OpWrite:
		var r abi.WriteRequest
		if err := abi.Unmarshal(req, &r); err != nil {
			return abi.Response{}, err
		}
		h.writes = append(h.writes, r)
		e := r.Entity.Entity
		key := e.PartitionKey + "/" + e.RowKey
		cur := h.rows[key]
		switch r.Op {
		case "Insert":
			if cur != nil {
				return abi.Response{}, engine.Errorf(engine.CodeEntityAlreadyExists, "the entity exists")
			}
		case "Replace", "Merge", "Delete":
			if cur == nil {
				return abi.Response{}, engine.Errorf(engine.CodeResourceNotFound, "no entity")
			}
		}
		switch r.Op {
		case "Delete":
			delete(h.rows, key)
		case "Merge", "InsertOrMerge":
			if cur != nil {
				e = engine.NewEntity(e.PartitionKey, e.RowKey, engine.Merged(cur.Properties, e.Properties)...)
			}
			h.rows[key] = e
		default:
			h.rows[key] = e
		}
		return abi.Response{}, nil
	case abi.OpEnqueue:
		var r abi.EnqueueRequest
		if err := abi.Unmarshal(req, &r); err != nil {
			return abi.Response{}, err
		}
		h.enqueued = append(h.enqueued, r)
		return abi.Response{}, nil
	case abi.OpOutput:
		h.output = req
		return abi.Response{}, nil
	case abi.OpRespond:
		var r abi.RespondRequest
		if err := abi.Unmarshal(req, &r); err != nil {
			return abi.Response{}, err
		}
		h.status, h.header = r.Status, r.Header
		return abi.Response{}, nil
	case abi.OpLog:
		h.logs = append(h.logs, string(req))
		return abi.Response{}, nil
	case abi.OpFail:
		h.failure = string(req)
		return abi.Response{}, nil
	}
	return abi.Response{}, engine.Errorf(engine.CodeInvalidInput, "unknown operation %d", int32(op))
}
