// Package hostcheck decides which Host headers a node's HTTP API answers,
// against DNS rebinding: a web page of attacker.example, whose name the
// attacker then points at 127.0.0.1 (or at any address of the user's
// network), makes the user's browser send requests to the node that the
// browser takes for requests to the page's own origin. They carry no
// Origin header (cmd/internal/cors cannot see them), but they carry the
// attacker's name in Host.
//
// A Host is allowed when it is an IP literal (a rebinding needs a DNS
// name: a page whose origin is an IP address reaches only that address),
// a loopback name (localhost and *.localhost, which browsers resolve
// themselves, never through DNS), empty (HTTP/1.0, which no browser
// sends), or a name the operator lists (-http-hosts). Any port is
// allowed: the name, not the port, is what the attacker controls.
// Checking a Host costs a parse of it and a map lookup.
package hostcheck

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// The longest DNS name (without its final dot) and label (RFC 1035).
const (
	maxName  = 253
	maxLabel = 63
)

// Names is the parsed list of the names the operator lists. The zero
// value lists none.
type Names struct {
	listed map[string]bool // lower case, without a final dot
}

// Parse parses names such as "tables.example.com". Each must be a DNS
// name (letters, digits, '-' and '_', in labels separated by dots),
// without a scheme, a port or a wildcard; case and a final dot do not
// matter. Blank entries are skipped.
func Parse(list []string) (Names, error) {
	var n Names
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		name, err := parseName(s)
		if err != nil {
			return Names{}, err
		}
		if n.listed == nil {
			n.listed = map[string]bool{}
		}
		n.listed[name] = true
	}
	return n, nil
}

// parseName checks one listed name and returns it as Allows compares it.
func parseName(s string) (string, error) {
	if _, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return canonical(strings.Trim(s, "[]")), nil // allowed anyway; harmless to list
	}
	bad := func(why string) error {
		return fmt.Errorf("hostcheck: %q is not a host name (%s): list names such as tables.example.com, without a scheme or a port", s, why)
	}
	name := canonical(s)
	switch {
	case strings.Contains(s, "://"):
		return "", bad("it has a scheme")
	case strings.Contains(s, ":"):
		return "", bad("it has a port; every port is allowed")
	case strings.Contains(s, "*"):
		return "", bad("wildcards are not supported; list each name")
	case name == "" || len(name) > maxName:
		return "", bad("empty or longer than 253 characters")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > maxLabel {
			return "", bad("an empty label, or one longer than 63 characters")
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return "", bad(fmt.Sprintf("the character %q", r))
			}
		}
	}
	return name, nil
}

// canonical lower-cases a name and drops its final dot.
func canonical(name string) string {
	return strings.TrimSuffix(strings.ToLower(name), ".")
}

// Listed reports whether the operator listed any name.
func (n Names) Listed() bool { return len(n.listed) > 0 }

// Allows reports whether a request's Host (http.Request.Host: a name or
// an IP literal, with or without a port) is one the node answers.
func (n Names) Allows(host string) bool {
	name := hostname(host)
	if name == "" {
		return true
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	name = canonical(name)
	return name == "localhost" || strings.HasSuffix(name, ".localhost") || n.listed[name]
}

// hostname is host without its port and an IPv6 literal's brackets.
func hostname(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// String lists the names, for the flag's usage.
func (n Names) String() string {
	names := make([]string, 0, len(n.listed))
	for name := range n.listed {
		names = append(names, name)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}
