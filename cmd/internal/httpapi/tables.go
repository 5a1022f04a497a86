package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/projections/query"
)

func (c *call) writeContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.r.Context(), c.s.cfg.WriteTimeout)
}

// appendTable appends a table's JSON object.
func (c *call) appendTable(b []byte, name string, element bool) []byte {
	b = append(b, '{')
	if element && c.meta != wire.NoMetadata {
		b = append(b, `"odata.metadata":`...)
		b = wire.AppendJSONString(b, c.base()+"/$metadata#Tables/@Element")
		b = append(b, ',')
	}
	if c.meta == wire.FullMetadata {
		b = append(b, `"odata.type":`...)
		b = wire.AppendJSONString(b, c.account+".Tables")
		b = append(b, `,"odata.id":`...)
		b = wire.AppendJSONString(b, c.base()+"/Tables('"+name+"')")
		b = append(b, `,"odata.editLink":`...)
		b = wire.AppendJSONString(b, "Tables('"+name+"')")
		b = append(b, ',')
	}
	b = append(b, `"TableName":`...)
	b = wire.AppendJSONString(b, name)
	return append(b, '}')
}

func (c *call) writeJSON(code int, body []byte) {
	// Canonical keys and shared values set directly: this runs on every
	// answer with a body (Header.Set canonicalises and allocates).
	h := c.w.Header()
	h["Content-Type"] = contentTypes[c.meta]
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	h["Dataserviceversion"] = dataServiceVersion
	c.w.WriteHeader(code)
	_, _ = c.w.Write(body)
}

// contentTypes and dataServiceVersion are header values shared by every
// answer: net/http only reads them.
var (
	contentTypes = [...][]string{
		wire.NoMetadata:      {"application/json;odata=nometadata;streaming=true;charset=utf-8"},
		wire.MinimalMetadata: {"application/json;odata=minimalmetadata;streaming=true;charset=utf-8"},
		wire.FullMetadata:    {"application/json;odata=fullmetadata;streaming=true;charset=utf-8"},
	}
	dataServiceVersion = []string{"3.0;"}
)

func contentType(m wire.Metadata) string { return contentTypes[m][0] }

// noContent reports whether the client asked for no body (Prefer:
// return-no-content) and acknowledges it.
func (c *call) noContent() bool {
	switch strings.TrimSpace(c.r.Header.Get("Prefer")) {
	case "return-no-content":
		c.w.Header().Set("Preference-Applied", "return-no-content")
		return true
	case "return-content":
		c.w.Header().Set("Preference-Applied", "return-content")
	}
	return false
}

func (c *call) listTables() {
	c.op = "ListTables"
	if err := c.allowTables('l'); err != nil {
		c.fail(err)
		return
	}
	q := c.params()
	filter, top, err := filterAndTop(q)
	if err != nil {
		c.fail(err)
		return
	}
	tables := c.s.views.TablesOf(c.account)
	sort.Slice(tables, func(i, j int) bool { return tables[i].Name < tables[j].Name })
	next := q.Get("NextTableName")
	b := []byte(`{`)
	if c.meta != wire.NoMetadata {
		b = append(b, `"odata.metadata":`...)
		b = wire.AppendJSONString(b, c.base()+"/$metadata#Tables")
		b = append(b, ',')
	}
	b = append(b, `"value":[`...)
	n := 0
	for _, t := range tables {
		if t.Name < next {
			continue
		}
		if filter != nil && !filter.Match(engine.NewEntity("", "", engine.Property{Name: "TableName", Value: engine.String(t.Name)})) {
			continue
		}
		if n == top {
			c.w.Header().Set("x-ms-continuation-NextTableName", t.Name)
			break
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = c.appendTable(b, t.Name, false)
		n++
	}
	b = append(b, "]}"...)
	c.writeJSON(http.StatusOK, b)
}

// topOf parses $top: 1..1000, default 1000.
// filterAndTop parses a request's $filter (nil when absent) and $top.
func filterAndTop(q url.Values) (query.Expr, int, error) {
	var filter query.Expr
	if src := q.Get("$filter"); src != "" {
		var err error
		if filter, err = query.Parse(src); err != nil {
			return nil, 0, engine.Errorf(engine.CodeInvalidInput, "%v", err)
		}
	}
	top, err := topOf(q.Get("$top"))
	return filter, top, err
}

func topOf(s string) (int, error) {
	if s == "" {
		return query.MaxPage, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > query.MaxPage {
		return 0, engine.Errorf(codeInvalidQueryParameter, "$top must be a whole number from 1 to %d, not %q", query.MaxPage, s)
	}
	return n, nil
}

func (c *call) createTable() {
	c.op = "CreateTable"
	if err := c.allowTables('c'); err != nil {
		c.fail(err)
		return
	}
	body, err := c.body()
	if err != nil {
		c.fail(err)
		return
	}
	var req struct{ TableName *string }
	if err := json.Unmarshal(body, &req); err != nil || req.TableName == nil {
		c.fail(engine.Errorf(engine.CodeInvalidInput, `the body must be {"TableName":"…"}`))
		return
	}
	full, err := c.fullName(*req.TableName)
	if err != nil {
		c.fail(err)
		return
	}
	c.table = full
	ctx, cancel := c.writeContext()
	defer cancel()
	info, err := c.s.comm.CreateTable(ctx, full)
	if err != nil {
		c.fail(err)
		return
	}
	info.Name = engine.ShownTable(info.Name)
	c.w.Header().Set("Location", c.base()+"/Tables('"+info.Name+"')")
	if c.noContent() {
		c.w.WriteHeader(http.StatusNoContent)
		return
	}
	c.writeJSON(http.StatusCreated, c.appendTable(nil, info.Name, true))
}

func (c *call) getTable(name string) {
	c.op = "GetTable"
	if err := c.allowTables('l'); err != nil {
		c.fail(err)
		return
	}
	full, err := c.fullName(name)
	if err != nil {
		c.fail(err)
		return
	}
	c.table = full
	_, info, live := c.s.views.CatalogEntry(full)
	if !live {
		c.fail(engine.Errorf(engine.CodeTableNotFound, "table %s does not exist", name))
		return
	}
	shown := engine.ShownTable(info.Name)
	c.writeJSON(http.StatusOK, c.appendTable(nil, shown, true))
}

func (c *call) deleteTable(name string) {
	c.op = "DeleteTable"
	if err := c.allowTables('d'); err != nil {
		c.fail(err)
		return
	}
	full, err := c.fullName(name)
	if err != nil {
		c.fail(err)
		return
	}
	c.table = full
	ctx, cancel := c.writeContext()
	defer cancel()
	if err := c.s.comm.DeleteTable(ctx, full); err != nil {
		c.fail(err)
		return
	}
	c.w.WriteHeader(http.StatusNoContent)
}

// body reads the request body, refusing one larger than MaxBody. The
// buffer grows with the bytes that arrive, not with the announced
// Content-Length (a client announcing 5 MiB and sending nothing gets no
// 5 MiB buffer), and the body must keep arriving: each read waits at most
// BodyTimeout, and the whole body at most BodyTimeout plus its length at
// MinBodyRate, so a slow sender cannot hold a connection for long.
func (c *call) body() ([]byte, error) {
	cfg := c.s.cfg
	announced := c.r.ContentLength
	if announced > cfg.MaxBody {
		return nil, c.bodyFailed(errBodyTooLarge(cfg.MaxBody))
	}
	limit := cfg.MaxBody
	if announced >= 0 {
		limit = announced
	}
	rc := http.NewResponseController(c.w)
	start := time.Now()
	last := start.Add(cfg.BodyTimeout + time.Duration(float64(limit)/float64(cfg.MinBodyRate)*float64(time.Second)))
	r := http.MaxBytesReader(c.w, c.r.Body, cfg.MaxBody)
	b := make([]byte, 0, min(limit+1, 64<<10))
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow by doubling
		}
		deadline := time.Now().Add(cfg.BodyTimeout)
		if deadline.After(last) {
			deadline = last
		}
		_ = rc.SetReadDeadline(deadline)
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			_ = rc.SetReadDeadline(time.Time{})
			return b, nil
		}
		if err != nil {
			if _, ok := err.(*http.MaxBytesError); ok {
				return nil, c.bodyFailed(errBodyTooLarge(cfg.MaxBody))
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, c.bodyFailed(engine.Errorf(engine.CodeOperationTimedOut, "the request body came too slowly (%d bytes in %v)", len(b), time.Since(start).Round(time.Millisecond)))
			}
			return nil, c.bodyFailed(engine.Errorf(engine.CodeInvalidInput, "reading the request body: %v", err))
		}
	}
}

// bodyFailed closes the connection after the reply to a request whose
// body was not read to its end: the server would otherwise wait for the
// rest of it before answering.
func (c *call) bodyFailed(err error) error {
	c.w.Header().Set("Connection", "close")
	return err
}

func errBodyTooLarge(max int64) error {
	return engine.Errorf(engine.CodeRequestBodyTooLarge, "the request body is larger than %d bytes", max)
}
