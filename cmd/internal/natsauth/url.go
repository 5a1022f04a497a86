package natsauth

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// URLFile is the name, in Dir, of the file where a node records the
// client URL of its NATS server, for the operators' CLI (host deploy,
// functions, poison…) to find it from the data directory.
const URLFile = "url"

// URLPath returns the client URL file of a data directory.
func URLPath(dataDir string) string { return filepath.Join(dataDir, Dir, URLFile) }

// WriteURL records the client URL(s) of the node's NATS server (a
// comma-separated list, as -nats-url takes) in the data directory, mode
// 0600, without the user and password any of them carries, and with an
// unspecified host (0.0.0.0, [::]) made loopback: the address this
// machine's CLI can dial. It costs one small file write and rename.
func WriteURL(dataDir, urls string) error {
	var clean []string
	for _, s := range strings.Split(urls, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return fmt.Errorf("natsauth: client URL %q: not a URL", s)
		}
		u.User = nil
		if h, p, err := net.SplitHostPort(u.Host); err == nil {
			if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
				u.Host = net.JoinHostPort("127.0.0.1", p)
			}
		}
		clean = append(clean, u.String())
	}
	path := URLPath(dataDir)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("natsauth: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(clean, ",")+"\n"), 0o600); err != nil {
		return fmt.Errorf("natsauth: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("natsauth: %w", err)
	}
	return nil
}

// ReadURL returns the client URL a node recorded in its data directory
// (WriteURL); the error wraps os.ErrNotExist when there is none.
func ReadURL(dataDir string) (string, error) {
	b, err := os.ReadFile(URLPath(dataDir))
	if err != nil {
		return "", fmt.Errorf("natsauth: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("natsauth: %s is empty", URLPath(dataDir))
	}
	return s, nil
}
