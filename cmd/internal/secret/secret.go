// Package secret keeps a node's secrets (the NATS node credentials, the
// operator token) in files of its data directory: made once, at random,
// on first start, mode 0600 in a directory of mode 0700 where it creates
// one, and read back on every later start, so that restarts and the CLI
// find the same secret.
//
// What fails: a directory that cannot be created or a file that cannot be
// written or read is an error naming the path (a half-written file is
// removed); a file that others may read is still used, and reported as
// loose so that the caller can warn. It costs a few system calls at start
// and nothing afterwards.
package secret

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

// LoadOrCreate returns the content of the secret file at path, without
// surrounding white space. The first time, it creates the file with
// format(a new random secret of 256 bits in hex) and reports created.
// loose reports a file that users other than its owner may read or write.
func LoadOrCreate(path string, format func(random string) string) (content string, created, loose bool, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		var b [32]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand)
		content = format(hex.EncodeToString(b[:]))
		_, err = f.WriteString(content + "\n")
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(path)
			return "", false, false, fmt.Errorf("create %s: %w", path, err)
		}
		return content, true, false, nil
	case !errors.Is(err, fs.ErrExist):
		return "", false, false, fmt.Errorf("create %s: %w", path, err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", false, false, err
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		loose = true
	}
	return strings.TrimSpace(string(raw)), false, loose, nil
}
