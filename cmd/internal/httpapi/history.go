package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/projections"
)

// HistoryJournal is what the history resource needs of the journal: a
// table's history (bounds, horizon, retention) and the setting of its
// retention. Package journal implements it.
type HistoryJournal interface {
	History(ctx context.Context, table string, epoch uint64) (journal.History, error)
	SetRetention(ctx context.Context, table string, epoch uint64, retention string) error
}

// TableHistory is how much of its journal a table keeps, as
// GET /<account>/$history answers it.
type TableHistory struct {
	Table string `json:"table"`
	// Retention is what applies: the table's own (Own true) or the node's
	// default (-history).
	Retention string `json:"retention"`
	Own       bool   `json:"own"`
	// Horizon is the first journal position kept (1: nothing pruned);
	// First and Last the journal's first and last record, Records and
	// Bytes what it holds.
	Horizon uint64 `json:"horizon"`
	First   uint64 `json:"first"`
	Last    uint64 `json:"last"`
	Records uint64 `json:"records"`
	Bytes   uint64 `json:"bytes"`
}

// historyRequest is the body of a PUT of a table's retention.
type historyRequest struct {
	// Retention: "all", a duration ("7d"), a number of records, or "" to
	// fall back on the node's default.
	Retention *string `json:"retention"`
}

// history serves /<account>/$history?table=T: GET, a table's history (or
// every table of the account's, without table), for whoever may list the
// account's tables; PUT, its retention, for operators only (the
// operators' door, OperatorHandler).
func (c *call) history() {
	c.op = "History"
	if c.s.cfg.History == nil {
		c.fail(notImplemented("a table's history on this server"))
		return
	}
	name := c.params().Get("table")
	switch c.r.Method {
	case http.MethodGet:
		if err := c.allowTables('l'); err != nil {
			c.fail(err)
			return
		}
		var names []string
		if name != "" {
			names = []string{name}
		} else {
			for _, info := range c.s.views.TablesOf(c.account) {
				names = append(names, info.Name)
			}
		}
		out := make([]TableHistory, 0, len(names))
		for _, n := range names {
			h, err := c.tableHistory(n)
			if err != nil {
				c.fail(err)
				return
			}
			out = append(out, h)
		}
		c.json(http.StatusOK, struct {
			Tables []TableHistory `json:"tables"`
		}{out})
	case http.MethodPut:
		if !c.operator {
			c.fail(engine.Errorf(codeAuthorizationFailure, "a table's retention is the operators' to set (the operators' API, /$cairn/tables/<account>/$history, or host history)"))
			return
		}
		if name == "" {
			c.fail(engine.Errorf(codeInvalidQueryParameter, "PUT $history needs ?table=<name>"))
			return
		}
		req, err := c.historyRequest()
		if err != nil {
			c.fail(err)
			return
		}
		if _, err := projections.ParseRetention(*req.Retention); err != nil {
			c.fail(engine.Errorf(engine.CodeInvalidInput, "%v", err))
			return
		}
		t, err := c.historyTable(name)
		if err != nil {
			c.fail(err)
			return
		}
		if err := c.s.cfg.History.SetRetention(c.r.Context(), t.Name(), t.Epoch(), *req.Retention); err != nil {
			c.fail(err)
			return
		}
		h, err := c.tableHistory(name)
		if err != nil {
			c.fail(err)
			return
		}
		c.json(http.StatusOK, h)
	default:
		c.fail(errMethod(c.r.Method, "$history"))
	}
}

// historyRequest reads a PUT's body: one field, retention, and nothing
// else.
func (c *call) historyRequest() (*historyRequest, error) {
	b, err := c.body()
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var req historyRequest
	if err := dec.Decode(&req); err != nil || req.Retention == nil {
		return nil, engine.Errorf(engine.CodeInvalidInput, `the body must be {"retention": "all" | "7d" | "1000000" | ""}`)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, engine.Errorf(engine.CodeInvalidInput, "data after the request's object")
	}
	return &req, nil
}

// historyTable returns the view of the account's table name.
func (c *call) historyTable(name string) (*projections.Table, error) {
	full, err := c.fullName(name)
	if err != nil {
		return nil, err
	}
	c.table = full
	return c.view(full)
}

// tableHistory reads a table's history from its journal (one request).
func (c *call) tableHistory(name string) (TableHistory, error) {
	t, err := c.historyTable(name)
	if err != nil {
		return TableHistory{}, err
	}
	h, err := c.s.cfg.History.History(c.r.Context(), t.Name(), t.Epoch())
	if err != nil {
		return TableHistory{}, err
	}
	out := TableHistory{Table: engine.ShownTable(t.Name()), Retention: c.s.cfg.DefaultRetention.String(), Own: h.Retention != "",
		Horizon: h.Horizon, First: h.First, Last: h.Last, Records: h.Records, Bytes: h.Bytes}
	if out.Own {
		out.Retention = h.Retention
	}
	return out, nil
}

// json answers v as JSON with status.
func (c *call) json(status int, v any) {
	body, _ := json.Marshal(v)
	c.w.Header().Set("Content-Type", "application/json")
	c.w.WriteHeader(status)
	_, _ = c.w.Write(body)
}
