package journal

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config configures the journal.
type Config struct {
	// Prefix is the first token of every subject and, upper-cased, of
	// every stream name ("cairn").
	Prefix string
	// Replicas of every stream (1; 3 on a cluster).
	Replicas int
	// AppendTimeout bounds one append's wait for its acknowledgement (10s).
	AppendTimeout time.Duration
}

var prefixRE = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// Validate fills defaults and checks the configuration.
func (c *Config) Validate() error {
	if c.Prefix == "" {
		c.Prefix = "cairn"
	}
	if !prefixRE.MatchString(c.Prefix) {
		return fmt.Errorf("journal: prefix %q must be 1-32 of a-z, 0-9, _ and -", c.Prefix)
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		return fmt.Errorf("journal: replicas must be 1..5, got %d", c.Replicas)
	}
	if c.AppendTimeout <= 0 {
		c.AppendTimeout = 10 * time.Second
	}
	return nil
}

// Errors of appends. Anything else is an infrastructure failure whose
// outcome is unknown: the record may or may not have been stored.
var (
	// ErrConflict: the partition (or catalog name) has moved past the
	// expected sequence; nothing was stored.
	ErrConflict = errors.New("journal: the partition has moved on (wrong last sequence)")
	// ErrTableGone: the table's stream does not exist (the table was
	// deleted); nothing was stored.
	ErrTableGone = errors.New("journal: the table's stream does not exist")
	// ErrCorrupt: a stored record cannot be decoded (damaged, or written by
	// a newer version). Readers stop rather than skip it.
	ErrCorrupt = errors.New("undecodable record")
)

// Journal is Cairn's journal on JetStream. It starts no goroutines of its
// own; Consume and WatchCatalog run in their caller's.
type Journal struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg Config
}

// New returns a journal on nc. Call Init before use.
func New(nc *nats.Conn, cfg Config) (*Journal, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(16384))
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	return &Journal{nc: nc, js: js, cfg: cfg}, nil
}

// CatalogStreamName returns the name of the catalog stream.
func CatalogStreamName(prefix string) string { return strings.ToUpper(prefix) + "_CATALOG" }

// StreamName returns the name of a table incarnation's stream.
func StreamName(prefix, table string, epoch uint64) string {
	return strings.ToUpper(prefix) + "_T_" + strings.ToLower(table) + "_" + strconv.FormatUint(epoch, 10)
}

func (j *Journal) catalogSubject(table string) string {
	return j.cfg.Prefix + ".catalog." + strings.ToLower(table)
}

func (j *Journal) tableSubjects(table string, epoch uint64) string {
	return j.cfg.Prefix + ".j." + strings.ToLower(table) + "." + strconv.FormatUint(epoch, 10) + ".>"
}

// PartitionSubject returns the subject of a partition's journal.
func (j *Journal) PartitionSubject(table string, epoch uint64, pk string) string {
	return j.cfg.Prefix + ".j." + strings.ToLower(table) + "." + strconv.FormatUint(epoch, 10) + "." + EncodePartition(pk)
}

// EncodePartition encodes a partition key as one subject token: "k" and the
// key's bytes in unpadded base64url. Subjects cannot carry '.', '*', '>',
// whitespace or an empty token; the alphabet [A-Za-z0-9_-] has none of them
// and the "k" keeps the empty key a token. Never change this encoding: it
// names every journal ever written.
func EncodePartition(pk string) string {
	return "k" + base64.RawURLEncoding.EncodeToString([]byte(pk))
}

// DecodePartition is the inverse of EncodePartition.
func DecodePartition(tok string) (string, error) {
	if !strings.HasPrefix(tok, "k") {
		return "", fmt.Errorf("journal: partition token %q lacks its prefix", tok)
	}
	b, err := base64.RawURLEncoding.DecodeString(tok[1:])
	if err != nil {
		return "", fmt.Errorf("journal: partition token %q: %w", tok, err)
	}
	return string(b), nil
}

// Init creates or updates the catalog stream (idempotent).
func (j *Journal) Init(ctx context.Context) error {
	_, err := j.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        CatalogStreamName(j.cfg.Prefix),
		Description: "Cairn table catalog",
		Subjects:    []string{j.cfg.Prefix + ".catalog.>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Replicas:    j.cfg.Replicas,
		Duplicates:  2 * time.Minute,
		AllowDirect: true,
	})
	if err != nil {
		return fmt.Errorf("journal: create catalog stream: %w", err)
	}
	return nil
}

func (j *Journal) tableStreamConfig(table string, epoch uint64) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        StreamName(j.cfg.Prefix, table, epoch),
		Description: "Cairn journal of table " + table,
		Subjects:    []string{j.tableSubjects(table, epoch)},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Replicas:    j.cfg.Replicas,
		Duplicates:  2 * time.Minute,
		AllowDirect: true,
	}
}

// EnsureTableStream creates a table incarnation's stream if it does not
// exist (idempotent). The host that creates the table calls it; the others
// call WaitTableStream first, so that a cluster does not see several
// creations of one stream racing.
func (j *Journal) EnsureTableStream(ctx context.Context, table string, epoch uint64) error {
	name := StreamName(j.cfg.Prefix, table, epoch)
	if _, err := j.js.Stream(ctx, name); err == nil {
		return nil
	}
	_, err := j.js.CreateStream(ctx, j.tableStreamConfig(table, epoch))
	if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("journal: create stream of %s: %w", table, err)
	}
	return nil
}

// WaitTableStream waits up to d for a table incarnation's stream to exist
// and reports whether it does.
func (j *Journal) WaitTableStream(ctx context.Context, table string, epoch uint64, d time.Duration) (bool, error) {
	name := StreamName(j.cfg.Prefix, table, epoch)
	deadline := time.Now().Add(d)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		// A stream being created on a cluster may not answer until its
		// leader is elected: a short timeout counts as "not yet".
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := j.js.Stream(sctx, name)
		cancel()
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) && !errors.Is(err, context.DeadlineExceeded) {
			return false, fmt.Errorf("journal: stream of %s: %w", table, err)
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// DeleteTableStream deletes a table incarnation's stream with everything in
// it. A stream already gone is not an error.
func (j *Journal) DeleteTableStream(ctx context.Context, table string, epoch uint64) error {
	err := j.js.DeleteStream(ctx, StreamName(j.cfg.Prefix, table, epoch))
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("journal: delete stream of %s: %w", table, err)
	}
	return nil
}

// Append stores rec in the partition's journal if the partition's last
// sequence is still expectLast (0: the partition has no record yet) and
// returns the record's sequence. ErrConflict and ErrTableGone mean nothing
// was stored; any other error leaves the outcome unknown (see FindRecord).
// Appends to different partitions run concurrently over one connection.
func (j *Journal) Append(ctx context.Context, table string, epoch uint64, rec *Record, expectLast uint64) (uint64, error) {
	data, err := EncodeRecord(rec)
	if err != nil {
		return 0, err
	}
	subj := j.PartitionSubject(table, epoch, rec.PartitionKey)
	seq, err := j.publish(ctx, subj, data, expectLast)
	if err != nil {
		if errors.Is(err, errNoStream) {
			if _, serr := j.js.Stream(ctx, StreamName(j.cfg.Prefix, table, epoch)); errors.Is(serr, jetstream.ErrStreamNotFound) {
				return 0, ErrTableGone
			}
		}
		if errors.Is(err, ErrConflict) {
			return 0, err
		}
		return 0, fmt.Errorf("journal: append %s/%q: %w", table, rec.PartitionKey, err)
	}
	return seq, nil
}

var errNoStream = errors.New("no stream answered")

func (j *Journal) publish(ctx context.Context, subj string, data []byte, expectLast uint64) (uint64, error) {
	f, err := j.js.PublishMsgAsync(&nats.Msg{Subject: subj, Data: data}, jetstream.WithExpectLastSequencePerSubject(expectLast))
	if err != nil {
		return 0, err
	}
	t := time.NewTimer(j.cfg.AppendTimeout)
	defer t.Stop()
	select {
	case ack := <-f.Ok():
		return ack.Sequence, nil
	case err := <-f.Err():
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return 0, ErrConflict
		}
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			return 0, fmt.Errorf("%w: %v", errNoStream, err)
		}
		return 0, err
	case <-t.C:
		return 0, fmt.Errorf("no acknowledgement within %v", j.cfg.AppendTimeout)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// LastSeq returns the sequence of the partition's last record (0: none).
func (j *Journal) LastSeq(ctx context.Context, table string, epoch uint64, pk string) (uint64, error) {
	s, err := j.js.Stream(ctx, StreamName(j.cfg.Prefix, table, epoch))
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return 0, ErrTableGone
		}
		return 0, fmt.Errorf("journal: last sequence of %s/%q: %w", table, pk, err)
	}
	m, err := s.GetLastMsgForSubject(ctx, j.PartitionSubject(table, epoch, pk))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("journal: last sequence of %s/%q: %w", table, pk, err)
	}
	return m.Sequence, nil
}

// LastStreamSeq returns the last sequence of a table's whole stream.
func (j *Journal) LastStreamSeq(ctx context.Context, table string, epoch uint64) (uint64, error) {
	s, err := j.js.Stream(ctx, StreamName(j.cfg.Prefix, table, epoch))
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return 0, ErrTableGone
		}
		return 0, fmt.Errorf("journal: stream of %s: %w", table, err)
	}
	return s.CachedInfo().State.LastSeq, nil
}

// FindRecord looks for the record with the given nonce among the
// partition's records after sequence after: how a committer learns whether
// an append whose acknowledgement was lost did land.
func (j *Journal) FindRecord(ctx context.Context, table string, epoch uint64, pk string, after uint64, nonce string) (uint64, bool, error) {
	s, err := j.js.Stream(ctx, StreamName(j.cfg.Prefix, table, epoch))
	if err != nil {
		return 0, false, fmt.Errorf("journal: find record in %s/%q: %w", table, pk, err)
	}
	subj := j.PartitionSubject(table, epoch, pk)
	for seq := after + 1; ; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("journal: find record in %s/%q: %w", table, pk, err)
		}
		rec, err := DecodeRecord(m.Data)
		if err != nil {
			return 0, false, fmt.Errorf("journal: find record in %s/%q at %d: %w", table, pk, m.Sequence, err)
		}
		if rec.Nonce == nonce {
			return m.Sequence, true, nil
		}
		seq = m.Sequence + 1
	}
}

// Consume delivers the table's records from sequence from on, in journal
// order, to fn, until ctx ends (nil) or fn or decoding fails (that error:
// a record that cannot be decoded is never skipped). pending is the number
// of records the stream holds beyond this one.
func (j *Journal) Consume(ctx context.Context, table string, epoch uint64, from uint64, fn func(seq uint64, rec *Record, pending uint64) error) error {
	return j.ConsumeKnown(ctx, table, epoch, from, nil, fn)
}

// ConsumeKnown is Consume with a shortcut for records this host appended:
// known(nonce) may return the record with that nonce, still decoded in
// memory, which is then used instead of decoding the message. Nonces are
// unique, so the record is exactly the one stored.
func (j *Journal) ConsumeKnown(ctx context.Context, table string, epoch uint64, from uint64, known func(nonce string) *Record, fn func(seq uint64, rec *Record, pending uint64) error) error {
	return j.consume(ctx, StreamName(j.cfg.Prefix, table, epoch), from, func(seq uint64, data []byte, pending uint64) error {
		if known != nil {
			if nonce, ok := PeekNonce(data); ok {
				if rec := known(nonce); rec != nil {
					return fn(seq, rec, pending)
				}
			}
		}
		rec, err := DecodeRecord(data)
		if err != nil {
			return fmt.Errorf("journal: %s record %d: %w: %v", table, seq, ErrCorrupt, err)
		}
		return fn(seq, rec, pending)
	})
}

// consume runs an ordered consumer on stream from sequence from.
func (j *Journal) consume(ctx context.Context, stream string, from uint64, fn func(seq uint64, data []byte, pending uint64) error) error {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if from > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := j.js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("journal: consume %s: %w", stream, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return fmt.Errorf("journal: consume %s: %w", stream, err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("journal: consume %s: %w", stream, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("journal: consume %s: %w", stream, err)
		}
		if err := fn(md.Sequence.Stream, m.Data(), md.NumPending); err != nil {
			return err
		}
	}
}
