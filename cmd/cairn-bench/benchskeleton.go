package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// skeleton is today's protocol with no Cairn code: for each request it
// appends the request's body to a partition's subject of a file stream,
// expecting that subject's last sequence, and answers once the append is
// acknowledged and the message has come back through an ordered
// consumer. A command takes the same messages in the same order (the
// request, the append and its acknowledgement, the delivery, the reply)
// through the same kind of connections (two, in process), with nothing
// decoded, checked, decided or applied: what the server, the client
// library and the runtime cost a command before Cairn does anything.
//
// Requests go round partitions one after another (pacedPartitions of
// them), so a partition has one append in flight at most while fewer
// than that many requests are. A grouped skeleton sends every request to
// one partition instead, as group commit does: the requests that come
// while its append is in flight go together in the next one, a message
// of their bodies one after another.
type skeleton struct {
	serve, pub *nats.Conn
	js         jetstream.JetStream
	stream     string
	subject    string // the requests'
	sub        *nats.Subscription
	cc         jetstream.ConsumeContext
	acks       chan skeletonAppend
	acksDone   chan struct{}

	// next is the partition of the next request (the subscription's
	// goroutine only).
	next int
	// grouped: every request to partition 0, grouped while an append is
	// in flight (pending, under mu).
	grouped   bool
	pending   []*nats.Msg
	appending bool
	stopping  bool // under mu: no more appends, acks is closing

	deliveries deliveries

	mu     sync.Mutex
	last   []uint64 // by partition: its last sequence acknowledged
	failed error
}

// deliveries pairs appends' acknowledgements with their messages'
// deliveries through a consumer, which come in either order.
type deliveries struct {
	mu        sync.Mutex
	waiting   map[uint64]func() // acknowledged, not yet delivered: what then
	delivered map[uint64]bool   // delivered before its acknowledgement was read
}

// acked notes the acknowledgement of the append at seq: then runs once
// its message is delivered, at once if it was.
func (d *deliveries) acked(seq uint64, then func()) {
	d.mu.Lock()
	now := d.delivered[seq]
	if now {
		delete(d.delivered, seq)
	} else {
		if d.waiting == nil {
			d.waiting = make(map[uint64]func())
		}
		d.waiting[seq] = then
	}
	d.mu.Unlock()
	if now {
		then()
	}
}

// deliver notes the delivery of the message at seq.
func (d *deliveries) deliver(seq uint64) {
	d.mu.Lock()
	then, ok := d.waiting[seq]
	if ok {
		delete(d.waiting, seq)
	} else {
		if d.delivered == nil {
			d.delivered = make(map[uint64]bool)
		}
		d.delivered[seq] = true
	}
	d.mu.Unlock()
	if ok {
		then()
	}
}

// skeletonAppend is an append waiting for its acknowledgement.
type skeletonAppend struct {
	ack     jetstream.PubAckFuture
	replies []string
	part    int
}

// skeletonGroupMax bounds a grouped append as the committer's defaults
// bound a record: commands and bytes.
const (
	skeletonGroupMax      = 1000
	skeletonGroupMaxBytes = 2 << 20
)

// skeletonRow names the skeleton's row; -only runs it alone when it
// matches.
const skeletonRow = "for scale: today's protocol with no Cairn code (each request appended to its partition, answered once acknowledged and delivered"

// skeletonGroupedRow names the grouped skeleton's row, printed below the
// one-partition inserts.
const skeletonGroupedRow = "for scale: one partition, today's protocol with no Cairn code (the requests that come while an append is in flight go together in the next, as group commit does)"

// skeletonReply is the skeleton's answer: an empty msgpack map, which
// reads as a reply without an error.
var skeletonReply = []byte{0x80}

// startSkeleton starts a skeleton on ns with a fresh file stream; grouped
// sends every request to one partition.
func startSkeleton(ctx context.Context, ns *server.Server, grouped bool) (_ *skeleton, err error) {
	connect := func() (*nats.Conn, error) {
		return nats.Connect(ns.ClientURL(), append(nodeCreds, nats.InProcessServer(ns))...)
	}
	s := &skeleton{
		stream:   "BENCHSKEL" + nuid.Next(),
		acks:     make(chan skeletonAppend, 1<<16),
		acksDone: make(chan struct{}),
		last:     make([]uint64, pacedPartitions),
		grouped:  grouped,
	}
	s.subject = "benchskel.cmd." + s.stream
	if s.serve, err = connect(); err != nil {
		return nil, err
	}
	if s.pub, err = connect(); err != nil {
		s.serve.Close()
		return nil, err
	}
	defer func() {
		if err != nil {
			s.stop(ctx)
		}
	}()
	if s.js, err = jetstream.New(s.pub, jetstream.WithPublishAsyncMaxPending(4000)); err != nil {
		return nil, err
	}
	if _, err = s.js.CreateStream(ctx, jetstream.StreamConfig{Name: s.stream, Subjects: []string{"benchskel.rec." + s.stream + ".>"}, Storage: jetstream.FileStorage}); err != nil {
		return nil, err
	}
	cons, err := s.js.OrderedConsumer(ctx, s.stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	if s.cc, err = cons.Consume(s.deliver); err != nil {
		return nil, err
	}
	go s.readAcks()
	if s.sub, err = s.serve.Subscribe(s.subject, s.request); err != nil {
		return nil, err
	}
	_ = s.sub.SetPendingLimits(-1, -1)
	return s, s.serve.Flush()
}

// request appends a request's body to the next partition, or, grouped,
// to the group of partition 0.
func (s *skeleton) request(m *nats.Msg) {
	if s.grouped {
		s.mu.Lock()
		s.pending = append(s.pending, m)
		if !s.appending {
			s.appendGroup()
		}
		s.mu.Unlock()
		return
	}
	part := s.next
	s.next = (s.next + 1) % pacedPartitions
	s.mu.Lock()
	last := s.last[part]
	s.mu.Unlock()
	rec := &nats.Msg{Subject: "benchskel.rec." + s.stream + ".p" + strconv.Itoa(part), Data: m.Data, Header: nats.Header{}}
	rec.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
	ack, err := s.js.PublishMsgAsync(rec)
	if err != nil {
		s.fail(err)
		return
	}
	s.acks <- skeletonAppend{ack: ack, replies: []string{m.Reply}, part: part}
}

// appendGroup appends the requests pending, as many as a record takes,
// in one message to partition 0 (under mu, with none in flight).
func (s *skeleton) appendGroup() {
	if s.stopping {
		return
	}
	n, size := 0, 0
	for n < len(s.pending) && n < skeletonGroupMax && (n == 0 || size+len(s.pending[n].Data) <= skeletonGroupMaxBytes) {
		size += len(s.pending[n].Data)
		n++
	}
	data := make([]byte, 0, size)
	replies := make([]string, n)
	for i, m := range s.pending[:n] {
		data = append(data, m.Data...)
		replies[i] = m.Reply
	}
	s.pending = append(s.pending[:0], s.pending[n:]...)
	rec := &nats.Msg{Subject: "benchskel.rec." + s.stream + ".p0", Data: data, Header: nats.Header{}}
	rec.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(s.last[0], 10))
	ack, err := s.js.PublishMsgAsync(rec)
	if err != nil {
		s.failed = cmp.Or(s.failed, err)
		return
	}
	s.appending = true
	s.acks <- skeletonAppend{ack: ack, replies: replies}
}

// readAcks reads the acknowledgements in the order of the appends, and
// answers each request whose message was already delivered.
func (s *skeleton) readAcks() {
	defer close(s.acksDone)
	for a := range s.acks {
		var seq uint64
		select {
		case ack := <-a.ack.Ok():
			seq = ack.Sequence
		case err := <-a.ack.Err():
			s.fail(err)
			continue
		}
		s.mu.Lock()
		s.last[a.part] = seq
		s.mu.Unlock()
		replies := a.replies
		s.deliveries.acked(seq, func() {
			for _, r := range replies {
				_ = s.serve.Publish(r, skeletonReply)
			}
			if s.grouped {
				s.mu.Lock()
				s.appending = false
				if len(s.pending) > 0 {
					s.appendGroup()
				}
				s.mu.Unlock()
			}
		})
	}
}

// deliver answers the request whose append a delivered message is, once
// its acknowledgement has been read.
func (s *skeleton) deliver(m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		s.fail(err)
		return
	}
	s.deliveries.deliver(meta.Sequence.Stream)
}

// fail keeps the first failure; its request is never answered, so the
// run stalls and says so.
func (s *skeleton) fail(err error) {
	s.mu.Lock()
	if s.failed == nil {
		s.failed = err
	}
	s.mu.Unlock()
}

// err returns the first failure.
func (s *skeleton) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// stop stops the skeleton and deletes its stream.
func (s *skeleton) stop(ctx context.Context) {
	if s.sub != nil {
		_ = s.sub.Unsubscribe()
	}
	if s.serve != nil {
		s.serve.Close()
	}
	if s.acksDone != nil && s.js != nil {
		s.mu.Lock()
		s.stopping = true
		s.mu.Unlock()
		close(s.acks)
		<-s.acksDone
	}
	if s.cc != nil {
		s.cc.Stop()
	}
	if s.js != nil {
		_ = s.js.DeleteStream(ctx, s.stream)
	}
	if s.pub != nil {
		s.pub.Close()
	}
}

// skeletonRate measures the skeleton's rate for the many-partition
// inserts' requests, window in flight, rounds times on a fresh stream
// each, and returns the median.
func (b *bencher) skeletonRate(ctx context.Context, ns *server.Server) (float64, error) {
	if b.window >= pacedPartitions {
		return 0, errors.New("skeleton: the window must be below its partitions")
	}
	bodies, err := encodeRequests(b.n, manyPartitionRequest)
	if err != nil {
		return 0, err
	}
	var rates []float64
	for r := 0; r < b.rounds; r++ {
		res, err := skeletonRound(ctx, ns, b.nc, bodies, b.window, 0, false)
		if err != nil {
			return 0, fmt.Errorf("skeleton: %w", err)
		}
		rates = append(rates, res.rate)
	}
	return median(rates), nil
}

// skeletonRound sends bodies through nc to a skeleton started for the
// round on a fresh stream, window in flight and paced at rate (0: as
// fast as answered), and stops it.
func skeletonRound(ctx context.Context, ns *server.Server, nc *nats.Conn, bodies [][]byte, window int, rate float64, grouped bool) (result, error) {
	s, err := startSkeleton(ctx, ns, grouped)
	if err != nil {
		return result{}, err
	}
	defer s.stop(ctx)
	res, err := sendBodies(nc, bodies, window, rate, func(int) string { return s.subject }, noCheck)
	if err == nil {
		err = s.err()
	}
	return res, err
}

// noCheck accepts every reply.
func noCheck([]byte) error { return nil }

// skeletonPaced is latencyPaced's second floor: the skeleton sent the
// paced run's n requests open loop at rate/s, rounds times on a fresh
// stream each.
func (b *bencher) skeletonPaced(ctx context.Context, ns *server.Server, n int, rate float64) (latencyFigures, error) {
	bodies, err := encodeRequests(n, manyPartitionRequest)
	if err != nil {
		return latencyFigures{}, err
	}
	var rounds latencyRounds
	for r := 0; r < b.rounds; r++ {
		res, err := skeletonRound(ctx, ns, b.nc, bodies, n, rate, false)
		if err != nil {
			return latencyFigures{}, fmt.Errorf("paced skeleton: %w", err)
		}
		rounds.add(res.latencies)
	}
	return rounds.medians(), nil
}
