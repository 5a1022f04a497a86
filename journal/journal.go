package journal

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
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
	// AppendTimeout bounds one try of an append to a table's journal: its
	// wait for the acknowledgement (1s). A try without one has an unknown
	// outcome, which the committer settles from the journal, sending the
	// identical append again while nothing follows its expected sequence
	// (see NextRecord). When a stream's leader is lost, the record in
	// flight to it is lost without an answer: this is how long an append
	// waits for one before it looks again (on the new leader, once there
	// is one). Shorter costs re-sends under load, never correctness.
	AppendTimeout time.Duration
	// CatalogTimeout bounds a catalog append's tries (10s): each waits
	// AppendTimeout at most for its acknowledgement and, unanswered, is
	// sent again until this has passed (catalog.go, appendCatalog). Its
	// caller (a table's creation or deletion) sees an unknown outcome as
	// an error, so it keeps trying longer than a table's append.
	CatalogTimeout time.Duration
	// Log receives what a reader does about a lost consumer or lost
	// deliveries (nil: nothing is logged). Each is rare: a server that
	// died, a connection that moved.
	Log *slog.Logger
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
		c.AppendTimeout = time.Second
	}
	if c.CatalogTimeout <= 0 {
		c.CatalogTimeout = 10 * time.Second
	}
	return nil
}

// ErrCorrupt: a stored record cannot be decoded (damaged, or written by a
// newer version) or does not belong on its subject. Table readers stop
// rather than skip it; the catalog watcher hands it to its caller. The
// errors of appends are engine.ErrConflict and engine.ErrTableGone, which
// the journal wraps.
var ErrCorrupt = errors.New("undecodable record")

// CorruptError is a stored record a reader cannot use, and where it is:
// errors.Is(err, ErrCorrupt) holds, and Seq is its stream sequence.
type CorruptError struct {
	What    string // the table's name, or "catalog"
	Seq     uint64
	Subject string // the subject it was published on
	Err     error  // why: the decoder's error, or the subject that does not match
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("journal: %s record %d: %v: %v", e.What, e.Seq, ErrCorrupt, e.Err)
}

// Unwrap makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }

// Journal is Cairn's journal on JetStream. It starts no goroutines that
// outlive a call; Consume and WatchCatalog run in their caller's.
type Journal struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg Config

	lmu     sync.Mutex
	leaders map[string]*leaderWatch // by stream name
	reconn  chan struct{}           // closed at the next reconnect

	rmu   sync.Mutex
	reads map[string]*readSlots // the Reads of each stream under way or waiting (read.go)

	// lose, set by tests only, makes a reader treat the delivery of a
	// stream sequence as lost in transit.
	lose func(stream string, seq uint64) bool
	// noConsumer, set by tests only, makes a reader's consumer creation
	// go unanswered until its bound (none: until its context ends).
	noConsumer func(stream string) bool
	// loseAck, set by tests only, is called before an append is sent and
	// makes its answer, whatever it is, go unheard when it says so.
	loseAck func(subj string) bool
	// failAppend, set by tests only, is called before an append is sent:
	// an error it returns is the append's outcome, and nothing is sent.
	failAppend func(subj string, data []byte) error
}

// New returns a journal on nc; it starts nothing and sends nothing. Call
// Init before use. A bad configuration or a nil connection is an error.
func New(nc *nats.Conn, cfg Config) (*Journal, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if nc == nil {
		return nil, errors.New("journal: no NATS connection")
	}
	// An acknowledgement that never comes (its stream's leader was lost)
	// must not hold its place among the pending ones for ever.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(16384),
		jetstream.WithPublishAsyncTimeout(max(cfg.AppendTimeout, cfg.CatalogTimeout)))
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	return &Journal{nc: nc, js: js, cfg: cfg}, nil
}
