package httpapi

import (
	"net/http"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// hostLogEvery is the least time between two log lines about refused
// Hosts: a page rebinding its name at the node cannot flood the log.
// /metrics counts every refusal (cairn_http_errors_total, HostNotAllowed).
const hostLogEvery = 10 * time.Second

// maxShownHost caps how much of a refused Host a reply or a log line
// repeats: the longest DNS name with a port.
const maxShownHost = 260

// HostGuard returns h behind the check of each request's Host against DNS
// rebinding (cmd/internal/hostcheck): a request whose Host is not an IP
// literal, a loopback name or a name of Config.Hosts is answered 403
// HostNotAllowed before h runs, having done nothing. The node puts
// everything it serves behind it but its health probes.
//
// Which requests are checked (hostChecked): every one once the operator
// lists names (Config.Hosts), since the node then knows its names;
// otherwise every one but those naming an account other than the
// development one. Those are signed with a secret key, which a web page
// cannot sign with (only with a leaked key or SAS, and listing names
// closes that too); and checking them would refuse every client reaching
// a node by a DNS name until the operator lists it. The development
// account's key is public, and the operators' API, /metrics and the
// console are the node's most powerful doors: those are checked always.
// The cost per request is hostcheck's: a parse and a lookup.
func (s *Server) HostGuard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Hosts.Allows(r.Host) || !s.hostChecked(r) {
			h.ServeHTTP(w, r)
			return
		}
		s.refuseHost(w, r)
	})
}

// hostChecked reports whether r's Host must be one the node answers.
func (s *Server) hostChecked(r *http.Request) bool {
	if s.cfg.Hosts.Listed() {
		return true
	}
	account, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	_, known := s.accounts[account]
	return !known || account == DevAccountName
}

// refuseHost answers 403 HostNotAllowed, and counts and logs (at most
// every hostLogEvery) the refusal.
func (s *Server) refuseHost(w http.ResponseWriter, r *http.Request) {
	c := s.newCall(w, r)
	defer s.metrics.request("", "")
	host := r.Host
	if len(host) > maxShownHost {
		host = host[:maxShownHost] + "…"
	}
	n := s.hostRefused.Add(1)
	s.hostLog.Do(func() {
		s.log.Warn("http request refused: its Host is not a name this node answers (a web page rebinding its DNS name?); list the node's names with -http-hosts",
			"host", host, "remote", r.RemoteAddr, "method", r.Method, "refused", n)
	})
	c.fail(errHostNotAllowed(host))
}

func errHostNotAllowed(host string) error {
	return engine.Errorf(codeHostNotAllowed, "the Host %q is not a name this node answers: use its IP address or localhost, or list the name with -http-hosts (DNS rebinding protection)", host)
}
