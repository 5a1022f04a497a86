package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/journal/values"
)

// Large values (docs/VALUES.md): PUT <entity>/$value streams a value into
// the store and answers its reference; a write of an entity that holds a
// reference is checked here, before it is submitted; GET
// <entity>/$value/<Property> streams the value the property refers to.

// Values is what the HTTP API needs of the values' store
// (journal/values.Store).
type Values interface {
	Put(ctx context.Context, k values.Key, r io.Reader, limit int64, now time.Time) (values.Info, error)
	Info(ctx context.Context, k values.Key, id string) (values.Info, error)
	Open(ctx context.Context, k values.Key, id string) (io.ReadCloser, values.Info, error)
}

// ValueHeader carries the reference of an uploaded value (the reply's
// body has it too).
const ValueHeader = "X-Cairn-Value"

// valueSegment follows an entity's path to name its values.
const valueSegment = ")/$value"

// splitValuePath splits "t(PartitionKey='…',RowKey='…')/$value[/Prop]"
// into the entity's path and what follows "$value" ("" or "/Prop"); ok
// is false for a path without "$value". A key cannot hold "/", so the
// first ")/$value" ends the entity's path.
func splitValuePath(resource string) (entity, rest string, ok bool) {
	i := strings.Index(resource, valueSegment)
	if i < 0 {
		return "", "", false
	}
	return resource[:i+1], resource[i+len(valueSegment):], true
}

// value serves the requests on an entity's values.
func (c *call) value(entity, rest string) {
	table, k, err := parseEntityPath(entity)
	if err == nil && k == nil {
		err = errInvalidURI("%q: a value belongs to one entity: t(PartitionKey='…',RowKey='…')/$value", entity)
	}
	if err == nil {
		c.table, err = c.fullName(table)
	}
	if err == nil {
		err = c.noMessages()
	}
	if err != nil {
		c.fail(err)
		return
	}
	switch {
	case rest == "" && c.r.Method == http.MethodPut:
		c.putValue(table, *k)
	case rest == "":
		c.fail(errMethod(c.r.Method, table+"(PartitionKey,RowKey)/$value"))
	case strings.HasPrefix(rest, "/") && c.r.Method == http.MethodGet:
		c.getValue(table, *k, rest[1:])
	case strings.HasPrefix(rest, "/"):
		c.fail(errMethod(c.r.Method, table+"(PartitionKey,RowKey)/$value/Property"))
	default:
		c.fail(errInvalidURI("%q: want …)/$value or …)/$value/Property", entity+rest))
	}
}

// valueKey returns the store's key of an entity of the request's table,
// refusing a table that does not exist.
func (c *call) valueKey(pk, rk string) (values.Key, error) {
	if c.s.cfg.Values == nil {
		return values.Key{}, notImplemented("large values on this node")
	}
	t, err := c.view(c.table)
	if err != nil {
		return values.Key{}, err
	}
	return values.Key{Account: c.account, Table: shownName(t), PartitionKey: pk, RowKey: rk}, nil
}

// putValue stores the request's body as a value of the entity, which need
// not exist yet: authorised as a write of it (a SAS must grant add or
// update on the table and cover the keys).
func (c *call) putValue(table string, k keys) {
	c.op = "PutValue"
	err := c.allow(table, 'a')
	if err != nil && c.allow(table, 'u') == nil {
		err = nil
	}
	if err == nil {
		err = c.checkKey(k.pk, k.rk)
	}
	if err == nil {
		err = engine.ValidateKey("PartitionKey", k.pk)
	}
	if err == nil {
		err = engine.ValidateKey("RowKey", k.rk)
	}
	if err == nil && c.r.Header.Get(AsOfHeader) != "" {
		err = engine.Errorf(codeInvalidHeaderValue, "%s is for reads: a write cannot happen in the past", AsOfHeader)
	}
	var key values.Key
	if err == nil {
		key, err = c.valueKey(k.pk, k.rk)
	}
	if err != nil {
		c.fail(err)
		return
	}
	limit := c.s.cfg.MaxValue
	if c.r.ContentLength > limit {
		c.fail(c.bodyFailed(engine.Errorf(engine.CodeRequestBodyTooLarge, "a large value is at most %d bytes, the request announces %d", limit, c.r.ContentLength)))
		return
	}
	body := &paced{c: c, r: c.r.Body, start: time.Now()}
	in, err := c.s.cfg.Values.Put(c.r.Context(), key, body, limit, time.Now())
	if err != nil {
		if body.err != nil {
			err = body.err
		}
		if engine.ErrorCode(err) != engine.CodeInternalError {
			err = c.bodyFailed(err)
		}
		c.fail(err)
		return
	}
	ref := engine.ValueRef(in.ID)
	c.w.Header().Set(ValueHeader, ref)
	b := []byte(`{"reference":`)
	b = wire.AppendJSONString(b, ref)
	b = append(b, `,"size":`...)
	b = strconv.AppendUint(b, in.Size, 10)
	b = append(b, `,"uploaded":`...)
	b = wire.AppendJSONString(b, in.Uploaded.Format(time.RFC3339Nano))
	b = append(b, '}')
	h := c.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	c.w.WriteHeader(http.StatusCreated)
	_, _ = c.w.Write(b)
}

// paced reads a value's body with the deadlines of every body (body):
// each read within BodyTimeout, the whole at no less than MinBodyRate.
// Its err is the coded reason a read failed.
type paced struct {
	c     *call
	r     io.Reader
	start time.Time
	n     int64
	err   error
}

func (p *paced) Read(b []byte) (int, error) {
	cfg := p.c.s.cfg
	now := time.Now()
	deadline := now.Add(cfg.BodyTimeout)
	last := p.start.Add(cfg.BodyTimeout + time.Duration(float64(p.n+int64(len(b)))/float64(cfg.MinBodyRate)*float64(time.Second)))
	if deadline.After(last) {
		deadline = last
	}
	_ = http.NewResponseController(p.c.w).SetReadDeadline(deadline)
	n, err := p.r.Read(b)
	p.n += int64(n)
	switch {
	case err == nil || err == io.EOF:
	case errors.Is(err, os.ErrDeadlineExceeded):
		p.err = engine.Errorf(engine.CodeOperationTimedOut, "the value came too slowly (%d bytes in %v)", p.n, time.Since(p.start).Round(time.Millisecond))
	default:
		p.err = engine.Errorf(engine.CodeInvalidInput, "reading the value: %v", err)
	}
	return n, err
}

// getValue streams the value an entity's property refers to: authorised
// as a point read of the entity.
func (c *call) getValue(table string, k keys, prop string) {
	c.op = "GetValue"
	if err := c.mayRead(table, k); err != nil {
		c.fail(err)
		return
	}
	if prop == "" || strings.Contains(prop, "/") {
		c.fail(errInvalidURI("%q: want …/$value/<Property>", prop))
		return
	}
	key, err := c.valueKey(k.pk, k.rk)
	if err != nil {
		c.fail(err)
		return
	}
	e, _, err := c.entity(table, k)
	if err != nil {
		c.fail(err)
		return
	}
	v, ok := e.Get(prop)
	if !ok {
		c.fail(engine.Errorf(engine.CodeInvalidInput, "the entity (%q, %q) has no property %.255q", k.pk, k.rk, prop))
		return
	}
	id, _, err := engine.ParseValueRef(v)
	if err != nil {
		c.fail(engine.Errorf(engine.CodeInvalidInput, "property %.255s: %s", prop, engine.AsError(err).Message))
		return
	}
	rc, in, err := c.s.cfg.Values.Open(c.r.Context(), key, id)
	if errors.Is(err, values.ErrNotFound) {
		c.fail(engine.Errorf(engine.CodeResourceNotFound, "the value %s of (%q, %q) is not in the store", v.Str(), k.pk, k.rk))
		return
	}
	if err != nil {
		c.fail(err)
		return
	}
	defer rc.Close()
	h := c.w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatUint(in.Size, 10))
	h.Set(ValueHeader, v.Str())
	c.w.WriteHeader(http.StatusOK)
	if n, err := io.Copy(c.w, rc); err != nil {
		// The status is sent: the client sees a body shorter than its
		// Content-Length, and the connection is cut.
		c.s.log.Warn("http: a large value's download ended early", "value", in.Name, "sent", n, "size", in.Size, "err", err, "request", c.id)
		panic(http.ErrAbortHandler)
	}
}

// checkValues checks, before cmd is submitted, that every reference its
// entities take up names a value of that entity in the store
// (values.Check, shared with the NATS door and the functions' writes).
func (c *call) checkValues(cmd *engine.Command) error {
	if !engine.CommandHoldsRefs(cmd) {
		return nil // every write comes here: no closure for the key
	}
	return values.Check(c.r.Context(), c.s.cfg.Values, cmd, c.valueKey)
}
