package natsapi

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/journal/values"
)

// Large values over NATS (docs/PROTOCOL.md, "Large values"). A request
// on a table's command subject with "op" PutValue or GetValue goes, like
// every request there, to one host of the queue group; that host opens a
// session and answers with its subject,
// <prefix>.cmd.<account>.<Table>.<session>, to which it alone subscribes.
// The value then goes up (PutValue) or comes down (GetValue) in chunks,
// each a request of its own on that subject, numbered (wire.ChunkHeader),
// so a client may keep a few in flight and the host's acknowledgements
// (for an upload) or the chunks (for a download) are the flow control.
//
// The session's subject is under the table's: a user who may send the
// table's commands may use the table's sessions (its permissions carry
// <prefix>.cmd.<account>.<Table>.*), and nobody else may publish there.
// Its last token is 128 random bits, known only to the requester.
//
// Each session holds a slot of MaxValueSessions, a goroutine (an upload's
// Put into the store, or the store's reader), and at most
// valuePending chunks its client sent ahead; a session idle for
// ValueIdle, or slower than MinValueRate, is ended, and an upload ended
// before its last chunk stores nothing.

// ValueStore is what the NATS door needs of the values' store
// (journal/values.Store).
type ValueStore interface {
	values.Infoer
	Put(ctx context.Context, k values.Key, r io.Reader, limit int64, now time.Time) (values.Info, error)
	Open(ctx context.Context, k values.Key, id string) (io.ReadCloser, values.Info, error)
}

// valueChunk is the most bytes one chunk of a session carries (less when
// the server's messages are smaller); valuePending bounds the chunks a
// session's subscription holds before it drops them (a client that sends
// more than that ahead of the acknowledgements loses its session).
const (
	valueChunk   = 256 << 10
	valuePending = 8
)

// valueSession is one upload or download under way.
type valueSession struct {
	s       *Service
	subject string
	enc     wire.Encoding // of the first request: the replies' encoding
	chunk   int
	ctx     context.Context // ends with the session
	cancel  context.CancelFunc
	start   time.Time
	endOnce sync.Once

	// Under the service's mu: the subscription, the deadline of the next
	// message (Reset by the subscription's goroutine, which starts after
	// it is set), and whether the session has ended.
	sub   *nats.Subscription
	timer *time.Timer
	ended bool

	// Touched by the subscription's goroutine only.
	next  uint64 // the chunk due next
	moved uint64 // bytes moved so far

	// An upload: the pipe into the store's Put, and its result, set
	// before stored is closed.
	pw     *io.PipeWriter
	stored chan struct{}
	put    putResult

	// A download: the store's reader and the value's size.
	rc   io.ReadCloser
	size uint64
	buf  []byte
}

type putResult struct {
	in  values.Info
	err error
}

// valueSlot takes a session's slot, or refuses with ServerBusy when
// MaxValueSessions are open.
func (s *Service) valueSlot() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.off {
		return engine.Errorf(engine.CodeServerBusy, "the node is shutting down: try again")
	}
	if s.vsessions >= s.cfg.MaxValueSessions {
		return engine.Errorf(engine.CodeServerBusy, "%d value sessions are open on this node, the most it takes: try again", s.cfg.MaxValueSessions)
	}
	s.vsessions++
	s.wg.Add(1)
	return nil
}

// freeSlot gives a slot back.
func (s *Service) freeSlot() {
	s.mu.Lock()
	s.vsessions--
	s.mu.Unlock()
	s.wg.Done()
}

// handleValue opens a value session (PutValue or GetValue) on one of
// account's tables.
func (s *Service) handleValue(m *nats.Msg, enc wire.Encoding, account, table string) {
	fail := func(err error) { respond(m, enc, errReply(err)) }
	req, err := wire.DecodeValueRequest(m.Data, enc)
	if err == nil {
		err = engine.ValidateKey("PartitionKey", req.PartitionKey)
	}
	if err == nil {
		err = engine.ValidateKey("RowKey", req.RowKey)
	}
	if err == nil && s.cfg.Values == nil {
		err = engine.Errorf(engine.CodeInvalidInput, "large values are not served on this node")
	}
	if err != nil {
		fail(err)
		return
	}
	if err := s.valueSlot(); err != nil {
		fail(err)
		return
	}
	// The table's view, the entity (on a placed cluster perhaps from
	// another host) and the store's first answer may each take a while:
	// not on the subscription's goroutine. The session owns the slot
	// from here: a session that fails to open gives it back.
	go func() {
		v, rep, err := s.openValue(m.Subject, enc, account, table, req)
		if err != nil {
			fail(err)
			return
		}
		rep.Session, rep.Chunk = v.subject, v.chunk
		if m.Reply != "" {
			_ = m.Respond(wire.EncodeValueReply(rep, enc))
		}
	}()
}

// openValue makes the session of req, which holds a slot: its store's
// side started, its subject subscribed, and its reply so far. A session
// that cannot be made has given its slot back.
func (s *Service) openValue(subject string, enc wire.Encoding, account, table string, req *wire.ValueRequest) (*valueSession, *wire.ValueReply, error) {
	v := &valueSession{s: s, enc: enc, chunk: min(valueChunk, int(s.nc.MaxPayload())-4<<10), start: time.Now()}
	v.ctx, v.cancel = context.WithCancel(s.ctx)
	rep, err := v.open(subject, account, table, req)
	if err != nil {
		v.end(err)
		return nil, nil, err
	}
	return v, rep, nil
}

// open starts the session's store side, subscribes its subject and
// returns the reply so far.
func (v *valueSession) open(subject, account, table string, req *wire.ValueRequest) (*wire.ValueReply, error) {
	s := v.s
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.TableTimeout)
	defer cancel()
	t, err := s.views.Read(ctx, table)
	if err != nil {
		return nil, err
	}
	key := values.Key{Account: account, Table: engine.ShownTable(t.Name()), PartitionKey: req.PartitionKey, RowKey: req.RowKey}
	rep := &wire.ValueReply{}
	switch req.Op {
	case wire.PutValueOp:
		var pr *io.PipeReader
		pr, v.pw = io.Pipe()
		v.stored = make(chan struct{})
		now := time.Now()
		go func() {
			in, err := s.cfg.Values.Put(v.ctx, key, pr, s.cfg.MaxValue, now)
			pr.CloseWithError(cmp.Or(err, errStored)) // a chunk written after the end fails
			v.put = putResult{in, err}
			close(v.stored)
		}()
	case wire.GetValueOp:
		got := s.retrieve(ctx, table, &engine.Request{Op: "Retrieve", PartitionKey: req.PartitionKey, RowKey: req.RowKey, Position: req.Position})
		if got.Error != nil {
			return nil, got.Error
		}
		p, ok := got.Entity.Get(req.Property)
		if !ok {
			return nil, engine.Errorf(engine.CodeInvalidInput, "the entity (%q, %q) has no property %.255q", req.PartitionKey, req.RowKey, req.Property)
		}
		id, _, err := engine.ParseValueRef(p)
		if err != nil {
			return nil, engine.Errorf(engine.CodeInvalidInput, "property %.255s: %s", req.Property, engine.AsError(err).Message)
		}
		rc, in, err := s.cfg.Values.Open(v.ctx, key, id)
		if errors.Is(err, values.ErrNotFound) {
			err = engine.Errorf(engine.CodeResourceNotFound, "the value %s of (%q, %q) is not in the store", p.Str(), req.PartitionKey, req.RowKey)
		}
		if err != nil {
			return nil, err
		}
		v.rc, v.size, v.buf = rc, in.Size, make([]byte, v.chunk)
		rep.Reference, rep.Size, rep.Uploaded = p.Str(), in.Size, in.Uploaded
	}
	if err := v.subscribe(subject, account); err != nil {
		return nil, err
	}
	return rep, nil
}

// errStored ends an upload's pipe once the store's Put has returned, and
// errEnded the Put of an upload ended before its last chunk: never the
// end of the value (io.EOF), which would store what came so far.
var (
	errStored = errors.New("the value is stored or refused already")
	errEnded  = errors.New("the value session ended before its last chunk")
)

// subscribe subscribes the session's subject, a token of 128 random bits
// under the table's subject with the account spelled out, and waits until
// the server has the subscription: the client's first chunk follows the
// reply at once.
func (v *valueSession) subscribe(requestSubject, account string) error {
	var b [16]byte
	_, _ = rand.Read(b[:])
	tableToken := requestSubject[strings.LastIndexByte(requestSubject, '.')+1:]
	v.subject = v.s.cfg.Prefix + ".cmd." + account + "." + tableToken + "." + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
	if err := v.s.track(v); err != nil {
		return err
	}
	sub, err := v.s.nc.Subscribe(v.subject, func(m *nats.Msg) {
		if v.s.cfg.Replies.Allow(m.Subject, m.Reply) {
			v.handle(m)
		}
	})
	if err != nil {
		return fmt.Errorf("natsapi: subscribe to a value session: %w", err)
	}
	_ = sub.SetPendingLimits(valuePending, valuePending*(v.chunk+8<<10))
	v.s.mu.Lock()
	v.sub = sub
	ended := v.ended
	v.s.mu.Unlock()
	if ended { // idle already, or the node stopping
		_ = sub.Unsubscribe()
		return engine.Errorf(engine.CodeServerBusy, "the value session ended while it opened: try again")
	}
	return v.s.nc.Flush()
}

// track keeps an open session for Run's end, which ends it, and starts
// its idle deadline; once Run has ended, it refuses.
func (s *Service) track(v *valueSession) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.off {
		return engine.Errorf(engine.CodeServerBusy, "the node is shutting down: try again")
	}
	v.timer = time.AfterFunc(s.cfg.ValueIdle, func() {
		v.end(engine.Errorf(engine.CodeOperationTimedOut, "the value session was idle or too slow: ended"))
	})
	s.vopen[v] = struct{}{}
	return nil
}

// endValues ends every open session (Run's end).
func (s *Service) endValues() {
	s.mu.Lock()
	open := make([]*valueSession, 0, len(s.vopen))
	for v := range s.vopen {
		open = append(open, v)
	}
	s.mu.Unlock()
	for _, v := range open {
		v.end(engine.Errorf(engine.CodeServerBusy, "the node is shutting down: the value session ended"))
	}
}

// end ends the session, once: no more messages, the store's side
// stopped (an upload not complete stores nothing), the slot given back.
func (v *valueSession) end(why error) {
	v.endOnce.Do(func() {
		v.s.mu.Lock()
		sub, timer := v.sub, v.timer
		v.ended = true
		delete(v.s.vopen, v)
		v.s.mu.Unlock()
		if timer != nil {
			timer.Stop()
		}
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		v.cancel()
		if v.pw != nil {
			// The Put fails unless it returned already (its context
			// ended too, should it be waiting for the store), and has
			// returned once stored is closed.
			v.pw.CloseWithError(cmp.Or(why, errEnded))
			<-v.stored
		}
		if v.rc != nil {
			_ = v.rc.Close()
		}
		v.s.freeSlot()
	})
}

// touch moves the deadline of the next message: ValueIdle from now, but
// no later than the session's start plus ValueIdle plus what it has moved
// and the next chunk at MinValueRate, so that a slow client cannot hold a
// slot for long.
func (v *valueSession) touch() {
	cfg := v.s.cfg
	idle := cfg.ValueIdle
	last := time.Until(v.start.Add(cfg.ValueIdle + time.Duration(float64(v.moved+uint64(v.chunk))/float64(cfg.MinValueRate)*float64(time.Second))))
	v.timer.Reset(max(min(idle, last), 0))
}

// handle takes one of the session's messages, in order, on the
// subscription's goroutine.
func (v *valueSession) handle(m *nats.Msg) {
	n, err := strconv.ParseUint(m.Header.Get(wire.ChunkHeader), 10, 64)
	switch {
	case err != nil:
		v.fail(m, engine.Errorf(engine.CodeInvalidInput, "a value session's message needs %s: its number, from 0", wire.ChunkHeader))
		return
	case n != v.next:
		v.fail(m, engine.Errorf(engine.CodeInvalidInput, "chunk %d came where %d was due: the session is ended (a client may send at most %d chunks ahead of their acknowledgements)", n, v.next, valuePending))
		return
	}
	v.next++
	v.touch()
	mark := m.Header.Get(wire.ValueHeader)
	switch {
	case mark == "abort":
		v.end(engine.Errorf(engine.CodeInvalidInput, "the client aborted the value session"))
		v.reply(m, n, "end", nil)
	case mark != "" && mark != "end":
		v.fail(m, engine.Errorf(engine.CodeInvalidInput, "%s %q: want end or abort", wire.ValueHeader, mark))
	case v.pw != nil:
		v.upload(m, n, mark == "end")
	default:
		v.download(m, n)
	}
}

// upload writes a chunk into the store's Put; the last one waits for the
// value to be stored and answers its reference.
func (v *valueSession) upload(m *nats.Msg, n uint64, last bool) {
	if len(m.Data) > v.chunk {
		v.fail(m, engine.Errorf(engine.CodeRequestBodyTooLarge, "chunk %d holds %d bytes; a chunk is at most %d", n, len(m.Data), v.chunk))
		return
	}
	if _, err := v.pw.Write(m.Data); err != nil {
		v.fail(m, v.putErr(err))
		return
	}
	v.moved += uint64(len(m.Data))
	if !last {
		v.reply(m, n, "", nil)
		return
	}
	_ = v.pw.Close()
	<-v.stored
	if v.put.err != nil {
		v.fail(m, v.put.err)
		return
	}
	v.end(nil)
	in := v.put.in
	v.reply(m, n, "end", wire.EncodeValueReply(&wire.ValueReply{Reference: engine.ValueRef(in.ID), Size: in.Size, Uploaded: in.Uploaded}, v.enc))
}

// putErr is why an upload failed when writing a chunk into its pipe
// failed (err): the Put's own error (a value too large, the store's
// failure), which it has returned, or is about to, since its pipe is
// closed; else err.
func (v *valueSession) putErr(err error) error {
	<-v.stored
	return cmp.Or(v.put.err, err)
}

// download answers an ask with the value's next chunk; the last is marked
// "end" and ends the session.
func (v *valueSession) download(m *nats.Msg, n uint64) {
	want := min(uint64(v.chunk), v.size-v.moved)
	k, err := io.ReadFull(v.rc, v.buf[:want])
	if err != nil {
		v.fail(m, fmt.Errorf("natsapi: read the value at byte %d of %d: %w", v.moved, v.size, err))
		return
	}
	v.moved += uint64(k)
	if v.moved < v.size {
		v.reply(m, n, "", v.buf[:k])
		return
	}
	v.reply(m, n, "end", v.buf[:k])
	v.end(nil)
}

// reply answers message n of the session.
func (v *valueSession) reply(m *nats.Msg, n uint64, mark string, data []byte) {
	if m.Reply == "" {
		return
	}
	h := nats.Header{}
	h.Set(wire.ChunkHeader, strconv.FormatUint(n, 10))
	if mark != "" {
		h.Set(wire.ValueHeader, mark)
	}
	_ = m.RespondMsg(&nats.Msg{Header: h, Data: data})
}

// fail answers message m with err and ends the session.
func (v *valueSession) fail(m *nats.Msg, err error) {
	v.end(err)
	n, _ := strconv.ParseUint(m.Header.Get(wire.ChunkHeader), 10, 64)
	v.reply(m, n, "error", wire.EncodeReply(errReply(err), v.enc))
}
