package operator

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TokenFile is the name of the token file in a node's data directory.
const TokenFile = "operator.token"

// MinTokenLength is the shortest token a node accepts from its operator.
const MinTokenLength = 16

// LoadToken returns the operator token of the data directory dir, creating
// it (32 random bytes, hex; mode 0600) if the file does not exist. created
// says it was made now; loose says the file is readable or writable by
// others than its owner.
func LoadToken(dir string) (token, path string, created, loose bool, err error) {
	path = filepath.Join(dir, TokenFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		var b [32]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand)
		token = hex.EncodeToString(b[:])
		_, err = f.WriteString(token + "\n")
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(path)
			return "", path, false, false, fmt.Errorf("operator: create %s: %w", path, err)
		}
		return token, path, true, false, nil
	case !errors.Is(err, fs.ErrExist):
		return "", path, false, false, fmt.Errorf("operator: create %s: %w", path, err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", path, false, false, fmt.Errorf("operator: %w", err)
	}
	token = strings.TrimSpace(string(raw))
	if len(token) < MinTokenLength {
		return "", path, false, false, fmt.Errorf("operator: %s holds no token of at least %d characters; remove it to have a new one made", path, MinTokenLength)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		loose = true
	}
	return token, path, false, loose, nil
}
