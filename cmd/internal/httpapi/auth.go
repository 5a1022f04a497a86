package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/engine"
)

// maxClockSkew is how far a signed request's date may be from the server's
// clock, as in Azure: it bounds how long a captured request can be replayed.
const maxClockSkew = 15 * time.Minute

// sign returns the HMAC-SHA256 of stringToSign with a's key. The HMACs
// keyed with an account's key are pooled: keying one costs two SHA-256
// blocks and its allocations, on every request otherwise.
func (s *Server) sign(a Account, stringToSign string) []byte {
	p, ok := s.signers.Load(a.Name)
	if !ok {
		key := a.Key
		p, _ = s.signers.LoadOrStore(a.Name, &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }})
	}
	pool := p.(*sync.Pool)
	m := pool.Get().(hash.Hash)
	m.Reset()
	m.Write([]byte(stringToSign))
	sum := m.Sum(nil)
	pool.Put(m)
	return sum
}

// authenticate verifies the request's SharedKey or SharedKeyLite signature
// or its shared access signature. Every request must carry one.
func (c *call) authenticate(resource string) error {
	a, ok := c.s.accounts[c.account]
	if !ok {
		return engine.Errorf(codeAuthenticationFailed, "no account named %q on this host (the development account is %s)", c.account, DevAccountName)
	}
	auth := c.r.Header.Get("Authorization")
	if auth == "" {
		if c.params().Get("sig") != "" {
			return c.authenticateSAS(a, resource)
		}
		return engine.Errorf(codeAuthenticationFailed, "the request is not signed: send an Authorization header (SharedKey or SharedKeyLite) or a shared access signature")
	}
	scheme, cred, _ := strings.Cut(auth, " ")
	name, sig, ok := strings.Cut(strings.TrimSpace(cred), ":")
	if !ok || (scheme != "SharedKey" && scheme != "SharedKeyLite") {
		return engine.Errorf(codeAuthenticationMalformed, "the Authorization header must be \"SharedKey account:signature\" or \"SharedKeyLite account:signature\"")
	}
	if name != c.account {
		return engine.Errorf(codeAuthenticationFailed, "the request is signed for account %q but addressed to %q", name, c.account)
	}
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return engine.Errorf(codeAuthenticationMalformed, "the signature is not base64")
	}
	date := c.r.Header.Get("x-ms-date")
	if date == "" {
		date = c.r.Header.Get("Date")
	}
	if date == "" {
		return engine.Errorf(codeAuthenticationFailed, "a signed request needs an x-ms-date (or Date) header")
	}
	when, err := http.ParseTime(date)
	if err != nil {
		return engine.Errorf(codeAuthenticationFailed, "the request date %q is not an HTTP date", date)
	}
	if d := time.Since(when); d > maxClockSkew || d < -maxClockSkew {
		return engine.Errorf(codeAuthenticationFailed, "the request date %s is more than %v away from the server's clock", date, maxClockSkew)
	}
	// The resource is signed as the client encoded it; a client that
	// signed the decoded path is accepted too.
	for _, res := range c.canonicalResources() {
		var sts string
		if scheme == "SharedKeyLite" {
			sts = date + "\n" + res
		} else {
			sts = c.r.Method + "\n" + c.r.Header.Get("Content-MD5") + "\n" + c.r.Header.Get("Content-Type") + "\n" + date + "\n" + res
		}
		if hmac.Equal(c.s.sign(a, sts), got) {
			return nil
		}
	}
	return engine.Errorf(codeAuthenticationFailed, "the %s signature does not match: check the account key", scheme)
}

// canonicalResources returns "/account/path[?comp=…]" for the path as sent
// and, if it differs, as decoded.
func (c *call) canonicalResources() []string {
	raw, _, _ := strings.Cut(c.r.RequestURI, "?")
	// A request line in absolute form (a proxy's) names the scheme and
	// host too; the origin form, what clients send, is the path itself.
	if !strings.HasPrefix(raw, "/") {
		if u, err := url.Parse(raw); err == nil && u.IsAbs() {
			raw = u.EscapedPath()
		}
	}
	comp := ""
	if v := c.params().Get("comp"); v != "" {
		comp = "?comp=" + v
	}
	out := []string{"/" + c.account + raw + comp}
	if dec := c.r.URL.Path; dec != raw {
		out = append(out, "/"+c.account+dec+comp)
	}
	return out
}

// sas is a verified shared access signature: what it grants.
type sas struct {
	table      string // service SAS: the one table (lower case); "" for an account SAS
	perms      string
	account    bool   // an account SAS (may manage tables)
	srt        string // an account SAS's resource types: c tables, o entities
	spk, srk   string // the first key granted (service SAS)
	epk, erk   string // the last key granted
	rangeBound bool
}

// authenticateSAS verifies a service SAS (tn=…) or an account SAS (ss=…).
func (c *call) authenticateSAS(a Account, resource string) error {
	q := c.params()
	sig, err := base64.StdEncoding.DecodeString(q.Get("sig"))
	if err != nil {
		return engine.Errorf(codeAuthenticationMalformed, "the shared access signature (sig) is not base64")
	}
	var sts string
	grant := &sas{perms: q.Get("sp")}
	if q.Get("ss") != "" {
		grant.account, grant.srt = true, q.Get("srt")
		sts = strings.Join([]string{a.Name, q.Get("sp"), q.Get("ss"), q.Get("srt"), q.Get("st"), q.Get("se"),
			q.Get("sip"), q.Get("spr"), q.Get("sv"), ""}, "\n")
		if !strings.Contains(q.Get("ss"), "t") {
			return engine.Errorf(codeAuthorizationFailure, "the account SAS does not grant the table service (ss=%s)", q.Get("ss"))
		}
	} else {
		grant.table = strings.ToLower(q.Get("tn"))
		if grant.table == "" {
			return engine.Errorf(codeAuthenticationMalformed, "a shared access signature needs tn (a table) or ss (an account SAS)")
		}
		grant.spk, grant.srk, grant.epk, grant.erk = q.Get("spk"), q.Get("srk"), q.Get("epk"), q.Get("erk")
		grant.rangeBound = grant.spk != "" || grant.epk != ""
		sts = strings.Join([]string{q.Get("sp"), q.Get("st"), q.Get("se"), "/table/" + a.Name + "/" + grant.table,
			q.Get("si"), q.Get("sip"), q.Get("spr"), q.Get("sv"), grant.spk, grant.srk, grant.epk, grant.erk}, "\n")
	}
	if !hmac.Equal(c.s.sign(a, sts), sig) {
		return engine.Errorf(codeAuthenticationFailed, "the shared access signature does not match: check the account key and the signed fields")
	}
	if si := q.Get("si"); si != "" {
		// A token tied to a stored access policy is revoked by changing
		// or removing the policy, which this host cannot do: it keeps
		// none, so such a token would be valid until its own expiry.
		return engine.Errorf(codeAuthenticationFailed, "the shared access signature names a stored access policy (si=%.64q), and this host keeps none", si)
	}
	now := time.Now()
	if st := q.Get("st"); st != "" {
		t, err := time.Parse(time.RFC3339, st)
		if err != nil {
			return engine.Errorf(codeAuthenticationMalformed, "st %q is not an ISO 8601 time", st)
		}
		if now.Add(maxClockSkew).Before(t) {
			return engine.Errorf(codeAuthenticationFailed, "the shared access signature is not valid before %s", st)
		}
	}
	se := q.Get("se")
	t, err := time.Parse(time.RFC3339, se)
	if err != nil {
		return engine.Errorf(codeAuthenticationMalformed, "se %q must be the signature's expiry, an ISO 8601 time", se)
	}
	if now.After(t) {
		return engine.Errorf(codeAuthenticationFailed, "the shared access signature expired at %s", se)
	}
	if spr := q.Get("spr"); spr == "https" && c.r.TLS == nil {
		return engine.Errorf(codeAuthorizationFailure, "the shared access signature allows only https (spr=https) and this request came over http")
	}
	if sip := q.Get("sip"); sip != "" && !ipAllowed(sip, c.r.RemoteAddr) {
		return engine.Errorf(codeAuthorizationFailure, "the shared access signature does not allow the address %s", c.r.RemoteAddr)
	}
	c.sas = grant
	return nil
}

// ipAllowed checks remote against "ip" or "ip-ip".
func ipAllowed(sip, remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	lo, hi, ok := strings.Cut(sip, "-")
	if !ok {
		hi = lo
	}
	l, h := net.ParseIP(lo), net.ParseIP(hi)
	if ip == nil || l == nil || h == nil {
		return false
	}
	ip16, l16, h16 := ip.To16(), l.To16(), h.To16()
	return string(ip16) >= string(l16) && string(ip16) <= string(h16)
}

// allow checks that the request's SAS (if any) grants perm ('r' query,
// 'a' add, 'u' update, 'd' delete) on table. Signed-key requests may do
// anything.
func (c *call) allow(table string, perm byte) error {
	g := c.sas
	if g == nil {
		return nil
	}
	if !g.account && g.table != strings.ToLower(table) {
		return engine.Errorf(codeAuthorizationFailure, "the shared access signature is for table %s, not %s", g.table, table)
	}
	if g.account && !strings.Contains(g.srt, "o") {
		return engine.Errorf(codeAuthorizationFailure, "the account SAS does not grant entities (srt needs o)")
	}
	granted := strings.ContainsRune(g.perms, rune(perm)) ||
		g.account && (perm == 'a' || perm == 'u') && strings.Contains(g.perms, "w")
	if !granted {
		return engine.Errorf(codePermissionMismatch, "the shared access signature does not grant %s (sp=%s)", permName(perm), g.perms)
	}
	return nil
}

// allowTables checks that the request may manage tables: only an account
// SAS with the container resource type can.
func (c *call) allowTables(perm byte) error {
	g := c.sas
	if g == nil {
		return nil
	}
	if !g.account {
		return engine.Errorf(codeAuthorizationFailure, "a table's shared access signature cannot list, create or delete tables")
	}
	if !strings.Contains(g.srt, "c") {
		return engine.Errorf(codeAuthorizationFailure, "the account SAS does not grant tables (srt needs c)")
	}
	if !strings.ContainsRune(g.perms, rune(perm)) {
		return engine.Errorf(codePermissionMismatch, "the account SAS does not grant %s (sp=%s)", permName(perm), g.perms)
	}
	return nil
}

func permName(p byte) string {
	switch p {
	case 'r':
		return "reads"
	case 'a':
		return "inserts"
	case 'u':
		return "updates"
	case 'd':
		return "deletes"
	case 'l':
		return "listing"
	case 'c':
		return "creating"
	}
	return string(p)
}

// inRange reports whether the key (pk, rk) is inside the SAS's key range.
func (g *sas) inRange(pk, rk string) bool {
	if g == nil || !g.rangeBound {
		return true
	}
	if g.spk != "" && (pk < g.spk || pk == g.spk && rk < g.srk) {
		return false
	}
	if g.epk != "" && (pk > g.epk || pk == g.epk && g.erk != "" && rk > g.erk) {
		return false
	}
	return true
}

// checkKey refuses a key outside the SAS's range.
func (c *call) checkKey(pk, rk string) error {
	if !c.sas.inRange(pk, rk) {
		return engine.Errorf(codeAuthorizationFailure, "the shared access signature does not cover the entity (%q, %q)", pk, rk)
	}
	return nil
}

// AuthenticateAccount checks a request outside the Tables API (a
// function's HTTP route) as the Tables API checks its own: signed with
// account's key (SharedKey or SharedKeyLite over "/<account><path>"), or
// carrying an account shared access signature of it that grants perm on
// entities. A table's SAS grants one table and is refused. It names the
// caller: "account:<name>" or "sas:<name>".
func (s *Server) AuthenticateAccount(r *http.Request, account string, perm byte) (string, error) {
	c := &call{s: s, r: r, account: account}
	if err := c.authenticate(""); err != nil {
		return "", err
	}
	if c.sas == nil {
		return "account:" + account, nil
	}
	if !c.sas.account {
		return "", engine.Errorf(codeAuthorizationFailure, "a table's shared access signature (tn=%s) grants that table only: sign an account SAS (ss=t, srt=o)", c.sas.table)
	}
	if err := c.allow("", perm); err != nil {
		return "", err
	}
	return "sas:" + account, nil
}
