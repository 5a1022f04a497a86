package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
)

// ValueInfo describes a large value (docs/VALUES.md).
type ValueInfo struct {
	// Reference is what an entity's String property holds to refer to
	// the value ("cairn-value:…").
	Reference string
	Size      uint64
	Uploaded  time.Time
}

// valueWindow is how many chunks a value session keeps in flight: enough
// to hide a round trip, within what the node holds for a session.
const valueWindow = 4

// PutValue uploads what r yields, up to its end, as a large value of the
// entity pk/rk of table (which need not exist yet), and returns its
// reference: write the entity with the reference in a property within
// the node's claim window (an hour by default), or the value is swept.
// The value goes in chunks on a session of one node, a few in flight at
// a time; r is read as it goes, never whole. A refusal is an
// *engine.Error (TableNotFound, RequestBodyTooLarge past the node's
// limit, ServerBusy when the node has too many sessions open, …).
func (c *Client) PutValue(ctx context.Context, table, pk, rk string, r io.Reader) (ValueInfo, error) {
	s, rep, err := c.openValue(ctx, table, &wire.ValueRequest{Op: wire.PutValueOp, PartitionKey: pk, RowKey: rk})
	if err != nil {
		return ValueInfo{}, err
	}
	defer func() {
		if !s.ended {
			s.abort(s.sent) // the node's Put stops now, not when idle
		}
		s.close()
	}()
	buf := make([]byte, rep.Chunk)
	for n := uint64(0); ; n++ {
		k, rerr := io.ReadFull(r, buf)
		last := rerr == io.EOF || rerr == io.ErrUnexpectedEOF
		if rerr != nil && !last {
			return ValueInfo{}, fmt.Errorf("client: put value: read: %w", rerr)
		}
		if err := s.send(n, buf[:k], last); err != nil {
			return ValueInfo{}, err
		}
		if last {
			break
		}
		if n+1 >= valueWindow {
			if _, err := s.receive(ctx, c.timeout); err != nil {
				return ValueInfo{}, err
			}
		}
	}
	var m *nats.Msg
	for !s.ended {
		if m, err = s.receive(ctx, c.timeout); err != nil {
			return ValueInfo{}, err
		}
	}
	done, err := wire.DecodeValueReply(m.Data, wire.Msgpack)
	if err != nil {
		return ValueInfo{}, fmt.Errorf("client: put value: %w", err)
	}
	return ValueInfo{Reference: done.Reference, Size: done.Size, Uploaded: done.Uploaded}, nil
}

// OpenValue streams the large value that property prop of the entity
// pk/rk of table refers to: the reader yields its bytes in order, a few
// chunks asked ahead, and fails if the node's session ends early. Close
// it when done (before its end, it tells the node). With AtLeast, the
// entity is read once the node's view has reached that position. A
// refusal is an *engine.Error (ResourceNotFound for no such entity or a
// value gone from the store, InvalidInput for a property that holds no
// reference, …).
func (c *Client) OpenValue(ctx context.Context, table, pk, rk, prop string, opts ...CallOption) (io.ReadCloser, ValueInfo, error) {
	var opt engine.Request
	for _, o := range opts {
		o(&opt)
	}
	s, rep, err := c.openValue(ctx, table, &wire.ValueRequest{Op: wire.GetValueOp, PartitionKey: pk, RowKey: rk, Property: prop, Position: opt.Position})
	if err != nil {
		return nil, ValueInfo{}, err
	}
	return &valueReader{s: s, ctx: ctx, timeout: c.timeout}, ValueInfo{Reference: rep.Reference, Size: rep.Size, Uploaded: rep.Uploaded}, nil
}

// valueSession is a client's side of a value session: the node's
// subject, and an inbox of its own for the node's replies, which come in
// the order the messages were sent.
type valueSession struct {
	nc      *nats.Conn
	subject string
	inbox   string
	sub     *nats.Subscription
	got     uint64 // replies received
	sent    uint64 // messages sent
	ended   bool   // the node marked a reply "end"
}

// openValue sends a value session's first request and subscribes to its
// replies.
func (c *Client) openValue(ctx context.Context, table string, req *wire.ValueRequest) (*valueSession, *wire.ValueReply, error) {
	body, err := wire.EncodeValueRequest(req, wire.Msgpack)
	if err != nil {
		return nil, nil, fmt.Errorf("client: %s: %w", req.Op, err)
	}
	// Not resent: an unanswered first request leaves at most a session
	// the node ends when idle.
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	msg, err := c.nc.RequestWithContext(rctx, c.commandSubject(table), body)
	if err != nil {
		return nil, nil, fmt.Errorf("client: %s of %s: %w", req.Op, table, err)
	}
	rep, err := wire.DecodeValueReply(msg.Data, wire.Msgpack)
	if err != nil {
		return nil, nil, fmt.Errorf("client: %s of %s: %w", req.Op, table, err)
	}
	if rep.Error != nil {
		return nil, nil, rep.Error
	}
	if rep.Session == "" || rep.Chunk <= 0 {
		return nil, nil, fmt.Errorf("client: %s of %s: the node named no session", req.Op, table)
	}
	s := &valueSession{nc: c.nc, subject: rep.Session, inbox: c.nc.NewInbox()}
	if s.sub, err = c.nc.SubscribeSync(s.inbox); err != nil {
		return nil, nil, fmt.Errorf("client: %s of %s: %w", req.Op, table, err)
	}
	return s, rep, nil
}

// send sends message n of the session: a chunk (an upload's), or an ask
// for the next chunk (a download's, data nil); last marks an upload's end.
func (s *valueSession) send(n uint64, data []byte, last bool) error {
	m := nats.NewMsg(s.subject)
	m.Reply = s.inbox
	m.Header.Set(wire.ChunkHeader, strconv.FormatUint(n, 10))
	if last {
		m.Header.Set(wire.ValueHeader, "end")
	}
	m.Data = data
	if err := s.nc.PublishMsg(m); err != nil {
		return fmt.Errorf("client: value session: %w", err)
	}
	s.sent++
	return nil
}

// receive takes the next reply, in order; a reply marked "error" is the
// node's *engine.Error, and ends the session.
func (s *valueSession) receive(ctx context.Context, timeout time.Duration) (*nats.Msg, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m, err := s.sub.NextMsgWithContext(rctx)
	if err != nil {
		return nil, fmt.Errorf("client: value session: reply %d: %w", s.got, err)
	}
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" { // no responders: the session's subject has none
		s.ended = true
		return nil, fmt.Errorf("client: value session: reply %d: %w (the session ended on the node)", s.got, nats.ErrNoResponders)
	}
	if got := m.Header.Get(wire.ChunkHeader); got != strconv.FormatUint(s.got, 10) {
		s.ended = true
		return nil, fmt.Errorf("client: value session: reply %q came where %d was due", got, s.got)
	}
	s.got++
	switch m.Header.Get(wire.ValueHeader) {
	case "error":
		s.ended = true
		rep, err := wire.DecodeValueReply(m.Data, wire.Msgpack)
		if err == nil && rep.Error != nil {
			err = rep.Error
		}
		return nil, cmp.Or(err, errors.New("client: value session: an error reply without an error"))
	case "end":
		s.ended = true
	}
	return m, nil
}

// abort tells the node the session ends before its end (message n), and
// waits for nothing.
func (s *valueSession) abort(n uint64) {
	m := nats.NewMsg(s.subject)
	m.Header.Set(wire.ChunkHeader, strconv.FormatUint(n, 10))
	m.Header.Set(wire.ValueHeader, "abort")
	_ = s.nc.PublishMsg(m)
	s.ended = true
}

func (s *valueSession) close() { _ = s.sub.Unsubscribe() }

// valueReader reads a download: it keeps up to valueWindow asks in
// flight, and hands over each chunk as it comes.
type valueReader struct {
	s       *valueSession
	ctx     context.Context
	timeout time.Duration
	chunk   []byte // what is left of the last chunk received
	err     error  // sticky: io.EOF after the last chunk
	closed  bool
}

func (r *valueReader) Read(p []byte) (int, error) {
	for len(r.chunk) == 0 && r.err == nil {
		for !r.s.ended && r.s.sent-r.s.got < valueWindow {
			if err := r.s.send(r.s.sent, nil, false); err != nil {
				r.err = err
				return 0, err
			}
		}
		m, err := r.s.receive(r.ctx, r.timeout)
		switch {
		case err != nil:
			r.err = err
		case r.s.ended:
			r.chunk, r.err = m.Data, io.EOF
		default:
			r.chunk = m.Data
		}
	}
	n := copy(p, r.chunk)
	r.chunk = r.chunk[n:]
	if len(r.chunk) == 0 && r.err != nil {
		return n, r.err
	}
	return n, nil
}

// Close ends the download; before its end, the node is told.
func (r *valueReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if !r.s.ended {
		r.s.abort(r.s.sent)
	}
	r.s.close()
	return nil
}
