package journal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// ReadRange says which records Read returns.
type ReadRange struct {
	// From is the first sequence to read (1: the beginning; 0 is read as 1).
	From uint64
	// Max bounds the number of records (1 or more).
	Max int
	// MaxBytes bounds the records' encoded size (0: no bound); the first
	// record is returned whatever its size, so that a reader always moves.
	MaxBytes int
	// Partitions, if any, are the only partition keys read.
	Partitions []string
}

// maxReadsPerTable bounds the Reads of one table that hold a consumer of
// its stream at once on this node. A stream's consumers are limited:
// Cairn's streams set no MaxConsumers, so nats-server's default applies,
// 1,000 per stream (JSDefaultMaxConsumersPerStream), and the views'
// appliers (one per node), the outbox relay, the functions' table
// triggers and the as-of replays (two per node at most) need theirs. With
// 8 per node, reads leave room for the others on clusters of up to about
// a hundred nodes; when the change feed made a consumer per request, a
// flood of them took every one, and the views, the as-of reads and every
// other reader of the table were refused. A read takes a few
// milliseconds, so 8 at once serve thousands of pages a second per table.
const maxReadsPerTable = 8

// ErrReadsBusy: a Read's context ended while it waited for one of the
// reads of its table (maxReadsPerTable) to end.
var ErrReadsBusy = errors.New("every read of this table's journal the node allows at once is under way")

// readSlots is a semaphore of maxReadsPerTable places for one stream,
// kept while anyone uses or waits for it.
type readSlots struct {
	places chan struct{}
	users  int
}

// takeRead waits for a place to read stream (ErrReadsBusy when ctx ends
// first); the returned func gives it back.
func (j *Journal) takeRead(ctx context.Context, stream string) (func(), error) {
	j.rmu.Lock()
	rs := j.reads[stream]
	if rs == nil {
		if j.reads == nil {
			j.reads = map[string]*readSlots{}
		}
		rs = &readSlots{places: make(chan struct{}, maxReadsPerTable)}
		j.reads[stream] = rs
	}
	rs.users++
	j.rmu.Unlock()
	leave := func() {
		j.rmu.Lock()
		if rs.users--; rs.users == 0 {
			delete(j.reads, stream)
		}
		j.rmu.Unlock()
	}
	select {
	case rs.places <- struct{}{}:
		return func() { <-rs.places; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, fmt.Errorf("%w (%d): %w", ErrReadsBusy, maxReadsPerTable, context.Cause(ctx))
	}
}

// readInactive is how long the server keeps a Read's consumer after
// its last use, should the node die before it deletes it; readDeleteTimeout
// bounds that deletion (done even when the Read's context has ended, so
// that a cancelled read leaves nothing behind).
const (
	readInactive      = 30 * time.Second
	readDeleteTimeout = 5 * time.Second
)

// Stored is a record as it is stored: its sequence and its size.
type Stored struct {
	Seq    uint64
	Record *engine.Record
	Size   int
}

// Page is what Read returns.
type Page struct {
	Records []Stored
	// Next is the sequence to read from next: after the last record
	// returned, or past the records that do not match the partitions.
	Next uint64
	// Head is the table's last sequence as Read saw it.
	Head uint64
}

// Read returns a table's records from r.From on, in journal order, with
// the same checks as Consume (a record that cannot be decoded or is on
// another partition's subject is a *CorruptError). It keeps nothing on
// the server once it returns: it reads through a short-lived ephemeral
// consumer (in memory, without acknowledgements) that it deletes
// afterwards. A table incarnation that does not exist wraps
// engine.ErrTableGone; r.From before the stream's first record (the
// table's retention pruned it) is engine.CodeHistoryTruncated.
//
// It never waits for records: a wait would hold the consumer (the change
// feed's long-polls wait on the node's view instead, Table.Await). At
// most maxReadsPerTable Reads of one table hold a consumer at once on
// this node; another waits for its turn, and wraps ErrReadsBusy when ctx
// ends first.
//
// Cost: one request (stream info) when nothing is there from r.From on,
// otherwise four (stream info, consumer create, fetch, consumer delete);
// the records are decoded.
func (j *Journal) Read(ctx context.Context, table string, epoch uint64, shards uint32, r ReadRange) (*Page, error) {
	if r.From == 0 {
		r.From = 1
	}
	if r.Max < 1 {
		return nil, fmt.Errorf("journal: read %s: max %d", table, r.Max)
	}
	name := StreamName(j.cfg.Prefix, table, epoch)
	s, err := j.js.Stream(ctx, name)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			err = engine.ErrTableGone
		}
		return nil, fmt.Errorf("journal: read %s: %w", table, err)
	}
	// Records below the recorded horizon are as good as gone (a prune's
	// purge after it may not have run yet): refused, as they will be.
	h := HistoryOf(s.CachedInfo())
	head := h.Last
	if first := max(h.First, h.Horizon); r.From < first && head > 0 {
		return nil, fmt.Errorf("journal: read %s: %w", table, engine.Errorf(engine.CodeHistoryTruncated,
			"the journal of table %s starts at position %d (its retention pruned what was before): position %d is no longer there; read the table for its state, then its changes from %d",
			engine.ShownTable(table), first, r.From, first))
	}
	page := &Page{Next: max(r.From, head+1), Head: head}
	if r.From > head {
		page.Next = r.From
		return page, nil
	}
	cfg := jetstream.ConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       r.From,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: readInactive, // removed by the server if this node dies before it deletes it
	}
	var subjects []string
	for _, pk := range r.Partitions {
		if subj := j.PartitionSubject(table, epoch, shards, pk); !slices.Contains(subjects, subj) {
			subjects = append(subjects, subj)
		}
	}
	if len(subjects) == 1 {
		cfg.FilterSubject = subjects[0]
	} else {
		cfg.FilterSubjects = subjects
	}
	done, err := j.takeRead(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("journal: read %s: %w", table, err)
	}
	defer done()
	cons, err := s.CreateConsumer(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("journal: read %s: %w", table, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readDeleteTimeout)
		defer cancel()
		_ = s.DeleteConsumer(dctx, cons.CachedInfo().Name)
	}()

	prefix := j.incarnationPrefix(table, epoch)
	var tok []byte
	size := 0
	full := false    // stopped by Max or MaxBytes
	caughtUp := true // nothing matching was left when the last fetch ended
	take := func(batch jetstream.MessageBatch) error {
		for m := range batch.Messages() {
			if full {
				continue // drain the batch
			}
			md, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("journal: read %s: %w", table, err)
			}
			seq, data := md.Sequence.Stream, m.Data()
			if r.MaxBytes > 0 && len(page.Records) > 0 && size+len(data) > r.MaxBytes {
				full, caughtUp = true, false
				continue
			}
			rec, err := DecodeRecord(data)
			if err != nil {
				return &CorruptError{What: table, Seq: seq, Subject: m.Subject(), Err: err}
			}
			tok = appendPartitionToken(append(tok[:0], prefix...), shards, rec.PartitionKey)
			if m.Subject() != string(tok) {
				return &CorruptError{What: table, Seq: seq, Subject: m.Subject(), Err: fmt.Errorf("partition key %q does not belong on subject %q", rec.PartitionKey, m.Subject())}
			}
			size += len(data)
			page.Records = append(page.Records, Stored{Seq: seq, Record: rec, Size: len(data)})
			caughtUp = md.NumPending == 0
			full = len(page.Records) >= r.Max
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && !errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("journal: read %s: %w", table, err)
		}
		return nil
	}
	pending := cons.CachedInfo().NumPending
	if pending > 0 {
		batch, err := cons.FetchNoWait(r.Max)
		if err == nil {
			err = take(batch)
		}
		if err != nil {
			return nil, err
		}
	}
	if pending > 0 && len(page.Records) == 0 {
		// Records were there but none came: say nothing of them.
		page.Next = r.From
	}
	if n := len(page.Records); n > 0 {
		last := page.Records[n-1].Seq
		page.Head = max(page.Head, last)
		page.Next = last + 1
		if caughtUp {
			// Nothing after last matched when the consumer looked, which
			// was after head was read.
			page.Next = max(page.Next, head+1)
		}
	}
	return page, nil
}
