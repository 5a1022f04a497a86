package functions

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nuid"
	"golang.org/x/time/rate"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/abi"
)

// HTTPPrefix is where every host serves the functions' HTTP routes: a
// route /orders/{id} of function shop is /fn/shop/orders/42. "fn" is
// never a storage account's name (those have 3 to 24 characters), so the
// Tables API's paths and these cannot meet.
const HTTPPrefix = "/fn/"

// KeyHeader carries a function key; the query parameter "code" may
// instead (as Azure Functions take them), for a caller that can set no
// header.
const KeyHeader = "X-Functions-Key"

// The codes of the HTTP triggers' refusals, besides the engine's.
const (
	CodeFunctionNotFound = "FunctionNotFound"
	CodeRouteNotFound    = "RouteNotFound"
	CodeMethodNotAllowed = "MethodNotAllowed"
	CodeUnauthorized     = "Unauthorized"
	CodeTooManyRequests  = "TooManyRequests"
	CodeOriginNotAllowed = "OriginNotAllowed"
	CodeFunctionFailed   = "FunctionFailed"
	CodeFunctionTimedOut = "FunctionTimedOut"
)

// HTTPTriggers serves the functions' HTTP routes (HTTPPrefix). Each
// request is one invocation on this host, not retried: the caller
// decides, and an Idempotency-Key makes a retry's writes apply once.
type HTTPTriggers struct {
	rn *Runner
	// Accounts checks the requests of routes whose auth is "account"
	// (nil: such routes refuse every request).
	Accounts AccountAuth

	mu      sync.Mutex
	callers map[string]*list.Element // function and caller → its *callerRate in lru
	lru     *list.List               // the callers, used last first
}

// callerRate is one caller's request rate on one function.
type callerRate struct {
	key string // function and caller
	lim *rate.Limiter
}

// An AccountAuth checks that r is signed with the key of account
// (SharedKey or SharedKeyLite, as a Tables API request is) or carries an
// account shared access signature of it granting perm ('r' for GET and
// HEAD, 'a' POST, 'u' PUT and PATCH, 'd' DELETE), and names the caller
// ("account:<name>" or "sas:<name>"). Its error is an engine error:
// AuthorizationFailure and AuthorizationPermissionMismatch are answered
// 403, any other 401.
type AccountAuth func(r *http.Request, account string, perm byte) (caller string, err error)

// maxCallers bounds the callers whose rates a host remembers; past it the
// one idle longest is forgotten.
const maxCallers = 65536

// NewHTTPTriggers returns the handler of rn's functions' routes (served
// once rn is Ready).
func NewHTTPTriggers(rn *Runner) *HTTPTriggers {
	return &HTTPTriggers{rn: rn, callers: map[string]*list.Element{}, lru: list.New()}
}

// httpError is a refusal: a status and a coded error, answered as
// {"error": {"code", "message"}}.
type httpError struct {
	status int
	code   string
	msg    string
}

func (e *httpError) Error() string { return e.code + ": " + e.msg }

func refuse(status int, code, format string, args ...any) *httpError {
	return &httpError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func writeError(w http.ResponseWriter, e *httpError) {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": e.code, "message": e.msg}})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.status)
	_, _ = w.Write(b)
}

func (t *HTTPTriggers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if e := t.serve(w, r); e != nil {
		writeError(w, e)
	}
}

// serve answers one request, or returns its refusal (nothing written).
func (t *HTTPTriggers) serve(w http.ResponseWriter, r *http.Request) *httpError {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), HTTPPrefix)
	name, path, _ := strings.Cut(rest, "/")
	path = "/" + path
	t.rn.mu.Lock()
	f := t.rn.fns[name]
	t.rn.mu.Unlock()
	if f == nil {
		return refuse(http.StatusNotFound, CodeFunctionNotFound, "no function %.64q with HTTP routes is deployed", name)
	}
	v, ok := f.take()
	if !ok {
		return refuse(http.StatusServiceUnavailable, string(engine.CodeServerBusy), "function %q has stopped on this host: try again", name)
	}
	defer v.release()
	h := v.m.Trigger.HTTP
	if h == nil {
		return refuse(http.StatusNotFound, CodeFunctionNotFound, "no function %.64q with HTTP routes is deployed", name)
	}
	origin := r.Header.Get("Origin")
	if r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != "" {
		return t.preflight(w, r, h, path, origin)
	}
	route, params, e := h.route(r.Method, path)
	if e != nil {
		return e
	}
	if origin != "" {
		if !route.allows(origin) {
			return refuse(http.StatusForbidden, CodeOriginNotAllowed, "the route %s %s of function %q takes no requests from the web origin %s (its cors)", route.Method, route.Path, name, origin)
		}
		w.Header().Set("Access-Control-Allow-Origin", origin)
		w.Header().Add("Vary", "Origin")
	}
	caller, callerID, e := t.authorize(r, name, h, route)
	if e != nil {
		return e
	}
	if !t.allow(name+"\x00"+callerID, h.RatePerKey) {
		w.Header().Set("Retry-After", "1")
		return refuse(http.StatusTooManyRequests, CodeTooManyRequests, "more than %d requests a second from %s to function %q on this host", h.RatePerKey, caller, name)
	}
	if r.ContentLength > h.MaxBodyBytes {
		return refuse(http.StatusRequestEntityTooLarge, string(engine.CodeRequestBodyTooLarge), "the body is %d bytes; function %q takes at most %d", r.ContentLength, name, h.MaxBodyBytes)
	}
	id, e := triggerID(r.Header.Get("Idempotency-Key"), callerID)
	if e != nil {
		return e
	}
	// The body is read once an invocation is free: the requests waiting
	// for one hold no body in memory.
	release, e := t.slot(r.Context(), v)
	if e != nil {
		return e
	}
	defer release()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return refuse(http.StatusRequestEntityTooLarge, string(engine.CodeRequestBodyTooLarge), "the body passed %d bytes, the most function %q takes", h.MaxBodyBytes, name)
		}
		return refuse(http.StatusBadRequest, string(engine.CodeInvalidInput), "reading the body: %v", err)
	}
	trig := abi.Trigger{
		ID:           id,
		Kind:         abi.KindHTTP,
		Function:     name,
		Version:      v.m.Version,
		Body:         body,
		DequeueCount: 1,
		Time:         engine.TimeToTicks(t.rn.now()),
		HTTP: &abi.HTTPRequest{Method: r.Method, Path: path, Route: route.Path, Params: params,
			Query: guestQuery(r.URL.RawQuery, route.Auth), Header: guestHeader(r.Header), Caller: caller},
	}
	inv, err := t.rn.run(t.rn.ctx, v, trig, nil)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return refuse(http.StatusGatewayTimeout, CodeFunctionTimedOut, "function %q did not finish within its timeout (%v)", name, v.m.Timeout.D())
		}
		if route.Auth == AuthAnonymous {
			// Anyone may call it: the reason, which may name tables and
			// values, goes to the function's log only.
			if inv != nil {
				inv.Log("the HTTP call failed: " + err.Error())
			}
			return refuse(http.StatusInternalServerError, CodeFunctionFailed, "function %q failed; its log on the host says why (GET /$cairn/functions/%s/logs)", name, name)
		}
		return refuse(http.StatusInternalServerError, CodeFunctionFailed, "function %q failed: %v", name, err)
	}
	status, header := inv.Response()
	out := inv.Output()
	// Added to what the host set: the function may not set the CORS
	// headers, and its Vary keeps the host's Origin (a shared cache would
	// otherwise serve one origin's answer to another).
	for k, vs := range header {
		k = http.CanonicalHeaderKey(k)
		w.Header()[k] = append(w.Header()[k], vs...)
	}
	if status == 0 {
		status = http.StatusOK
		if len(out) == 0 {
			status = http.StatusNoContent
		}
	}
	if w.Header().Get("Content-Type") == "" && len(out) > 0 {
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	if status != http.StatusNoContent && status != http.StatusNotModified && status >= 200 {
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	}
	w.WriteHeader(status)
	if r.Method != http.MethodHead && status != http.StatusNoContent && status != http.StatusNotModified {
		_, _ = w.Write(out)
	}
	return nil
}

// route returns the first route taking method on path, with its
// parameters: 404 when no route has the path, 405 (naming the methods
// that have) when only the method differs.
func (h *HTTPTrigger) route(method, path string) (*Route, map[string]string, *httpError) {
	var allowed []string
	for i := range h.Routes {
		r := &h.Routes[i]
		if params, ok := r.match(method, path); ok {
			return r, params, nil
		}
		if _, ok := r.matchPath(path); ok {
			allowed = append(allowed, r.Method)
		}
	}
	if len(allowed) > 0 {
		return nil, nil, refuse(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s is not a method of %s: %s are", method, path, strings.Join(allowed, ", "))
	}
	return nil, nil, refuse(http.StatusNotFound, CodeRouteNotFound, "no route of the function matches %.256q", path)
}

// allows reports whether the route takes requests from a web origin.
func (r *Route) allows(origin string) bool {
	return r.CORS != nil && (slices.Contains(r.CORS.Origins, "*") || slices.Contains(r.CORS.Origins, origin))
}

// preflight answers a browser's CORS preflight for path from the route
// that would take the asked method.
func (t *HTTPTriggers) preflight(w http.ResponseWriter, r *http.Request, h *HTTPTrigger, path, origin string) *httpError {
	method := r.Header.Get("Access-Control-Request-Method")
	route, _, e := h.route(method, path)
	if e != nil {
		return e
	}
	if !route.allows(origin) {
		return refuse(http.StatusForbidden, CodeOriginNotAllowed, "the route %s %s takes no requests from the web origin %s (its cors)", route.Method, route.Path, origin)
	}
	hdr := w.Header()
	hdr.Set("Access-Control-Allow-Origin", origin)
	hdr.Add("Vary", "Origin")
	hdr.Set("Access-Control-Allow-Methods", method)
	allowed := append([]string{"Content-Type", KeyHeader, "Idempotency-Key"}, route.CORS.Headers...)
	hdr.Set("Access-Control-Allow-Headers", strings.Join(allowed, ", "))
	hdr.Set("Access-Control-Max-Age", strconv.Itoa(int(route.CORS.MaxAge.D()/time.Second)))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// authorize checks the request against the route's auth and names its
// caller (for the trigger) and its id (for the rate and the trigger's
// id).
func (t *HTTPTriggers) authorize(r *http.Request, name string, h *HTTPTrigger, route *Route) (caller, id string, e *httpError) {
	switch route.Auth {
	case AuthAnonymous:
		return "anonymous", "ip:" + clientPrefix(r.RemoteAddr), nil
	case AuthAccount:
		return t.authorizeAccount(r, name, h.Account, route)
	}
	presented := r.Header.Get(KeyHeader)
	if presented == "" {
		presented = r.URL.Query().Get("code")
	}
	if presented == "" {
		return "", "", refuse(http.StatusUnauthorized, CodeUnauthorized, "the route %s %s of function %q needs a function key: send it in %s", route.Method, route.Path, name, KeyHeader)
	}
	k, ok := t.rn.Keys().Verify(name, presented)
	if !ok {
		return "", "", refuse(http.StatusUnauthorized, CodeUnauthorized, "the key is not one of function %q's (revoked, or another function's)", name)
	}
	return "key:" + k.Name, "key:" + k.ID, nil
}

// clientPrefix names an anonymous caller by its address: an IPv4
// address, or an IPv6 address's /64 (one client is commonly given a
// whole /64, and would otherwise be as many callers as it likes).
func clientPrefix(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() != nil {
		return host
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// methodPerm is the permission of an account SAS a method needs: the
// route acts on the account's data as an entity operation would.
func methodPerm(method string) byte {
	switch method {
	case http.MethodGet, http.MethodHead:
		return 'r'
	case http.MethodPost:
		return 'a'
	case http.MethodDelete:
		return 'd'
	}
	return 'u'
}

// authorizeAccount checks a request of a route whose auth is "account".
// A request signed with the account's key is the account's, whatever
// signature it sent (a holder of the key may sign as many as it likes):
// one rate and one Idempotency-Key scope. A shared access signature is
// its own caller, by its signature.
func (t *HTTPTriggers) authorizeAccount(r *http.Request, name, account string, route *Route) (caller, id string, e *httpError) {
	if t.Accounts == nil {
		return "", "", refuse(http.StatusUnauthorized, CodeUnauthorized, "this host checks no account signatures, so the route %s %s of function %q takes no request", route.Method, route.Path, name)
	}
	caller, err := t.Accounts(r, account, methodPerm(r.Method))
	if err != nil {
		ee := engine.AsError(err)
		status := http.StatusUnauthorized
		if ee.Code == engine.CodeAuthorizationFailure || ee.Code == engine.CodePermissionMismatch {
			status = http.StatusForbidden
		}
		return "", "", refuse(status, string(ee.Code), "the route %s %s of function %q needs a request signed by account %s: %s", route.Method, route.Path, name, account, ee.Message)
	}
	if strings.HasPrefix(caller, "sas:") {
		// A token handed to someone else is a caller of its own: its
		// rate and its Idempotency-Keys are not the key holder's.
		sum := sha256.Sum256([]byte(r.URL.Query().Get("sig")))
		return caller, "sas:" + account + ":" + hex.EncodeToString(sum[:12]), nil
	}
	return caller, "account:" + account, nil
}

// allow takes one request from key's budget of perSecond (a burst of as
// many). Past maxCallers the caller used longest ago is forgotten, in
// constant time.
func (t *HTTPTriggers) allow(key string, perSecond int) bool {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var c *callerRate
	if el := t.callers[key]; el != nil {
		t.lru.MoveToFront(el)
		c = el.Value.(*callerRate)
	}
	if c == nil || c.lim.Limit() != rate.Limit(perSecond) {
		if c == nil && len(t.callers) >= maxCallers {
			oldest := t.lru.Back()
			t.lru.Remove(oldest)
			delete(t.callers, oldest.Value.(*callerRate).key)
		}
		lim := rate.NewLimiter(rate.Limit(perSecond), perSecond)
		if c != nil {
			c.lim = lim
		} else {
			c = &callerRate{key: key, lim: lim}
			t.callers[key] = t.lru.PushFront(c)
		}
	}
	return c.lim.AllowN(now, 1)
}

// slot waits for one of the version's Concurrency HTTP invocations on
// this host, as long as the request lasts and no longer than the
// function's timeout.
func (t *HTTPTriggers) slot(ctx context.Context, v *version) (func(), *httpError) {
	s := v.slots
	timer := time.NewTimer(v.m.Timeout.D())
	defer timer.Stop()
	select {
	case s <- struct{}{}:
		return func() { <-s }, nil
	case <-ctx.Done():
		return nil, refuse(http.StatusServiceUnavailable, string(engine.CodeServerBusy), "the request ended while it waited for one of function %q's %d invocations", v.m.Name, v.m.Concurrency)
	case <-timer.C:
		return nil, refuse(http.StatusServiceUnavailable, string(engine.CodeServerBusy), "function %q's %d invocations on this host stayed busy for its timeout (%v): try again", v.m.Name, v.m.Concurrency, v.m.Timeout.D())
	}
}

// triggerID is the invocation's trigger id: from an Idempotency-Key, the
// same for a retry of the request by the same caller (its writes then
// apply once), else a new one.
func triggerID(key, callerID string) (string, *httpError) {
	if key == "" {
		return "h:" + callerID + ":" + nuid.Next(), nil
	}
	if len(key) > 255 || !validHeaderValue(key) || strings.ContainsAny(key, " \t") {
		return "", refuse(http.StatusBadRequest, string(engine.CodeInvalidInput), "Idempotency-Key: 1 to 255 visible characters, no spaces")
	}
	return "h:" + callerID + ":k:" + key, nil
}

// The query parameters that may carry a route's authorisation: a
// function key, or an account shared access signature.
var (
	keyParams = []string{"code"}
	sasParams = []string{"sig", "sv", "ss", "srt", "sp", "se", "st", "spr", "sip", "si", "tn", "spk", "srk", "epk", "erk"}
)

// guestQuery is what the function sees of the request's raw query: all
// but the parameters that may carry the route's authorisation (a
// function never sees a key or a signature it could replay). The rest
// is kept as sent.
func guestQuery(raw, auth string) string {
	var cut []string
	switch auth {
	case AuthKey:
		cut = keyParams
	case AuthAccount:
		cut = sasParams
	}
	if raw == "" || cut == nil {
		return raw
	}
	parts := strings.Split(raw, "&")
	kept := parts[:0]
	for _, p := range parts {
		k, _, _ := strings.Cut(p, "=")
		if u, err := url.QueryUnescape(k); err == nil {
			k = u
		}
		if !slices.Contains(cut, k) {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "&")
}

// guestHeader is what the function sees of the request's headers: all
// but those that carried its authorisation, and cookies.
func guestHeader(h http.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		switch k {
		case "Authorization", KeyHeader, "Cookie", "Proxy-Authorization":
			continue
		}
		out[k] = vs
	}
	return out
}
