package operator

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/cairn-dev/cairn/cmd/internal/cors"
)

// Codes of the errors the guard answers with.
const (
	CodeAuthenticationFailed = "OperatorAuthenticationFailed"
	CodeOriginNotAllowed     = "OriginNotAllowed"
	CodePreflightFailure     = "CorsPreflightFailure"
)

// Guard admits requests that carry the operator token.
type Guard struct {
	sum     [32]byte // SHA-256 of the token: compared in constant time and length
	origins cors.Origins
}

// NewGuard returns a guard for token; origins configured by name may call
// through it from a browser.
func NewGuard(token string, origins cors.Origins) *Guard {
	return &Guard{sum: sha256.Sum256([]byte(token)), origins: origins}
}

// Wrap returns h behind the guard: it runs only for a request with the
// token, from no browser origin or a configured one.
func (g *Guard) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" && !g.origins.Named(origin) && !SameOrigin(r, origin) {
			fail(w, http.StatusForbidden, CodeOriginNotAllowed, "requests from the web origin "+origin+" are refused: configure it with -cors-origins to allow it")
			return
		}
		if origin != "" && g.origins.Named(origin) { // the node's own pages need no CORS header
			wh := w.Header()
			wh.Set("Access-Control-Allow-Origin", origin)
			wh.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			if origin == "" || r.Header.Get("Access-Control-Request-Method") == "" {
				fail(w, http.StatusForbidden, CodePreflightFailure, "OPTIONS answers only a CORS preflight from a configured origin")
				return
			}
			wh := w.Header()
			wh.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
			wh.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
			wh.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if !g.Admits(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="cairn operator"`)
			fail(w, http.StatusUnauthorized, CodeAuthenticationFailed, "the operators' API needs the header Authorization: Bearer <operator token> (the token is in <data>/"+TokenFile+")")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// SameOrigin reports whether origin is the origin the request was sent
// to (scheme://Host, the scheme https when the connection is TLS): the
// node's own pages, such as the console, whose POST and DELETE requests
// browsers send with an Origin header even though they are not
// cross-origin.
//
// Admitting it is safe: another site's page cannot send this Origin (the
// browser sets it, and a page can neither forge nor remove it), the
// request must still carry the token, and a page served by the node holds
// no token of its own (the console asks the operator for it). A forged
// Host (DNS rebinding) can only make a page of the attacker's own origin
// look same-origin, and that page has no token to send either; the node
// refuses such a Host before the guard anyway (httpapi.Server.HostGuard).
func SameOrigin(r *http.Request, origin string) bool {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return r.Host != "" && strings.EqualFold(origin, scheme+r.Host)
}

// Admits reports whether r carries the operator token.
func (g *Guard) Admits(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(sum[:], g.sum[:]) == 1
}

// fail answers with the operators' API's JSON error: {"code", "error"}.
func fail(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "error": msg})
}
