package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn/cmd/internal/pages"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/projections"
)

// PositionHeader carries a journal position: on a write's reply, the
// position of its commit in the table's journal; on a read, the position
// the view must have reached before it answers (read-your-writes across
// processes and hosts).
const PositionHeader = "X-Cairn-Position"

// keyPath is the entity's path segment, t(PartitionKey='…',RowKey='…').
func keyPath(table, pk, rk string) string {
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	return table + "(PartitionKey=" + q(pk) + ",RowKey=" + q(rk) + ")"
}

// appendEntity appends e's JSON. element adds the odata.metadata of a single
// entity; full metadata adds the entity's type, id and edit link.
func (c *call) appendEntity(b []byte, table string, e *engine.Entity, etag string, element bool) []byte {
	if c.meta == wire.NoMetadata || !element && c.meta != wire.FullMetadata {
		return wire.AppendEntityJSON(b, e, etag, c.meta)
	}
	b = append(b, '{')
	if element {
		b = append(b, `"odata.metadata":`...)
		b = wire.AppendJSONString(b, c.base()+"/$metadata#"+table+"/@Element")
		b = append(b, ',')
	}
	if c.meta == wire.FullMetadata {
		link := keyPath(table, e.PartitionKey, e.RowKey)
		b = append(b, `"odata.type":`...)
		b = wire.AppendJSONString(b, c.account+"."+table)
		b = append(b, `,"odata.id":`...)
		b = wire.AppendJSONString(b, c.base()+"/"+link)
		b = append(b, `,"odata.editLink":`...)
		b = wire.AppendJSONString(b, link)
		b = append(b, ',')
	}
	ent := wire.AppendEntityJSON(nil, e, etag, c.meta)
	return append(b, ent[1:]...)
}

// shownName is the name of a table's view as its account sees it.
func shownName(t *projections.Table) string { return engine.ShownTable(t.Name()) }

// view returns the view of a table (its full name, see fullName),
// refusing a missing table or a stopped view (projections.Views.Read).
func (c *call) view(full string) (*projections.Table, error) {
	return c.s.views.Read(c.r.Context(), full)
}

// AsOfHeader names an earlier journal position of the table: a read that
// sends it answers from the table's view as it was at that position
// (rebuilt by replaying the journal, projections.Views.AsOf).
const AsOfHeader = "X-Cairn-As-Of"

// asOf reads the request's X-Cairn-As-Of: the position, and whether the
// header was sent. It contradicts X-Cairn-Position (which asks for the
// present, at least as late as a write), so both are refused.
func (c *call) asOf() (uint64, bool, error) {
	v := c.r.Header.Get(AsOfHeader)
	if v == "" {
		return 0, false, nil
	}
	if c.r.Header.Get(PositionHeader) != "" {
		return 0, false, engine.Errorf(codeInvalidHeaderValue, "%s and %s contradict each other: send one (%s reads the past, %s waits for the present to reach a write)",
			AsOfHeader, PositionHeader, AsOfHeader, PositionHeader)
	}
	seq, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false, engine.Errorf(codeInvalidHeaderValue, "%s must be a journal position (a whole number), not %q", AsOfHeader, v)
	}
	return seq, true, nil
}

// snapshot returns the snapshot a read answers from: as of the position
// asOf when given (X-Cairn-As-Of, or a continuation's), otherwise the
// view's, after waiting for the position the request names
// (X-Cairn-Position), if any.
func (c *call) snapshot(t *projections.Table, asOf uint64, given bool) (*projections.Snapshot, error) {
	if given {
		return c.s.views.AsOf(c.r.Context(), t, asOf)
	}
	seq, err := c.position()
	if err != nil || seq == 0 {
		return t.Snapshot(), err
	}
	return t.WaitPosition(c.r.Context(), seq, c.s.cfg.PositionWait)
}

// position reads X-Cairn-Position (0: none).
func (c *call) position() (uint64, error) {
	pos := c.r.Header.Get(PositionHeader)
	if pos == "" {
		return 0, nil
	}
	seq, err := strconv.ParseUint(pos, 10, 64)
	if err != nil {
		return 0, engine.Errorf(codeInvalidHeaderValue, "%s must be a journal position (a whole number), not %q", PositionHeader, pos)
	}
	return seq, nil
}

func (c *call) get(table string, k keys) {
	c.op = "Retrieve"
	if err := c.mayRead(table, k); err != nil {
		c.fail(err)
		return
	}
	e, t, err := c.entity(table, k)
	if err != nil {
		c.fail(err)
		return
	}
	if sel, err := parseSelection(c.params().Get("$select")); err != nil {
		c.fail(err)
		return
	} else if sel != nil {
		e = sel.Project(e)
	}
	etag := engine.ETag(t.Epoch(), e.Version)
	c.w.Header()["Etag"] = []string{etag}
	buf := answers.Get().(*[]byte)
	*buf = c.appendEntity((*buf)[:0], shownName(t), e, etag, true)
	c.writeJSON(http.StatusOK, *buf)
	if cap(*buf) <= maxPooledAnswer {
		answers.Put(buf)
	}
}

// answers holds the buffers point reads write their answer into: an
// entity's JSON is about as large as the entity (up to 1 MiB), and growing
// a new buffer to it for every read made most of a read's garbage.
// net/http copies what is written, so a buffer is reused once written.
var answers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledAnswer is the largest buffer kept for reuse: one grown by a
// rare large entity is left to the collector rather than held.
const maxPooledAnswer = 64 << 10

// mayRead authorises a read of one entity: a SAS must grant query on the
// table and cover the keys.
func (c *call) mayRead(table string, k keys) error {
	if err := c.allow(table, 'r'); err != nil {
		return err
	}
	return c.checkKey(k.pk, k.rk)
}

// entity reads one entity of the request's table (c.table), as of
// X-Cairn-As-Of or once the view reached X-Cairn-Position when they are
// sent, and sets X-Cairn-Position to the position read. An entity absent
// is ResourceNotFound.
func (c *call) entity(table string, k keys) (*engine.Entity, *projections.Table, error) {
	asOf, given, err := c.asOf()
	if err != nil {
		return nil, nil, err
	}
	t, err := c.view(c.table)
	if err != nil {
		return nil, nil, err
	}
	var e *engine.Entity
	var ok bool
	if t.Gathered() && c.s.cfg.Pages != nil {
		q := pages.Query{Point: &pages.Keys{PK: k.pk, RK: k.rk}, Limit: 1}
		if q.Position, err = c.position(); err != nil {
			return nil, nil, err
		}
		if given {
			q.Position, q.AsOf = 0, asOf
		}
		res, err := c.s.cfg.Pages.Read(c.r.Context(), t, q)
		if err != nil {
			return nil, nil, err
		}
		c.w.Header().Set(PositionHeader, strconv.FormatUint(res.Seq, 10))
		if ok = len(res.Entities) > 0; ok {
			e = res.Entities[0]
		}
	} else {
		snap, err := c.snapshot(t, asOf, given)
		if err != nil {
			return nil, nil, err
		}
		// The position read, on a miss too: absent as of that position.
		c.w.Header().Set(PositionHeader, strconv.FormatUint(snap.Seq, 10))
		e, ok = snap.Get(k.pk, k.rk)
	}
	if !ok {
		return nil, nil, engine.Errorf(engine.CodeResourceNotFound, "The specified resource does not exist: (%q, %q) in %s.", k.pk, k.rk, shownName(t))
	}
	t.NoteRead(k.pk, 1)
	return e, t, nil
}

// entityBody parses the request's entity. Without keys (an insert) the
// body must give both; with keys (from the URL) the body may leave them
// out, and may not contradict them.
func (c *call) entityBody(k *keys) (*engine.Entity, error) {
	body, err := c.body()
	if err != nil {
		return nil, err
	}
	return parseEntityBody(body, k)
}

// parseEntityBody parses an entity body for an entity at k (nil for an
// insert, whose keys are the body's).
func parseEntityBody(body []byte, k *keys) (*engine.Entity, error) {
	if k == nil {
		return wire.ParseEntityJSON(body)
	}
	return wire.ParseEntityJSONAt(body, k.pk, k.rk)
}

func (c *call) insert(table string) {
	c.op = "Insert"
	if err := c.allow(table, 'a'); err != nil {
		c.fail(err)
		return
	}
	e, err := c.entityBody(nil)
	if err != nil {
		c.fail(err)
		return
	}
	if err := c.checkKey(e.PartitionKey, e.RowKey); err != nil {
		c.fail(err)
		return
	}
	reply, err := c.submit(engine.Operation{Op: engine.OpInsert, Entity: e})
	if err != nil {
		c.fail(err)
		return
	}
	c.w.Header().Set("Location", c.base()+"/"+keyPath(table, e.PartitionKey, e.RowKey))
	if c.noContent() {
		c.w.WriteHeader(http.StatusNoContent)
		return
	}
	e.Timestamp = reply.Timestamp
	c.writeJSON(http.StatusCreated, c.appendEntity(nil, table, e, reply.ETag, true))
}

// update serves PUT (replace) and PATCH/MERGE (merge); without If-Match they
// are upserts.
func (c *call) update(table string, k keys, merge bool) {
	ifMatch := c.r.Header.Get("If-Match")
	var op engine.Op
	switch {
	case merge && ifMatch == "":
		op = engine.OpInsertOrMerge
	case merge:
		op = engine.OpMerge
	case ifMatch == "":
		op = engine.OpInsertOrReplace
	default:
		op = engine.OpReplace
	}
	c.op = op.String()
	perm := byte('u')
	if ifMatch == "" {
		// An upsert may insert: Azure asks for both.
		if err := c.allow(table, 'a'); err != nil {
			c.fail(err)
			return
		}
	}
	if err := c.allow(table, perm); err != nil {
		c.fail(err)
		return
	}
	if err := c.checkKey(k.pk, k.rk); err != nil {
		c.fail(err)
		return
	}
	e, err := c.entityBody(&k)
	if err != nil {
		c.fail(err)
		return
	}
	if _, err := c.submit(engine.Operation{Op: op, Entity: e, IfMatch: ifMatch}); err != nil {
		c.fail(err)
		return
	}
	c.w.WriteHeader(http.StatusNoContent)
}

func (c *call) delete(table string, k keys) {
	c.op = "Delete"
	if err := c.allow(table, 'd'); err != nil {
		c.fail(err)
		return
	}
	if err := c.checkKey(k.pk, k.rk); err != nil {
		c.fail(err)
		return
	}
	ifMatch := c.r.Header.Get("If-Match")
	if ifMatch == "" {
		c.fail(engine.Errorf(codeMissingRequiredHeader, "a delete needs If-Match: the entity's ETag, or * for any version"))
		return
	}
	if _, err := c.submit(engine.Operation{Op: engine.OpDelete, Entity: engine.NewEntity(k.pk, k.rk), IfMatch: ifMatch}); err != nil {
		c.fail(err)
		return
	}
	c.w.WriteHeader(http.StatusNoContent)
}
