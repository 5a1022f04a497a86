package functions

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// A function key lets a caller reach a function's HTTP routes whose auth
// is "key" (docs/FUNCTIONS.md, HTTP triggers). It is shown once, when it
// is made: "<id>.<secret>", the id 8 characters naming it, the secret 32
// random bytes. The registry keeps the id, a name, the time it was made
// and the SHA-256 of the secret, never the secret: a secret of 256
// random bits needs no slow hash, and a stolen registry calls nothing.
// A function may have several keys at once, so that one can be replaced
// without a moment when neither works (rotation).
type FunctionKey struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	SHA256  string    `json:"sha256"`
}

// MaxFunctionKeys bounds the keys of one function.
const MaxFunctionKeys = 16

var (
	keyIDEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)
	keyIDRE       = regexp.MustCompile(`^[a-z2-7]{8}$`)
	keyNameRE     = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
)

// NewFunctionKey makes a key named name and returns it with the text a
// caller sends ("<id>.<secret>"), which nothing keeps.
func NewFunctionKey(name string, now time.Time) (FunctionKey, string, error) {
	if !keyNameRE.MatchString(name) {
		return FunctionKey{}, "", engine.Errorf(engine.CodeInvalidInput, "key name %.80q: use 1 to 64 letters, digits, '.', '_' and '-'", name)
	}
	var id [5]byte
	var secret [32]byte
	_, _ = rand.Read(id[:])
	_, _ = rand.Read(secret[:])
	k := FunctionKey{ID: strings.ToLower(keyIDEncoding.EncodeToString(id[:])), Name: name, Created: now.UTC()}
	text := base64.RawURLEncoding.EncodeToString(secret[:])
	sum := sha256.Sum256([]byte(text))
	k.SHA256 = hex.EncodeToString(sum[:])
	return k, k.ID + "." + text, nil
}

// SplitFunctionKey splits what a caller sent into the key's id and its
// secret; ok is false for anything not shaped like a key.
func SplitFunctionKey(presented string) (id, secret string, ok bool) {
	id, secret, ok = strings.Cut(presented, ".")
	if !ok || !keyIDRE.MatchString(id) || len(secret) != 43 {
		return "", "", false
	}
	return id, secret, true
}

// Matches reports, in constant time, whether secret is the key's.
func (k FunctionKey) Matches(secret string) bool {
	sum := sha256.Sum256([]byte(secret))
	want, err := hex.DecodeString(k.SHA256)
	return err == nil && subtle.ConstantTimeCompare(sum[:], want) == 1
}

// KeyStore keeps the functions' keys in the key-value bucket
// <PREFIX>_FNKEYS, one entry "<function>.<id>" per key, and a copy of
// them all in memory, kept by a watch, which the HTTP triggers check
// against (Verify: no request to the bucket per call).
type KeyStore struct {
	kv jetstream.KeyValue

	mu   sync.RWMutex
	keys map[string]map[string]FunctionKey // function → id → key
	rev  *revision                         // the bucket revision the watch delivered last (WaitCurrent)
}

// KeysBucket is the name of the keys' bucket for prefix.
func KeysBucket(prefix string) string {
	return bucketName(prefix, "FNKEYS")
}

// OpenKeyStore opens (creating if needed, with replicas) the keys'
// bucket; Watch keeps the copy. With replicas 0 it only opens an
// existing bucket (the operators' commands).
func OpenKeyStore(ctx context.Context, js jetstream.JetStream, prefix string, replicas int) (*KeyStore, error) {
	var kv jetstream.KeyValue
	var err error
	if replicas == 0 {
		kv, err = js.KeyValue(ctx, KeysBucket(prefix))
	} else {
		kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      KeysBucket(prefix),
			Description: "Cairn functions' keys: the SHA-256 of each key's secret, never the secret",
			Replicas:    replicas,
			Storage:     jetstream.FileStorage,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("functions: keys bucket %s: %w", KeysBucket(prefix), err)
	}
	return &KeyStore{kv: kv, keys: map[string]map[string]FunctionKey{}, rev: newRevision()}, nil
}

// KeyInfo is a key as the operators see it: never its secret or hash.
type KeyInfo struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
}

// Info returns what may be shown of the key.
func (k FunctionKey) Info() KeyInfo { return KeyInfo{ID: k.ID, Name: k.Name, Created: k.Created} }

// Create makes a key named name for function and returns it with the
// text a caller sends, shown this once. A function holds at most
// MaxFunctionKeys keys; names need not differ (ids do).
func (s *KeyStore) Create(ctx context.Context, function, name string, now time.Time) (FunctionKey, string, error) {
	if err := ValidateName("function", function); err != nil {
		return FunctionKey{}, "", engine.Errorf(engine.CodeInvalidInput, "%v", err)
	}
	have, err := s.List(ctx, function)
	if err != nil {
		return FunctionKey{}, "", err
	}
	if len(have) >= MaxFunctionKeys {
		return FunctionKey{}, "", engine.Errorf(engine.CodeInvalidInput, "function %q has %d keys, the most it may: revoke one first", function, len(have))
	}
	k, text, err := NewFunctionKey(name, now)
	if err != nil {
		return FunctionKey{}, "", err
	}
	b, err := json.Marshal(k)
	if err != nil {
		return FunctionKey{}, "", err
	}
	if _, err := s.kv.Create(ctx, function+"."+k.ID, b); err != nil {
		return FunctionKey{}, "", fmt.Errorf("functions: store key: %w", err)
	}
	return k, text, nil
}

// List reads a function's keys from the bucket, oldest first.
func (s *KeyStore) List(ctx context.Context, function string) ([]FunctionKey, error) {
	lister, err := s.kv.ListKeysFiltered(ctx, function+".*")
	if err != nil {
		return nil, fmt.Errorf("functions: list keys: %w", err)
	}
	var out []FunctionKey
	for name := range lister.Keys() {
		e, err := s.kv.Get(ctx, name)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // revoked meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("functions: read key: %w", err)
		}
		var k FunctionKey
		if json.Unmarshal(e.Value(), &k) == nil {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b FunctionKey) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// ErrNoSuchKey is Revoke's answer for a key the function does not have.
var ErrNoSuchKey = errors.New("no such key")

// Revoke removes a function's key: calls with it are refused as soon as
// each node's watch has seen the removal.
func (s *KeyStore) Revoke(ctx context.Context, function, id string) error {
	if !keyIDRE.MatchString(id) {
		return fmt.Errorf("%w: %q is not a key id", ErrNoSuchKey, id)
	}
	if _, err := s.kv.Get(ctx, function+"."+id); errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%w: function %q has no key %q", ErrNoSuchKey, function, id)
	} else if err != nil {
		return err
	}
	return s.kv.Purge(ctx, function+"."+id)
}

// Watch keeps the copy in memory until ctx ends; ready is called once it
// holds what the bucket held when the watch began.
func (s *KeyStore) Watch(ctx context.Context, ready func()) error {
	return watchKV(ctx, s.kv, "keys", func(e jetstream.KeyValueEntry) {
		fn, id, _ := strings.Cut(e.Key(), ".")
		var k FunctionKey
		put := e.Operation() == jetstream.KeyValuePut && json.Unmarshal(e.Value(), &k) == nil
		defer s.rev.move(e.Revision())
		s.mu.Lock()
		defer s.mu.Unlock()
		if put {
			if s.keys[fn] == nil {
				s.keys[fn] = map[string]FunctionKey{}
			}
			s.keys[fn][id] = k
		} else {
			delete(s.keys[fn], id)
		}
	}, ready)
}

// WaitCurrent returns once the watched copy (Watch) holds every change
// the bucket held when it was called, or ctx ends. The operators' API
// waits for it after a create or a revoke, so that a call this node
// takes after the answer is checked against the change.
func (s *KeyStore) WaitCurrent(ctx context.Context) error {
	st, err := s.kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("functions: the keys bucket's state: %w", err)
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return errors.New("functions: the keys bucket's state names no stream")
	}
	return s.rev.wait(ctx, bs.StreamInfo().State.LastSeq)
}

// Verify returns the key of function that presented (a caller's
// "<id>.<secret>") is, or false.
func (s *KeyStore) Verify(function, presented string) (FunctionKey, bool) {
	id, secret, ok := SplitFunctionKey(presented)
	if !ok {
		return FunctionKey{}, false
	}
	s.mu.RLock()
	k, ok := s.keys[function][id]
	s.mu.RUnlock()
	if !ok || !k.Matches(secret) {
		return FunctionKey{}, false
	}
	return k, true
}
