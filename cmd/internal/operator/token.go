package operator

import (
	"fmt"
	"path/filepath"

	"github.com/cairn-dev/cairn/cmd/internal/secret"
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
	token, created, loose, err = secret.LoadOrCreate(path, func(random string) string { return random })
	if err != nil {
		return "", path, false, false, fmt.Errorf("operator: %w", err)
	}
	if len(token) < MinTokenLength {
		return "", path, false, false, fmt.Errorf("operator: %s holds no token of at least %d characters; remove it to have a new one made", path, MinTokenLength)
	}
	return token, path, created, loose, nil
}
