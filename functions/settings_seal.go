package functions

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// A secret's value is sealed before it is stored, with a key every node
// derives from the node user's password and no client knows:
//
//	sealed = version (1 byte, sealVersion) | nonce (12 bytes) | AES-256-GCM ciphertext and tag
//
// The additional data binds the ciphertext to its place (the function and
// the secret's name), so a sealed value copied under another name or
// function does not open. A newer version is refused, never guessed at.
// testdata/settings-v1.json is a record in this format, kept forever.

const (
	// sealVersion is the first byte of a sealed value.
	sealVersion byte = 1
	// settingsKeyLabel is the HMAC message that derives the key from the
	// password: distinct from natsauth.ServeCreds's and the outbox's, so
	// that no other use of the password yields this key.
	settingsKeyLabel = "cairn function secrets v1"
)

// SecretsKey derives the key of function secrets from the node user's
// password: HMAC-SHA256(password, label). Every node of a cluster shares
// the password, so every node derives the same key. nil for an empty
// password (secrets are refused then).
func SecretsKey(password []byte) []byte {
	if len(password) == 0 {
		return nil
	}
	mac := hmac.New(sha256.New, password)
	mac.Write([]byte(settingsKeyLabel))
	return mac.Sum(nil)
}

// sealer seals and opens secrets with one key.
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("functions: the secrets key is %d bytes, want 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

// sealAD is the additional data of a secret: its function and name.
func sealAD(fn, name string) []byte {
	return []byte("cairn secret\x00" + fn + "\x00" + name)
}

func (s *sealer) seal(fn, name string, value []byte) ([]byte, error) {
	out := make([]byte, 1+s.aead.NonceSize(), 1+s.aead.NonceSize()+len(value)+s.aead.Overhead())
	out[0] = sealVersion
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, err
	}
	return s.aead.Seal(out, out[1:], value, sealAD(fn, name)), nil
}

// errSealed is the error of a sealed value that does not open: the error
// names no byte of it.
var errSealed = errors.New("the secret does not open with this node's key (a node with other credentials wrote it, or the record is damaged)")

func (s *sealer) open(fn, name string, sealed []byte) ([]byte, error) {
	if len(sealed) == 0 {
		return nil, errSealed
	}
	if sealed[0] != sealVersion {
		return nil, fmt.Errorf("the secret is sealed in format %d; this node reads %d", sealed[0], sealVersion)
	}
	n := s.aead.NonceSize()
	if len(sealed) < 1+n+s.aead.Overhead() {
		return nil, errSealed
	}
	v, err := s.aead.Open(nil, sealed[1:1+n], sealed[1+n:], sealAD(fn, name))
	if err != nil {
		return nil, errSealed
	}
	return v, nil
}
