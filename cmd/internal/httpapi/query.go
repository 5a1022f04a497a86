package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/pages"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/projections"
	"github.com/cairn-dev/cairn/projections/query"
)

// OrderHeader and the query option cairn-order ask for descending key order
// ("desc"); the default is ascending, as in Azure.
const OrderHeader = "X-Cairn-Order"

// parseSelection reads a $select (query.ParseSelect) with the Table
// service's code for a bad one.
func parseSelection(s string) (query.Selection, error) {
	sel, err := query.ParseSelect(s)
	if err != nil {
		return nil, engine.Errorf(codeInvalidQueryParameter, "%v", err)
	}
	return sel, nil
}

// descending reads the order option from the query or the header.
func (c *call) descending() (bool, error) {
	v := c.params().Get("cairn-order")
	if v == "" {
		v = c.r.Header.Get(OrderHeader)
	}
	switch strings.ToLower(v) {
	case "", "asc":
		return false, nil
	case "desc":
		return true, nil
	}
	return false, engine.Errorf(codeInvalidQueryParameter, "the order must be asc or desc, not %q", v)
}

// sasRange narrows f to the key range of the request's SAS.
func (c *call) sasRange(f query.Expr) query.Expr {
	g := c.sas
	if g == nil || !g.rangeBound {
		return f
	}
	and := func(bound, f query.Expr) query.Expr {
		if f == nil {
			return bound
		}
		return &query.And{L: bound, R: f}
	}
	if g.spk != "" {
		f = and(&query.Compare{Property: "PartitionKey", Op: query.Ge, Value: engine.String(g.spk)}, f)
	}
	if g.epk != "" {
		f = and(&query.Compare{Property: "PartitionKey", Op: query.Le, Value: engine.String(g.epk)}, f)
	}
	return f
}

func (c *call) query(table string) {
	c.op = "Query"
	if err := c.allow(table, 'r'); err != nil {
		c.fail(err)
		return
	}
	q := c.params()
	filter, top, err := filterAndTop(q)
	if err != nil {
		c.fail(err)
		return
	}
	sel, err := parseSelection(q.Get("$select"))
	if err != nil {
		c.fail(err)
		return
	}
	desc, err := c.descending()
	if err != nil {
		c.fail(err)
		return
	}
	var tok *token
	if npk := q.Get("NextPartitionKey"); npk != "" {
		t, err := parseToken(npk, q.Get("NextRowKey"))
		if err != nil {
			c.fail(err)
			return
		}
		if t.desc != desc {
			c.fail(badToken("belongs to a query in the other order"))
			return
		}
		tok = &t
	}
	asOf, given, err := c.asOf()
	if err != nil {
		c.fail(err)
		return
	}
	if tok != nil {
		// A continuation of an as-of query goes on reading the past; it
		// cannot continue a query of another position, or of the present.
		switch {
		case given && tok.asOf != asOf && tok.asOf != 0:
			c.fail(badToken("belongs to a query as of position %d, not %d", tok.asOf, asOf))
			return
		case given && tok.asOf == 0:
			c.fail(badToken("belongs to a query of the present, not as of position %d", asOf))
			return
		case tok.asOf != 0 && c.r.Header.Get(PositionHeader) != "":
			c.fail(engine.Errorf(codeInvalidHeaderValue, "the continuation belongs to a query as of position %d, which %s contradicts", tok.asOf, PositionHeader))
			return
		case tok.asOf != 0:
			asOf, given = tok.asOf, true
		}
	}
	t, err := c.view(c.table)
	if err != nil {
		c.fail(err)
		return
	}
	var snap *projections.Snapshot // nil: a page gathered from the hosts, held there
	var hold uint64
	var gathered *pages.Result // a page gathered from the hosts
	var pg query.Page
	var seq uint64 // the position read
	if t.Gathered() && c.s.cfg.Pages != nil {
		pq := pages.Query{Filter: q.Get("$filter"), Limit: top, Descending: desc, AsOf: asOf, Keep: true}
		if g := c.sas; g != nil && g.rangeBound {
			pq.FromPK, pq.ToPK = g.spk, g.epk
		}
		if tok != nil {
			pq.From, pq.Hold = &tok.from, tok.hold
		}
		if !given {
			if pq.Position, err = c.position(); err != nil {
				c.fail(err)
				return
			}
		}
		res, err := c.s.cfg.Pages.Read(c.r.Context(), t, pq)
		if err != nil {
			c.fail(err)
			return
		}
		pg, seq, gathered = res.Page, res.Seq, &res
	} else {
		if tok != nil {
			if s, ok := c.s.held.Get(tok.hold, t.Name(), t.Epoch()); ok && (!given || s.Seq == asOf) {
				snap, hold = s, tok.hold
			}
		}
		if hold == 0 {
			if snap, err = c.snapshot(t, asOf, given); err != nil {
				c.fail(err)
				return
			}
		}
		plan := query.NewPlan(c.sasRange(filter))
		o := query.Options{Limit: top, Deadline: time.Now().Add(c.s.cfg.PageBudget), Descending: desc}
		if tok != nil {
			o.From = &tok.from
		}
		pg, seq = plan.Run(snap, o), snap.Seq
	}
	h := c.w.Header()
	if pg.More {
		if snap != nil {
			hold = c.s.held.Put(hold, snap)
		} else if gathered != nil {
			hold = gathered.Hold
		}
		if !given {
			asOf = 0
		}
		npk, nrk := token{hold: hold, desc: desc, asOf: asOf, from: query.Continuation{PartitionKey: pg.NextPartitionKey, RowKey: pg.NextRowKey}}.format()
		h.Set("x-ms-continuation-NextPartitionKey", npk)
		h.Set("x-ms-continuation-NextRowKey", nrk)
	} else if hold != 0 {
		c.s.held.Release(hold)
	} else if gathered != nil {
		c.s.cfg.Pages.Release(*gathered)
	}
	h.Set(PositionHeader, strconv.FormatUint(seq, 10))
	buf := pageBuffers.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= maxPooledPage {
			pageBuffers.Put(buf)
		}
	}()
	b := (*buf)[:0]
	b = append(b, '{')
	if c.meta != wire.NoMetadata {
		b = append(b, `"odata.metadata":`...)
		b = wire.AppendJSONString(b, c.base()+"/$metadata#"+shownName(t))
		b = append(b, ',')
	}
	b = append(b, `"value":[`...)
	n, lastPK, run := 0, "", 0
	for _, e := range pg.Entities {
		if !c.sas.inRange(e.PartitionKey, e.RowKey) {
			continue
		}
		if e.PartitionKey != lastPK && run > 0 {
			t.NoteRead(lastPK, run)
			run = 0
		}
		lastPK = e.PartitionKey
		run++
		if n > 0 {
			b = append(b, ',')
		}
		n++
		etag := engine.ETag(t.Epoch(), e.Version)
		e = sel.Project(e)
		b = c.appendEntity(b, shownName(t), e, etag, false)
	}
	t.NoteRead(lastPK, run)
	b = append(b, "]}"...)
	c.s.metrics.scanned(pg.Examined)
	c.writeJSON(http.StatusOK, b)
	*buf = b
}

// pageBuffers recycles the buffers query pages are written into (a page
// of 1,000 entities of 1 KB is 1 MB: allocating it for every page costs
// more than writing it).
var pageBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// maxPooledPage is the largest page buffer kept for reuse.
const maxPooledPage = 8 << 20
