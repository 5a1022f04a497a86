package client

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/engine/wire"
)

// Changes reads one page of a table's change feed
// (<prefix>.changes.<Table>, or <prefix>.changes.<account>.<Table>): the
// changes of the records from req.From on, and where to ask next. A page
// that waits (req.Wait) is given that much longer than the client's
// timeout. A refused request returns its *engine.Error.
func (c *Client) Changes(ctx context.Context, table string, req wire.ChangesRequest) (*wire.ChangesReply, error) {
	subject := c.prefix + ".changes." + table
	if c.account != "" {
		subject = c.prefix + ".changes." + c.account + "." + table
	}
	body, err := wire.EncodeChangesRequest(&req, wire.Msgpack)
	if err != nil {
		return nil, fmt.Errorf("client: encode changes request: %w", err)
	}
	msg, err := c.read(ctx, subject, body, c.timeout+req.Wait, req.Wait == 0)
	if err != nil {
		return nil, fmt.Errorf("client: changes of %s: %w", table, err)
	}
	rep, err := wire.DecodeChangesReply(msg.Data, wire.Msgpack)
	if err != nil {
		return nil, fmt.Errorf("client: decode changes of %s: %w", table, err)
	}
	if rep.Error != nil {
		return rep, rep.Error
	}
	return rep, nil
}
