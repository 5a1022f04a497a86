package functions

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/cairn-dev/cairn/engine"
)

// HTTPTrigger declares a function's HTTP routes (Trigger.HTTP): every
// host serves them under /fn/<function>/ on its HTTP listener
// (docs/FUNCTIONS.md, HTTP triggers).
type HTTPTrigger struct {
	// Routes are tried in order; the first whose method and path match
	// takes the request.
	Routes []Route `json:"routes"`
	// MaxBodyBytes bounds a request's body (DefaultHTTPBody, at most
	// MaxHTTPBody): past it the request is refused with 413.
	MaxBodyBytes int64 `json:"maxBodyBytes,omitempty"`
	// RatePerKey bounds the requests one caller (a function key, an
	// account, or for anonymous routes the client's address) makes per
	// second on each node (DefaultHTTPRate): past it 429.
	RatePerKey int `json:"ratePerKey,omitempty"`
	// Account is the storage account whose SharedKey, SharedKeyLite or
	// account shared access signature authorises the routes whose auth
	// is "account".
	Account string `json:"account,omitempty"`
}

// Route is one HTTP route of a function.
type Route struct {
	// Method is GET, HEAD, POST, PUT, PATCH or DELETE, or "*" for any.
	Method string `json:"method"`
	// Path is matched against what follows /fn/<function>: segments
	// literal, or a parameter {name} (one segment), or, last, {*name}
	// (the rest of the path, perhaps empty).
	Path string `json:"path"`
	// Auth is who may call it: "key" (a function key, the default),
	// "account" (a request signed with the key of the trigger's Account,
	// as for the Tables API, or an account shared access signature of
	// it), or "anonymous" (anyone: say so only for a route meant to be
	// public, a webhook that checks its own signature).
	Auth string `json:"auth,omitempty"`
	// CORS lets browsers of the listed origins call the route.
	CORS *RouteCORS `json:"cors,omitempty"`
}

// RouteCORS is a route's cross-origin policy.
type RouteCORS struct {
	// Origins are the allowed origins ("https://shop.example"), or "*".
	Origins []string `json:"origins"`
	// Headers are the request headers a browser may send besides the
	// safelisted ones.
	Headers []string `json:"headers,omitempty"`
	// MaxAge is how long a browser may keep a preflight's answer (10m).
	MaxAge Duration `json:"maxAge,omitempty"`
}

// The bounds of HTTP triggers.
const (
	DefaultHTTPBody = 1 << 20
	MaxHTTPBody     = 16 << 20
	DefaultHTTPRate = 100
	MaxRoutes       = 64
)

// The route's auth modes.
const (
	AuthKey       = "key"
	AuthAccount   = "account"
	AuthAnonymous = "anonymous"
)

var (
	routeMethods = []string{"*", http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	paramRE      = regexp.MustCompile(`^\{\*?[A-Za-z_][A-Za-z0-9_]{0,63}\}$`)
	literalRE    = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)
)

// validate checks the routes and fills the defaults.
func (h *HTTPTrigger) validate() error {
	if len(h.Routes) == 0 || len(h.Routes) > MaxRoutes {
		return fmt.Errorf("trigger: http: give 1 to %d routes, not %d", MaxRoutes, len(h.Routes))
	}
	switch {
	case h.MaxBodyBytes == 0:
		h.MaxBodyBytes = DefaultHTTPBody
	case h.MaxBodyBytes < 0 || h.MaxBodyBytes > MaxHTTPBody:
		return fmt.Errorf("trigger: http: maxBodyBytes %d is not 1..%d", h.MaxBodyBytes, MaxHTTPBody)
	}
	switch {
	case h.RatePerKey == 0:
		h.RatePerKey = DefaultHTTPRate
	case h.RatePerKey < 0 || h.RatePerKey > MaxRate:
		return fmt.Errorf("trigger: http: ratePerKey %d is not 1..%d", h.RatePerKey, MaxRate)
	}
	if h.Account != "" {
		if err := engine.ValidateAccountName(h.Account); err != nil {
			return fmt.Errorf("trigger: http: account: %s", engine.AsError(err).Message)
		}
	}
	for i := range h.Routes {
		r := &h.Routes[i]
		if err := r.validate(); err != nil {
			return fmt.Errorf("trigger: http: route %d (%s %s): %w", i, r.Method, r.Path, err)
		}
		if r.Auth == AuthAccount && h.Account == "" {
			return fmt.Errorf("trigger: http: route %d (%s %s): auth account needs the trigger's account (\"account\": \"<storage account>\")", i, r.Method, r.Path)
		}
	}
	return nil
}

func (r *Route) validate() error {
	r.Method = strings.ToUpper(r.Method)
	if !slices.Contains(routeMethods, r.Method) {
		return fmt.Errorf("method %q: use one of %s", r.Method, strings.Join(routeMethods, ", "))
	}
	if r.Auth == "" {
		r.Auth = AuthKey
	}
	if r.Auth != AuthKey && r.Auth != AuthAccount && r.Auth != AuthAnonymous {
		return fmt.Errorf("auth %q: use key, account or anonymous", r.Auth)
	}
	if !strings.HasPrefix(r.Path, "/") || len(r.Path) > 1024 {
		return fmt.Errorf("path %q: it starts with / and is at most 1,024 bytes", r.Path)
	}
	seen := map[string]bool{}
	segs := strings.Split(r.Path[1:], "/")
	for i, s := range segs {
		switch {
		case strings.ContainsAny(s, "{}"):
			if !paramRE.MatchString(s) {
				return fmt.Errorf("segment %q: a parameter is a whole segment, {name} or, last, {*name}", s)
			}
			name := strings.TrimPrefix(s[1:len(s)-1], "*")
			if strings.HasPrefix(s, "{*") && i != len(segs)-1 {
				return fmt.Errorf("segment %q: {*%s} takes the rest of the path, so it comes last", s, name)
			}
			if seen[name] {
				return fmt.Errorf("parameter %q is named twice", name)
			}
			seen[name] = true
		case s == "" && i != len(segs)-1, s == ".", s == "..":
			return fmt.Errorf("segment %q: empty, . and .. segments are not routes", s)
		case !literalRE.MatchString(s) && s != "":
			return fmt.Errorf("segment %q: a literal segment holds letters, digits and - . _ ~ only", s)
		}
	}
	if r.CORS != nil {
		if len(r.CORS.Origins) == 0 {
			return fmt.Errorf("cors: name the origins (or \"*\")")
		}
		for _, o := range r.CORS.Origins {
			if o == "*" {
				continue
			}
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" {
				return fmt.Errorf("cors: origin %q: an origin is scheme://host[:port]", o)
			}
		}
		if r.CORS.MaxAge < 0 || r.CORS.MaxAge.D() > 24*time.Hour {
			return fmt.Errorf("cors: maxAge %v is not 0..24h", r.CORS.MaxAge.D())
		}
		if r.CORS.MaxAge == 0 {
			r.CORS.MaxAge = Duration(10 * time.Minute)
		}
	}
	return nil
}

// match reports whether the route takes a request of method on path
// (what follows /fn/<function>, "" read as "/"), and its parameters,
// unescaped. HEAD matches a GET route.
func (r *Route) match(method, path string) (params map[string]string, ok bool) {
	if r.Method != "*" && r.Method != method && !(method == http.MethodHead && r.Method == http.MethodGet) {
		return nil, false
	}
	return r.matchPath(path)
}

// matchPath matches the path alone (a preflight names no method of its
// own).
func (r *Route) matchPath(path string) (map[string]string, bool) {
	if path == "" {
		path = "/"
	}
	want := strings.Split(r.Path[1:], "/")
	got := strings.Split(path[1:], "/")
	var params map[string]string
	set := func(k, v string) {
		if params == nil {
			params = map[string]string{}
		}
		params[k] = v
	}
	for i, w := range want {
		if strings.HasPrefix(w, "{*") {
			rest, err := url.PathUnescape(strings.Join(got[i:], "/"))
			if err != nil {
				return nil, false
			}
			set(w[2:len(w)-1], rest)
			return params, true
		}
		if i >= len(got) {
			return nil, false
		}
		seg, err := url.PathUnescape(got[i])
		if err != nil {
			return nil, false
		}
		if strings.HasPrefix(w, "{") {
			if seg == "" {
				return nil, false
			}
			set(w[1:len(w)-1], seg)
			continue
		}
		if seg != w {
			return nil, false
		}
	}
	if len(got) != len(want) {
		return nil, false
	}
	return params, true
}

// maxResponseHeader bounds the headers a function sets on its reply.
const maxResponseHeader = 16 << 10

// hostHeader reports whether a reply header is the host's to set.
func hostHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Trailer", "Keep-Alive",
		"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Allow-Methods",
		"Access-Control-Allow-Headers", "Access-Control-Max-Age", "Access-Control-Expose-Headers":
		return true
	}
	return false
}

// validHeaderName reports whether s is an HTTP token of at most 256
// bytes.
func validHeaderName(s string) bool {
	return len(s) <= 256 && httpguts.ValidHeaderFieldName(s)
}

// validHeaderValue reports whether s holds no control character but tab.
func validHeaderValue(s string) bool { return httpguts.ValidHeaderFieldValue(s) }
