// Package values keeps the large values of entities (docs/VALUES.md) in a
// NATS JetStream object store bucket, <PREFIX>_VALUES: one object per
// uploaded value, named
//
//	<account>/<table>/<hex SHA-256 of PartitionKey 0x00 RowKey>/<id>
//
// (keys may be 1 KiB each, too long for the subjects the store names
// objects by), with the keys in the object's metadata so that a sweep can
// find the entity. The id (engine.NewValueID) begins with the upload time;
// the entity holds the reference engine.ValueRef(id).
//
// What fails and what it costs: Put streams the value in chunks of
// 128 KiB (the client's default), each a message of the bucket's stream,
// and holds one chunk in memory; a value cut short or past the limit is
// purged before Put returns. A process killed during a Put leaves chunks
// that no object names: Orphans finds and purges them once they are old.
// Delete is idempotent (an object already gone is success) and leaves no
// description behind. List reads every description: it costs one message
// per object.
package values

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// Bucket is the name of the values' object store bucket for a subject
// prefix.
func Bucket(prefix string) string { return strings.ToUpper(prefix) + "_VALUES" }

// DefaultMaxSize is the largest value Put takes unless told otherwise:
// 1 GiB.
const DefaultMaxSize = 1 << 30

// The metadata keys of an object: the entity's keys.
const (
	metaPartitionKey = "cairn-partition-key"
	metaRowKey       = "cairn-row-key"
)

// ErrNotFound is a value that is not in the store (never uploaded under
// these keys, or removed).
var ErrNotFound = errors.New("values: no such value")

// Key names the entity a value belongs to: its account, its table (as
// the table was created: the view's name, not a spelling of it) and its
// keys.
type Key struct {
	Account, Table       string
	PartitionKey, RowKey string
}

// Prefix is the name of the entity's values without their ids:
// "<account>/<table>/<hash>/".
func (k Key) Prefix() string {
	h := sha256.New()
	h.Write([]byte(k.PartitionKey))
	h.Write([]byte{0})
	h.Write([]byte(k.RowKey))
	return k.Account + "/" + k.Table + "/" + hex.EncodeToString(h.Sum(nil)) + "/"
}

// Name is the object name of the value id of the entity k.
func (k Key) Name(id string) string { return k.Prefix() + id }

// Info describes a stored value.
type Info struct {
	Name     string
	Key      Key
	ID       string
	Uploaded time.Time // from the id
	Size     uint64
}

// Store is the values' bucket.
type Store struct {
	obj    jetstream.ObjectStore
	stream jetstream.Stream
	bucket string
	pace   putPace
}

// Open creates or opens the bucket (file storage, replicas as the
// journal's streams).
func Open(ctx context.Context, js jetstream.JetStream, prefix string, replicas int) (*Store, error) {
	bucket := Bucket(prefix)
	obj, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      bucket,
		Description: "Cairn large values referenced by entities",
		Replicas:    max(replicas, 1),
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("values: bucket %s: %w", bucket, err)
	}
	stream, err := js.Stream(ctx, "OBJ_"+bucket)
	if err != nil {
		return nil, fmt.Errorf("values: bucket %s: %w", bucket, err)
	}
	return &Store{obj: obj, stream: stream, bucket: bucket}, nil
}

// errTooLarge ends a Put whose value passes its limit.
type errTooLarge struct{ limit int64 }

func (e errTooLarge) Error() string { return fmt.Sprintf("the value is larger than %d bytes", e.limit) }

// limited reads r and fails once it has given more than n bytes. Each
// Read fills p unless the value ends (the store makes one message of each
// Read), and every inFlightCheck of them it waits, by pace, until the
// store has taken all but putWindow of the messages given.
type limited struct {
	r     io.Reader
	n     int64 // bytes still allowed
	full  int64
	pace  func(sent uint64) error
	given *atomic.Uint64 // counts each message given, with other puts' (putPace)
	sent  uint64         // messages given
	eof   error          // the end met while filling the last p
}

func (l *limited) Read(p []byte) (int, error) {
	if l.eof != nil {
		return 0, l.eof
	}
	if l.n < 0 {
		return 0, errTooLarge{l.full}
	}
	if int64(len(p)) > l.n+1 {
		p = p[:l.n+1]
	}
	n := 0
	var err error
	for n < len(p) && err == nil {
		var k int
		k, err = l.r.Read(p[n:])
		n += k
	}
	l.n -= int64(n)
	if l.n < 0 {
		return 0, errTooLarge{l.full}
	}
	if err == io.EOF {
		l.eof, err = io.EOF, nil
		if n == 0 {
			return 0, io.EOF
		}
	}
	if err != nil {
		return 0, err // a body cut short: the put stores nothing
	}
	l.sent++
	if l.given != nil {
		l.given.Add(1)
	}
	if l.pace != nil && l.sent%inFlightCheck == 0 {
		if err := l.pace(l.sent); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// The client library's put sends a value's chunks without waiting for
// their acknowledgements, up to 4,000 of them (500 MiB); the server
// takes at most 128 MiB into a stream's queue at once and refuses the
// rest ("too many requests"), so a gigabyte failed. So the puts running
// at once keep, together, at most putWindow of their chunks (32 MiB)
// beyond what the stream has stored: each put looks every inFlightCheck
// of its chunks at the stream's last sequence against the chunks all of
// them have given since the first began. Other messages of the bucket
// (an object's description, a deletion) only make a put wait less. A
// stream that stores nothing for putStall ends the wait with an error
// (a chunk refused would otherwise hold the window shut for ever).
const (
	putWindow     = 256
	inFlightCheck = 64
	putStall      = 10 * time.Second
)

// putPace is what the store's running puts have given the client
// library, for their waits (pacer).
type putPace struct {
	mu     sync.Mutex
	active int    // puts running
	base   uint64 // the stream's last sequence when the first of them began
	given  atomic.Uint64
}

// beginPut counts a put in, reading the stream's last sequence when it
// is the only one; endPut counts it out.
func (s *Store) beginPut(ctx context.Context) error {
	p := &s.pace
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.active == 0 {
		info, err := s.stream.Info(ctx)
		if err != nil {
			return fmt.Errorf("values: bucket %s: %w", s.bucket, err)
		}
		p.base = info.State.LastSeq
		p.given.Store(0)
	}
	p.active++
	return nil
}

func (s *Store) endPut() {
	s.pace.mu.Lock()
	s.pace.active--
	s.pace.mu.Unlock()
}

// pacer returns the wait of a put: until the stream has stored all but
// putWindow of the chunks the running puts have given.
func (s *Store) pacer(ctx context.Context) func(sent uint64) error {
	return func(uint64) error {
		p := &s.pace
		p.mu.Lock()
		base := p.base
		p.mu.Unlock()
		var last uint64
		moved := time.Now()
		for wait := 100 * time.Microsecond; ; wait = min(2*wait, 20*time.Millisecond) {
			info, err := s.stream.Info(ctx)
			if err != nil {
				return fmt.Errorf("values: the bucket's progress: %w", err)
			}
			seq := info.State.LastSeq
			if seq+putWindow >= base+p.given.Load() {
				return nil
			}
			if seq != last {
				last, moved = seq, time.Now()
			} else if time.Since(moved) > putStall {
				return fmt.Errorf("values: bucket %s stored nothing for %v with %d chunks outstanding", s.bucket, putStall, base+p.given.Load()-seq)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
	}
}

// Put stores the value read from r for the entity k, at most limit bytes
// (DefaultMaxSize when limit <= 0), under a new id made from now and
// random bytes. A value past the limit is RequestBodyTooLarge; a read
// error (a body cut short) is returned as it is. Either way nothing is
// left in the store.
func (s *Store) Put(ctx context.Context, k Key, r io.Reader, limit int64, now time.Time) (Info, error) {
	if limit <= 0 {
		limit = DefaultMaxSize
	}
	var rnd [engine.ValueIDRandom]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return Info{}, fmt.Errorf("values: random id: %w", err)
	}
	id := engine.NewValueID(now, rnd)
	meta := jetstream.ObjectMeta{Name: k.Name(id), Metadata: map[string]string{metaPartitionKey: k.PartitionKey, metaRowKey: k.RowKey}}
	if err := s.beginPut(ctx); err != nil {
		return Info{}, err
	}
	oi, err := s.obj.Put(ctx, meta, &limited{r: r, n: limit, full: limit, pace: s.pacer(ctx), given: &s.pace.given})
	s.endPut()
	if err != nil {
		var tl errTooLarge
		if errors.As(err, &tl) {
			return Info{}, engine.Errorf(engine.CodeRequestBodyTooLarge, "a large value is at most %d bytes", limit)
		}
		return Info{}, fmt.Errorf("values: put %s: %w", meta.Name, err)
	}
	at, _ := engine.ParseValueID(id)
	return Info{Name: oi.Name, Key: k, ID: id, Uploaded: at, Size: oi.Size}, nil
}

// Info describes the value id of the entity k, or returns ErrNotFound.
func (s *Store) Info(ctx context.Context, k Key, id string) (Info, error) {
	oi, err := s.obj.GetInfo(ctx, k.Name(id))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return Info{}, ErrNotFound
	}
	if err != nil {
		return Info{}, fmt.Errorf("values: info %s: %w", k.Name(id), err)
	}
	return info(oi)
}

// Stat describes the value of an object name (Info.Name: what a sweep
// message names), or returns ErrNotFound.
func (s *Store) Stat(ctx context.Context, name string) (Info, error) {
	oi, err := s.obj.GetInfo(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return Info{}, ErrNotFound
	}
	if err != nil {
		return Info{}, fmt.Errorf("values: info %s: %w", name, err)
	}
	return info(oi)
}

// Open returns a reader of the value id of the entity k, streamed from
// the store, and its description; ErrNotFound when it is not there. The
// reader fails if the value is removed while it is read, or its digest
// does not match at the end.
func (s *Store) Open(ctx context.Context, k Key, id string) (io.ReadCloser, Info, error) {
	res, err := s.obj.Get(ctx, k.Name(id))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, Info{}, ErrNotFound
	}
	if err != nil {
		return nil, Info{}, fmt.Errorf("values: get %s: %w", k.Name(id), err)
	}
	oi, err := res.Info()
	if err != nil {
		_ = res.Close()
		return nil, Info{}, fmt.Errorf("values: get %s: %w", k.Name(id), err)
	}
	in, err := info(oi)
	if err != nil {
		_ = res.Close()
		return nil, Info{}, err
	}
	return res, in, nil
}

// Delete removes the object name (as Info.Name gives it), chunks and
// description. An object already gone is success.
func (s *Store) Delete(ctx context.Context, name string) error {
	err := s.obj.Delete(ctx, name)
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("values: delete %s: %w", name, err)
	}
	// The store keeps a deleted object's description as a marker; a
	// value's name is never used again, so the marker is dropped too.
	subj := "$O." + s.bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name))
	if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
		return fmt.Errorf("values: delete %s: %w", name, err)
	}
	return nil
}

// ParseName splits a value's object name into the entity's account and
// table (its keys are in the object's metadata: Info) and the value's id.
func ParseName(name string) (Key, string, error) {
	parts := strings.Split(name, "/")
	if len(parts) != 4 || parts[0] == "" || parts[1] == "" || len(parts[2]) != 2*sha256.Size {
		return Key{}, "", fmt.Errorf("values: %.300q is not a value's name", name)
	}
	if _, err := hex.DecodeString(parts[2]); err != nil {
		return Key{}, "", fmt.Errorf("values: %.300q is not a value's name", name)
	}
	if _, err := engine.ParseValueID(parts[3]); err != nil {
		return Key{}, "", fmt.Errorf("values: %.300q is not a value's name: %v", name, err)
	}
	return Key{Account: parts[0], Table: parts[1]}, parts[3], nil
}

// info turns an object's description into an Info, refusing a name that
// is not a value's.
func info(oi *jetstream.ObjectInfo) (Info, error) {
	k, id, err := ParseName(oi.Name)
	if err != nil {
		return Info{}, err
	}
	at, _ := engine.ParseValueID(id)
	k.PartitionKey, k.RowKey = oi.Metadata[metaPartitionKey], oi.Metadata[metaRowKey]
	if k.Name(id) != oi.Name {
		return Info{}, fmt.Errorf("values: %q does not match the keys of its metadata", oi.Name)
	}
	return Info{Name: oi.Name, Key: k, ID: id, Uploaded: at, Size: oi.Size}, nil
}
