package httpapi

import (
	"strconv"

	"github.com/cairn-dev/cairn/engine"
)

// commandID derives the command's id from x-ms-client-request-id: the Azure
// SDKs send one per logical operation and keep it across their retries, so
// a retried write whose first attempt was applied gets the first result
// instead of a conflict. Without the header the host assigns an id.
func (c *call) commandID() string {
	if id := c.r.Header.Get("x-ms-client-request-id"); id != "" {
		return "http:" + id
	}
	return ""
}

// commit submits cmd and waits for its reply (or the write timeout). The
// reply's journal position goes into X-Cairn-Position. A write that sends
// X-Cairn-As-Of, or whose references to large values name none of its
// entity's (checkValues), is refused, nothing stored.
func (c *call) commit(cmd *engine.Command) (*engine.Reply, error) {
	if c.r.Header.Get(AsOfHeader) != "" {
		// A write happens now: the header must not pass as if it meant something.
		return nil, engine.Errorf(codeInvalidHeaderValue, "%s is for reads: a write cannot happen in the past", AsOfHeader)
	}
	if err := c.checkValues(cmd); err != nil {
		return nil, err
	}
	ctx, cancel := c.writeContext()
	defer cancel()
	done := make(chan *engine.Reply, 1)
	c.s.comm.Submit(cmd, func(r *engine.Reply) { done <- r })
	select {
	case r := <-done:
		if r.Error != nil {
			return r, r.Error
		}
		c.w.Header().Set(PositionHeader, strconv.FormatUint(r.Seq, 10))
		return r, nil
	case <-ctx.Done():
		return nil, engine.Errorf(engine.CodeOperationTimedOut,
			"the write was not acknowledged within %v; its outcome is unknown: retry it with the same x-ms-client-request-id to learn it", c.s.cfg.WriteTimeout)
	}
}

// submit commits one operation on the request's table (c.table), with
// the request's outbox messages, and sets the reply's ETag header.
func (c *call) submit(op engine.Operation) (*engine.Reply, error) {
	msgs, err := c.messages()
	if err != nil {
		return nil, err
	}
	r, err := c.commit(&engine.Command{ID: c.commandID(), Table: c.table, Ops: []engine.Operation{op}, Messages: msgs})
	if err != nil {
		return nil, err
	}
	if r.ETag != "" {
		c.w.Header().Set("ETag", r.ETag)
	}
	return r, nil
}
