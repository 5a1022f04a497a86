package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/abi"
)

// TestAssemblyScriptHTTP: an HTTP trigger's request reaches the
// AssemblyScript guest whole, and the status and headers it responds
// with reach the runner whole, with maps and arrays of 16 entries or more
// (msgpack's map16 and array16) both ways.
func TestAssemblyScriptHTTP(t *testing.T) {
	m := loadASEcho(t, LoadOptions{})
	req := &abi.HTTPRequest{Method: "PUT", Path: "/a/b%2Fc", Route: "/a/{x}/{*rest}", Query: "q=1&r=%C3%A9", Caller: "key:ci",
		Params: map[string]string{},
		Header: map[string][]string{"Content-Type": {"text/plain; charset=utf-8", "ignored"}, "X-Empty": {}, "X-Many": nil}}
	for i := range 17 {
		req.Params[fmt.Sprintf("p%02d", i)] = strings.Repeat("é", i*3) // "" to 96 bytes: fixstr and str8
	}
	for i := range 20 {
		req.Header[fmt.Sprintf("X-H%02d", i)] = []string{strings.Repeat("v", i), "second"}
	}
	for i := range 18 {
		req.Header["X-Many"] = append(req.Header["X-Many"], fmt.Sprint(i))
	}
	h := newFakeRunner("http-echo")
	h.trigger.Kind, h.trigger.HTTP = abi.KindHTTP, req
	if err := m.Invoke(context.Background(), "s", h.call); err != nil {
		t.Fatal(err)
	}
	if want := "PUT /a/b%2Fc /a/{x}/{*rest} q=1&r=%C3%A9 key:ci text/plain; charset=utf-8 []"; string(h.output) != want {
		t.Errorf("output %q, want %q", h.output, want)
	}
	want := maps.Clone(req.Header)
	for k, v := range req.Params {
		want["X-Param-"+k] = []string{v}
	}
	if h.status != 202 || !maps.EqualFunc(h.header, want, slices.Equal) {
		t.Errorf("status %d, header %v; want 202, %v", h.status, h.header, want)
	}
	if len(want) < 16 || len(req.Header) < 16 || len(req.Params) < 16 {
		t.Fatalf("%d headers answered, %d sent, %d parameters: want 16 or more each", len(want), len(req.Header), len(req.Params))
	}
}

// TestAssemblyScriptHTTPAnswers: fields of the request the guest does
// not know are skipped, a missing or nil request is the guest's "no
// request", nil parameters and headers are empty, a refused respond is
// the guest's error, and a trigger cut short at any byte aborts the
// invocation before it responds.
func TestAssemblyScriptHTTPAnswers(t *testing.T) {
	m := loadASEcho(t, LoadOptions{})
	extra := []any{1, -300, 1 << 40, 3.5, strings.Repeat("y", 300), []byte{1, 2}, nil, true,
		map[string]any{"k": []any{}}, make([]any, 20), map[string]any{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8,
			"i": 9, "j": 10, "k": 11, "l": 12, "m": 13, "n": 14, "o": 15, "p": 16}}
	// trigger encodes a trigger whose "http" is req, keys sorted.
	trigger := func(body string, req any) []byte {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		enc.SetSortMapKeys(true)
		if err := enc.Encode(map[string]any{"trig": map[string]any{"id": "t-1", "kind": "http", "fn": "echo", "ver": 1,
			"b": []byte(body), "dq": 1, "http": req}}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	// answering serves the runner calls, the trigger given.
	answering := func(h *fakeRunner, trig []byte) func(abi.Op, []byte) []byte {
		return func(op abi.Op, req []byte) []byte {
			if op == abi.OpTrigger {
				return trig
			}
			return h.call(op, req)
		}
	}
	full := map[string]any{"0a": extra, "c": "anonymous", "h": map[string]any{"X-A": []string{"1"}}, "m": "POST",
		"p": "/orders/7", "pa": map[string]any{"id": "7"}, "qs": "gift=yes", "r": "/orders/{id}", "zz": extra}

	t.Run("unknown fields", func(t *testing.T) {
		h := newFakeRunner("")
		if err := m.Invoke(context.Background(), "s", answering(h, trigger("http", full))); err != nil {
			t.Fatal(err)
		}
		if string(h.output) != "POST /orders/{id} gift=yes" || h.status != 201 || h.header["X-Order"][0] != "7" {
			t.Errorf("output %q, status %d, header %v", h.output, h.status, h.header)
		}
	})
	t.Run("nil parameters and headers", func(t *testing.T) {
		h := newFakeRunner("")
		trig := trigger("http-echo", map[string]any{"m": "GET", "pa": nil, "h": nil})
		if err := m.Invoke(context.Background(), "s", answering(h, trig)); err != nil {
			t.Fatal(err)
		}
		if string(h.output) != "GET      []" || h.status != 202 || len(h.header) != 0 {
			t.Errorf("output %q, status %d, header %v", h.output, h.status, h.header)
		}
	})
	for name, trig := range map[string][]byte{
		"no request":  nil, // an invoke trigger
		"nil request": trigger("http", nil),
	} {
		t.Run(name, func(t *testing.T) {
			h := newFakeRunner("http")
			call := h.call
			if trig != nil {
				call = answering(h, trig)
			}
			err := m.Invoke(context.Background(), "s", call)
			var ge *GuestError
			if !errors.As(err, &ge) || ge.Message != "no HTTP request in the trigger" || slices.Contains(h.ops, abi.OpRespond) {
				t.Fatalf("err %v (%T), ops %v; want GuestError no HTTP request in the trigger, without respond", err, err, h.ops)
			}
		})
	}
	t.Run("respond refused", func(t *testing.T) {
		h := newFakeRunner("http-bad")
		h.trigger.Kind, h.trigger.HTTP = abi.KindHTTP, &abi.HTTPRequest{Method: "GET"}
		var sent abi.RespondRequest
		refusing := func(op abi.Op, req []byte) []byte {
			if op != abi.OpRespond {
				return h.call(op, req)
			}
			if err := abi.Unmarshal(req, &sent); err != nil {
				t.Errorf("respond's request: %v", err)
			}
			b, err := abi.Marshal(&abi.Response{Error: abi.ErrorOf(engine.Errorf(engine.CodeInvalidInput, "respond: status %d is not 200..599", sent.Status))})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		err := m.Invoke(context.Background(), "s", refusing)
		var ge *GuestError
		if !errors.As(err, &ge) || ge.Message != "InvalidInput: respond: status 600 is not 200..599" || sent.Status != 600 || len(sent.Header) != 0 {
			t.Fatalf("err %v (%T), sent %+v; want GuestError InvalidInput, status 600 sent without headers", err, err, sent)
		}
	})
	t.Run("cut short", func(t *testing.T) {
		trig := trigger("http", full)
		for cut := 0; cut < len(trig); cut += 1 + cut/16 {
			h := newFakeRunner("")
			err := m.Invoke(context.Background(), "s", answering(h, trig[:cut]))
			var ce *CrashError
			if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "decode the answer") || h.status != 0 || h.output != nil {
				t.Fatalf("a trigger cut to %d of %d bytes: %v, status %d, output %q", cut, len(trig), err, h.status, h.output)
			}
		}
	})
}
