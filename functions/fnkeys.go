package functions

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"
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
		return FunctionKey{}, "", fmt.Errorf("key name %q: use 1 to 64 letters, digits, '.', '_' and '-'", name)
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
