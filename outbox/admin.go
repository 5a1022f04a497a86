package outbox

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/engine"
)

// AdminPath is where the node serves the relay's part of the operators'
// API (docs/PROTOCOL.md, Outbox messages):
//
//	GET  /$cairn/outbox                              every table's stored position, head, lag and blocked partitions, and what this node relays
//	POST /$cairn/outbox/retry?table=T                try T's blocked messages now
//	POST /$cairn/outbox/skip?table=T&seq=S&index=I   never send the blocked message I (from 0, among all the messages of the record, across its commands) of T's record S
const AdminPath = "/$cairn/outbox"

// AdminHandler serves AdminPath. It authenticates nobody: the node serves
// it behind the operator token.
func (r *Relay) AdminHandler() http.Handler { return http.HandlerFunc(r.admin) }

func (r *Relay) admin(w http.ResponseWriter, req *http.Request) {
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	fail := func(status int, code string, err error) {
		reply(status, map[string]string{"code": code, "error": err.Error()})
	}
	if r.kv == nil {
		fail(http.StatusServiceUnavailable, "ServerBusy", errors.New("the outbox relay is starting"))
		return
	}
	ctx := req.Context()
	op := strings.Trim(strings.TrimPrefix(req.URL.Path, AdminPath), "/")
	switch {
	case op == "" && req.Method == http.MethodGet:
		reports, err := Reports(ctx, r.js, r.cfg.Prefix)
		if err != nil {
			fail(http.StatusInternalServerError, "InternalError", err)
			return
		}
		reply(http.StatusOK, struct {
			Tables []Report      `json:"tables"`
			Node   string        `json:"node"`
			Relays []TableStatus `json:"relays"`
		}{reports, r.cfg.NodeID, r.Status()})
		return
	case (op == "retry" || op == "skip") && req.Method == http.MethodPost:
	default:
		fail(http.StatusNotFound, "ResourceNotFound", errors.New("GET "+AdminPath+", POST "+AdminPath+"/retry?table=, POST "+AdminPath+"/skip?table=&seq=&index="))
		return
	}
	q := req.URL.Query()
	stream, err := StreamOf(ctx, r.js, r.cfg.Prefix, q.Get("table"))
	if err != nil {
		fail(http.StatusNotFound, "TableNotFound", err)
		return
	}
	if op == "retry" {
		if err := Retry(ctx, r.kv, stream); err != nil {
			fail(http.StatusInternalServerError, "InternalError", err)
			return
		}
		reply(http.StatusAccepted, map[string]string{"stream": stream})
		return
	}
	seq, err1 := strconv.ParseUint(q.Get("seq"), 10, 64)
	index, err2 := strconv.Atoi(q.Get("index"))
	if err1 != nil || err2 != nil || seq == 0 || index < 0 {
		fail(http.StatusBadRequest, "InvalidInput", errors.New("skip needs seq (a record's journal sequence) and index (the message's place among all the record's messages, from 0, across its commands: the last two numbers of Cairn-Outbox-Position)"))
		return
	}
	if err := Skip(ctx, r.js, r.kv, stream, seq, index); errors.Is(err, ErrNotBlocked) {
		fail(http.StatusBadRequest, "InvalidInput", err)
		return
	} else if engine.ErrorCode(err) == engine.CodeHistoryTruncated {
		fail(http.StatusGone, string(engine.CodeHistoryTruncated), err)
		return
	} else if err != nil {
		fail(http.StatusInternalServerError, "InternalError", err)
		return
	}
	reply(http.StatusAccepted, map[string]any{"stream": stream, "seq": seq, "index": index})
}
