package client

import (
	"context"
	"fmt"
	"iter"

	"github.com/cairn-dev/cairn/engine/wire"
)

// QueryOption shapes a Query.
type QueryOption func(*wire.QueryRequest)

// QueryFilter sets the OData $filter ("Age gt 30 and City eq 'Oslo'");
// without it every entity matches.
func QueryFilter(f string) QueryOption { return func(r *wire.QueryRequest) { r.Filter = f } }

// QuerySelect names the properties to return besides the keys and the
// Timestamp; without it all come back.
func QuerySelect(names ...string) QueryOption {
	return func(r *wire.QueryRequest) { r.Select = append(r.Select, names...) }
}

// QueryTop bounds a page (1..1,000; 1,000 without it).
func QueryTop(n int) QueryOption { return func(r *wire.QueryRequest) { r.Top = n } }

// QueryDescending walks the keys from the highest down.
func QueryDescending() QueryOption { return func(r *wire.QueryRequest) { r.Descending = true } }

// QueryAsOf reads the table as it was at a journal position (a write's
// Reply.Seq); the node replays the journal up to it (docs/PROTOCOL.md).
func QueryAsOf(seq uint64) QueryOption { return func(r *wire.QueryRequest) { r.AsOf = seq } }

// QueryAtLeast makes the query wait until the node's view has reached a
// journal position of the table (a write's Reply.Seq), up to the node's
// wait (10 s): read your writes on any node. PositionNotReached says the
// view did not get there in time.
func QueryAtLeast(seq uint64) QueryOption { return func(r *wire.QueryRequest) { r.Position = seq } }

// QueryContinue asks for the page after the one whose Continuation this
// is; the other options must be those of the first page.
func QueryContinue(continuation string) QueryOption {
	return func(r *wire.QueryRequest) { r.Continuation = continuation }
}

// Query reads one page of a table's (or a declared projection's) entities
// on its command subject: those its filter matches, in key order, at most
// 1,000, and the Continuation of the next page ("" when none is left;
// pass it back with QueryContinue). A page may hold fewer entities than
// its top and still have a continuation (the node's time budget, or the
// NATS message size). A refused query returns its *engine.Error
// (InvalidInput for a bad filter, TableNotFound, …). It costs one request.
func (c *Client) Query(ctx context.Context, table string, opts ...QueryOption) (*wire.QueryReply, error) {
	req := &wire.QueryRequest{}
	for _, o := range opts {
		o(req)
	}
	body, err := wire.EncodeQueryRequest(req, wire.Msgpack)
	if err != nil {
		return nil, fmt.Errorf("client: encode query: %w", err)
	}
	msg, err := c.read(ctx, c.commandSubject(table), body, c.timeout, true)
	if err != nil {
		return nil, fmt.Errorf("client: query of %s: %w", table, err)
	}
	rep, err := wire.DecodeQueryReply(msg.Data, wire.Msgpack)
	if err != nil {
		return nil, fmt.Errorf("client: decode query of %s: %w", table, err)
	}
	if rep.Error != nil {
		return rep, rep.Error
	}
	return rep, nil
}

// QueryAll yields every entity a query matches, page after page, until no
// continuation is left or the loop stops; an error ends it, yielded once
// with a zero entity. With QueryContinue it starts at that page. Each page is one request; pages after the first
// read the first page's snapshot while the node that answered still holds
// it (docs/PROTOCOL.md).
func (c *Client) QueryAll(ctx context.Context, table string, opts ...QueryOption) iter.Seq2[wire.QueryEntity, error] {
	return func(yield func(wire.QueryEntity, error) bool) {
		var start wire.QueryRequest
		for _, o := range opts {
			o(&start)
		}
		next := start.Continuation
		for {
			page, err := c.Query(ctx, table, append(opts[:len(opts):len(opts)], QueryContinue(next))...)
			if err != nil {
				yield(wire.QueryEntity{}, err)
				return
			}
			for _, e := range page.Entities {
				if !yield(e, nil) {
					return
				}
			}
			if page.Continuation == "" {
				return
			}
			next = page.Continuation
		}
	}
}
