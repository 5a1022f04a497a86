package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/queueadmin"
)

// Prefix is the path under which the node serves the operators' API
// of functions and queues (docs/FUNCTIONS.md):
//
//	GET    /$cairn/functions                          deployed functions, then the node's built-ins
//	GET    /$cairn/functions/<name>/history           its versions, oldest first
//	POST   /$cairn/functions/<name>/rollback[?version=] back to a version (default: the one before)
//	POST   /$cairn/functions/<name>/invoke            the body to its direct subject: its reply or error
//	GET    /$cairn/functions/<name>/logs              its latest log lines on this node
//	GET    /$cairn/functions/<name>/settings          its settings and secrets (secrets by name only; settings.go)
//	POST   /$cairn/functions/<name>/settings/<key>    set a setting (secrets/<key>: a secret) to the body; DELETE removes
//	GET    /$cairn/functions/<name>/keys              its keys (HTTP triggers): id, name, created
//	POST   /$cairn/functions/<name>/keys[?name=]      a new key: 201 with its text, shown this once
//	DELETE /$cairn/functions/<name>/keys/<id>         revoke a key
//	GET    /$cairn/runner                             this node's invocation counters
//	GET    /$cairn/queues                             queues: depth, oldest message, function
//	GET    /$cairn/queues/<queue>/peek[?from=&limit=] messages waiting, not taken
//	POST   /$cairn/queues/<queue>                     enqueue the body (Cairn-Position: as functions.HeaderPosition)
//	POST   /$cairn/queues/<queue>/purge               remove all its messages: {"purged": n}
//	GET    /$cairn/queues/<queue>-poison[?from=&limit=] poison messages
//	GET    /$cairn/queues/<queue>-poison/<seq>        one of them
//	POST   /$cairn/queues/<queue>-poison/<seq>/requeue
//	DELETE /$cairn/queues/<queue>-poison/<seq>
//	POST   /$cairn/queues/<queue>-poison/requeue?<filter> requeue those matching (queueadmin.ParsePoisonFilter)
//	POST   /$cairn/queues/<queue>-poison/delete?<filter>  delete those matching
const Prefix = "/$cairn/"

// Handler serves the operators' API of a node's runner. It authenticates
// nobody: the node serves it behind the operator token
// (cmd/internal/operator). Every request that changes something is a POST
// or a DELETE. It asks the runner for its queue stream and registry per
// request, so it may be made before the runner is Ready, and must serve
// only after.
type Handler struct {
	rn     *functions.Runner
	queues *queueadmin.Admin
	nc     *nats.Conn
	prefix string
}

// New returns the operators' API of rn and of queues, the administration
// of rn's queue stream. nc sends the test invocations (POST …/invoke) to
// <prefix>.fn.<name>, as any client does.
func New(rn *functions.Runner, queues *queueadmin.Admin, nc *nats.Conn, prefix string) *Handler {
	return &Handler{rn: rn, queues: queues, nc: nc, prefix: prefix}
}

// functionStatus is a deployed function as GET /$cairn/functions shows
// it: its manifest, and why the node serving the request did not load it.
type functionStatus struct {
	functions.Manifest
	LoadError string `json:"loadError,omitempty"`
	// Invocations (retries included), Failures and messages Poisoned by
	// the node answering, since it started.
	Invocations uint64 `json:"invocations"`
	Failures    uint64 `json:"failures"`
	Poisoned    uint64 `json:"poisoned"`
}

// ServeHTTP answers one request of the operators' API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rn := h.rn
	parts := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, Prefix), "/"), "/")
	fail := func(status int, err error) {
		code := adminCode(status)
		if engine.ErrorCode(err) == functions.CodeQueueBacklogExceeded {
			// The queue is full: a coded answer the caller can wait on.
			status, code = http.StatusServiceUnavailable, string(functions.CodeQueueBacklogExceeded)
			rn.Stats().QueueFull.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"code": code, "error": err.Error()})
	}
	reply := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	ctx := r.Context()
	// A function's name in the path is checked before anything is looked
	// up by it.
	if len(parts) >= 3 && parts[0] == "functions" {
		if err := functions.ValidateName("function", parts[1]); err != nil {
			fail(http.StatusBadRequest, err)
			return
		}
	}
	switch {
	case len(parts) >= 3 && parts[0] == "functions" && parts[2] == "keys":
		h.keys(w, r, parts[1], parts[3:], reply, fail)
	case len(parts) == 1 && parts[0] == "functions" && r.Method == http.MethodGet:
		ms, err := rn.Registry().List(ctx)
		if err != nil {
			fail(http.StatusInternalServerError, err)
			return
		}
		ms = append(ms, h.unregistered(ms)...) // built-ins: no history, no rollback
		out := make([]functionStatus, len(ms))
		for i, m := range ms {
			out[i].Manifest = m
			if f, ok := rn.LoadFailure(m.Name); ok && f.Version == m.Version {
				out[i].LoadError = f.Error
			}
			out[i].Invocations, out[i].Failures, out[i].Poisoned = rn.FunctionTotals(m.Name)
		}
		reply(out)
	case len(parts) == 2 && parts[0] == "queues" && r.Method == http.MethodPost && !strings.HasSuffix(parts[1], functions.PoisonSuffix):
		body, err := io.ReadAll(io.LimitReader(r.Body, functions.MaxMessage+1))
		if err != nil {
			fail(http.StatusBadRequest, err)
			return
		}
		if err := rn.Queues().EnqueueAfter(ctx, parts[1], body, r.Header.Get(functions.HeaderPosition)); err != nil {
			st := http.StatusInternalServerError // the queue stream failed
			if engine.ErrorCode(err) == engine.CodeInvalidInput {
				st = http.StatusBadRequest
			}
			fail(st, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	case len(parts) == 2 && parts[0] == "queues" && r.Method == http.MethodGet:
		from, _ := strconv.ParseUint(r.URL.Query().Get("from"), 10, 64)
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		if limit <= 0 || limit > 1000 {
			limit = 100
		}
		ps, err := h.queues.Poison(ctx, parts[1], from, limit)
		if err != nil {
			fail(codedStatus(err), err)
			return
		}
		if ps == nil {
			ps = []queueadmin.PoisonMessage{}
		}
		reply(ps)
	case len(parts) == 1 && parts[0] == "runner" && r.Method == http.MethodGet:
		reply(h.runnerStats())
	case len(parts) == 1 && parts[0] == "queues" && r.Method == http.MethodGet:
		qs, err := h.listQueues(ctx)
		if err != nil {
			fail(http.StatusInternalServerError, err)
			return
		}
		reply(qs)
	case len(parts) == 3 && parts[0] == "queues" && parts[2] == "peek" && r.Method == http.MethodGet:
		from, _ := strconv.ParseUint(r.URL.Query().Get("from"), 10, 64)
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		if limit <= 0 || limit > 1000 {
			limit = 100
		}
		ms, err := h.queues.Peek(ctx, parts[1], from, limit)
		if err != nil {
			fail(codedStatus(err), err)
			return
		}
		reply(ms)
	case len(parts) == 3 && parts[0] == "functions" && parts[2] == "history" && r.Method == http.MethodGet:
		hist, err := rn.Registry().History(ctx, parts[1])
		if err == nil && len(hist) == 0 {
			err = fmt.Errorf("function %q: %w", parts[1], functions.ErrNotDeployed)
		}
		if err != nil {
			fail(codedStatus(err), err)
			return
		}
		reply(hist)
	case len(parts) == 3 && parts[0] == "functions" && parts[2] == "rollback" && r.Method == http.MethodPost:
		version := 0
		if v := r.URL.Query().Get("version"); v != "" {
			if version, _ = strconv.Atoi(v); version <= 0 {
				fail(http.StatusBadRequest, errors.New("version must be a version number"))
				return
			}
		}
		m, err := rn.Registry().Rollback(ctx, parts[1], version)
		if err != nil {
			fail(codedStatus(err), err)
			return
		}
		reply(m)
	case len(parts) == 3 && parts[0] == "queues" && parts[2] == "purge" && r.Method == http.MethodPost:
		n, err := h.queues.Purge(ctx, parts[1])
		if err != nil {
			fail(codedStatus(err), err)
			return
		}
		reply(map[string]uint64{"purged": n})
	case len(parts) == 3 && parts[0] == "queues" && (parts[2] == "requeue" || parts[2] == "delete") && r.Method == http.MethodPost:
		if !strings.HasSuffix(parts[1], functions.PoisonSuffix) {
			fail(http.StatusBadRequest, fmt.Errorf("bulk requeue and delete act on a poison queue: %s%s", parts[1], functions.PoisonSuffix))
			return
		}
		f, err := queueadmin.ParsePoisonFilter(r.URL.Query())
		if err != nil {
			fail(http.StatusBadRequest, err)
			return
		}
		res, err := h.queues.BulkPoison(ctx, parts[1], f, parts[2] == "requeue")
		if err != nil {
			fail(codedStatus(err), err)
			return
		}
		reply(res)
	case len(parts) == 3 && parts[0] == "functions" && parts[2] == "invoke" && r.Method == http.MethodPost:
		res, err := h.testInvoke(ctx, parts[1], r)
		if err != nil {
			fail(codedStatus(err), err)
			return
		}
		reply(res)
	case len(parts) == 3 && parts[0] == "functions" && parts[2] == "logs" && r.Method == http.MethodGet:
		// A function this node runs, or ran, or that is deployed (and
		// did not load here) has lines, maybe none.
		lines, logged := rn.FunctionLogs(parts[1])
		if _, ok := rn.Version(parts[1]); !ok && !logged {
			if _, err := rn.Registry().Get(ctx, parts[1]); err != nil {
				fail(codedStatus(err), err)
				return
			}
		}
		reply(lines)
	case (len(parts) == 3 || len(parts) == 4) && parts[0] == "functions" && (parts[2] == "settings" || parts[2] == "secrets"):
		h.serveSettings(w, r, parts, reply, fail)
	case (len(parts) == 3 || len(parts) == 4) && parts[0] == "queues":
		seq, err := strconv.ParseUint(parts[2], 10, 64)
		if err != nil {
			fail(http.StatusBadRequest, errors.New("a poison message is named by its sequence number"))
			return
		}
		switch {
		case len(parts) == 3 && r.Method == http.MethodGet:
			p, err := h.queues.PoisonMessage(ctx, parts[1], seq)
			if err != nil {
				fail(codedStatus(err), err)
				return
			}
			reply(p)
		case len(parts) == 3 && r.Method == http.MethodDelete:
			if err := h.queues.Delete(ctx, parts[1], seq); err != nil {
				fail(codedStatus(err), err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		case len(parts) == 4 && parts[3] == "requeue" && r.Method == http.MethodPost:
			if err := h.queues.Requeue(ctx, parts[1], seq); err != nil {
				fail(codedStatus(err), err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			fail(http.StatusMethodNotAllowed, errors.New("use GET or DELETE on a poison message, POST on …/requeue"))
		}
	default:
		fail(http.StatusNotFound, errors.New("unknown path: see docs/FUNCTIONS.md for the operators' API"))
	}
}

// codedStatus is the status of an error of the operators' API:
// InvalidInput is the caller's (400), a missing function or message is
// not found (404), a test invocation without a reply in time 504,
// anything else the node's (500).
func codedStatus(err error) int {
	switch code := engine.ErrorCode(err); {
	case code == engine.CodeInvalidInput:
		return http.StatusBadRequest
	case code == engine.CodeResourceNotFound, errors.Is(err, queueadmin.ErrNoMessage), errors.Is(err, functions.ErrNotDeployed):
		return http.StatusNotFound
	case code == engine.CodeRequestBodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case code == engine.CodeServerBusy:
		return http.StatusServiceUnavailable
	case errors.Is(err, errInvokeTimeout):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// adminCode is the code of an operators' API error with this status, in
// the Azure style of the rest of the node's errors.
func adminCode(status int) string {
	switch status {
	case http.StatusNotFound:
		return "ResourceNotFound"
	case http.StatusMethodNotAllowed:
		return "UnsupportedHttpVerb"
	case http.StatusInternalServerError:
		return "InternalError"
	case http.StatusGatewayTimeout:
		return "OperationTimedOut"
	case http.StatusRequestEntityTooLarge:
		return string(engine.CodeRequestBodyTooLarge)
	case http.StatusServiceUnavailable:
		return string(engine.CodeServerBusy)
	}
	return "InvalidInput"
}

// keys serves a function's keys: list, create, revoke.
func (h *Handler) keys(w http.ResponseWriter, r *http.Request, fn string, rest []string, reply func(any), fail func(int, error)) {
	ks := h.rn.Keys()
	ctx := r.Context()
	switch {
	case len(rest) == 0 && r.Method == http.MethodGet:
		list, err := ks.List(ctx, fn)
		if err != nil {
			fail(http.StatusInternalServerError, err)
			return
		}
		out := make([]functions.KeyInfo, len(list))
		for i, k := range list {
			out[i] = k.Info()
		}
		reply(out)
	case len(rest) == 0 && r.Method == http.MethodPost:
		name := r.URL.Query().Get("name")
		if name == "" {
			name = "default"
		}
		k, text, err := ks.Create(ctx, fn, name, time.Now())
		if err != nil {
			fail(codedStatus(err), err)
			return
		}
		h.waitCopy(ctx, h.rn.Keys().WaitCurrent)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(struct {
			functions.KeyInfo
			Key string `json:"key"`
		}{k.Info(), text})
	case len(rest) == 1 && r.Method == http.MethodDelete:
		err := ks.Revoke(ctx, fn, rest[0])
		switch {
		case errors.Is(err, functions.ErrNoSuchKey):
			fail(http.StatusNotFound, err)
		case err != nil:
			fail(http.StatusInternalServerError, err)
		default:
			h.waitCopy(ctx, h.rn.Keys().WaitCurrent)
			w.WriteHeader(http.StatusNoContent)
		}
	default:
		fail(http.StatusMethodNotAllowed, fmt.Errorf("%s: use GET or POST …/keys, DELETE …/keys/<id>", r.Method))
	}
}
