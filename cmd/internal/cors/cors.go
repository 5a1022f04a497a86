// Package cors decides which web origins may call a node's HTTP API from a
// browser. It is off by default: a node answers no preflight, sends no
// Access-Control-* header, and refuses any request that carries an Origin
// header (a browser's cross-origin request) with an origin not configured.
// The Azure SDKs outside a browser (Go, Node.js, .NET, Python) send no
// Origin and are not affected.
//
// Origins are configured exactly ("https://app.example.com",
// "http://localhost:5173"); "*" lets any origin call the Tables API (whose
// requests are still signed) but never the operators' API, which admits
// only origins listed by name. Checking an origin is a map lookup.
package cors

import (
	"fmt"
	"net/url"
	"strings"
)

// Origins is a parsed list of allowed origins. The zero value allows none.
type Origins struct {
	any   bool            // "*" was configured
	named map[string]bool // origins configured by name
}

// Parse parses origins such as "https://app.example.com" or "*". Each must
// be exactly an origin as a browser sends it: a scheme (http or https), a
// host and an optional port, without path, query, user or trailing slash.
func Parse(list []string) (Origins, error) {
	var o Origins
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if s == "*" {
			o.any = true
			continue
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" ||
			s != u.Scheme+"://"+u.Host {
			return Origins{}, fmt.Errorf("cors: %q is not an origin: want scheme://host[:port], as in https://app.example.com", s)
		}
		if o.named == nil {
			o.named = map[string]bool{}
		}
		o.named[s] = true
	}
	return o, nil
}

// Enabled reports whether any origin is allowed.
func (o Origins) Enabled() bool { return o.any || len(o.named) > 0 }

// Allows reports whether origin may call the Tables API: it is configured
// by name, or "*" is.
func (o Origins) Allows(origin string) bool { return o.any || o.named[origin] }

// Named reports whether origin is configured by name (what the operators'
// API requires: "*" does not open it).
func (o Origins) Named(origin string) bool { return o.named[origin] }

// AllowOrigin is the Access-Control-Allow-Origin value for an allowed
// origin: the origin itself when it is configured by name, "*" when only
// the wildcard admits it (so an arbitrary origin is never echoed).
func (o Origins) AllowOrigin(origin string) string {
	if o.named[origin] {
		return origin
	}
	return "*"
}
