package httpapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nuid"
	"golang.org/x/time/rate"

	"github.com/cairn-dev/cairn/cmd/internal/cors"
	"github.com/cairn-dev/cairn/cmd/internal/hostcheck"
	"github.com/cairn-dev/cairn/cmd/internal/outboxsubjects"
	"github.com/cairn-dev/cairn/cmd/internal/pages"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
	"github.com/cairn-dev/cairn/journal/values"
	"github.com/cairn-dev/cairn/projections"
	"github.com/cairn-dev/cairn/projections/query"
)

// Account is a storage account: the first segment of every path and the key
// that signs its requests.
type Account struct {
	Name string
	Key  []byte
}

// The development account of the Azure emulators, with its well-known
// public key: enabled by default so that the development connection string
// works out of the box.
const (
	DevAccountName = engine.DevAccount
	DevAccountKey  = engine.DevAccountKey
)

// DevConnectionString is the Azure storage connection string of the
// development account on a host whose HTTP API is at baseURL
// ("http://127.0.0.1:10002", or "https://…" with TLS).
func DevConnectionString(baseURL string) string {
	proto := "http"
	if strings.HasPrefix(baseURL, "https://") {
		proto = "https"
	}
	return "DefaultEndpointsProtocol=" + proto + ";AccountName=" + DevAccountName + ";AccountKey=" + DevAccountKey + ";TableEndpoint=" + baseURL + "/" + DevAccountName + ";"
}

// DevAccount returns the development account.
func DevAccount() Account {
	key, _ := base64.StdEncoding.DecodeString(DevAccountKey)
	return Account{Name: DevAccountName, Key: key}
}

// ParseAccount parses "name:base64key".
func ParseAccount(s string) (Account, error) {
	name, key, ok := strings.Cut(s, ":")
	if !ok || name == "" {
		return Account{}, fmt.Errorf("account %q: want name:base64key", s)
	}
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(k) == 0 {
		return Account{}, fmt.Errorf("account %s: the key is not base64", name)
	}
	return Account{Name: name, Key: k}, nil
}

// Config tunes the server. The zero value serves the development account
// with the defaults below.
type Config struct {
	// Accounts that may sign requests, besides the development account.
	Accounts []Account
	// NoDevAccount turns off the development account (devstoreaccount1
	// with its well-known key, served by default like the emulators).
	NoDevAccount bool
	// PageBudget ends a query page early when walking takes longer (5 s, as
	// Azure); the page then carries a continuation.
	PageBudget time.Duration
	// PositionWait is the longest a read waits for the view to reach the
	// journal position named by X-Cairn-Position (10 s).
	PositionWait time.Duration
	// Pages reads the tables whose view here holds only some shards
	// from the hosts that hold the others (package pages); nil: every
	// view is whole.
	Pages *pages.Service
	// WriteTimeout bounds a write from request to reply (30 s).
	WriteTimeout time.Duration
	// HoldSnapshot is how long a query's snapshot stays held for its next
	// page after the last page was served (30 s); HeldSnapshots caps how
	// many are held at once (4096; the oldest is released first).
	HoldSnapshot  time.Duration
	HeldSnapshots int
	// MaxBody caps a request body (a $batch may carry 4 MiB of entities
	// plus its framing: 5 MiB).
	MaxBody int64
	// BodyTimeout is the longest wait for the next bytes of a request body
	// (10 s); MinBodyRate, in bytes per second, stretches the deadline of
	// the whole body with its length (16 KiB/s).
	BodyTimeout time.Duration
	MinBodyRate int64
	// Metrics, if set, appends further series (in the Prometheus text
	// format) to /metrics: the node adds the function runner's.
	Metrics func(w io.Writer)
	// CORS are the web origins a browser may call the API from. None by
	// default: no preflight is answered, no Access-Control-* header is
	// sent, and a request with any Origin header is refused.
	CORS cors.Origins
	// Hosts are the DNS names the node answers besides IP literals and
	// loopback names (-http-hosts; HostGuard). None by default: a
	// request of the development account, the operators' API, /metrics
	// or the console with another name in its Host is refused; once
	// names are listed, every request is checked.
	Hosts hostcheck.Names
	// Outbox is the allowlist of the NATS subjects the outbox messages of
	// writes (X-Cairn-Messages) may name; nil allows Cairn queues only.
	Outbox *outboxsubjects.Allowlist
	// History reads the tables' history and sets their retention
	// ($history); DefaultRetention is the node's (-history).
	History          HistoryJournal
	DefaultRetention projections.Retention
	// Values is the store of the large values (docs/VALUES.md); nil:
	// PUT and GET …/$value are NotImplemented, and a write holding a
	// reference is refused.
	Values Values
	// MaxValue caps one large value (values.DefaultMaxSize, 1 GiB).
	MaxValue int64
}

// Validate checks the accounts: at least one, names unique, valid and
// not reserved (ReservedAccountNames).
func (c *Config) Validate() error {
	seen := map[string]bool{}
	if !c.NoDevAccount {
		seen[DevAccountName] = true
	}
	for _, a := range c.Accounts {
		if err := engine.ValidateAccountName(a.Name); err != nil {
			return fmt.Errorf("http: %s (as Azure's storage account names)", engine.AsError(err).Message)
		}
		if reservedAccount(a.Name) {
			return fmt.Errorf("http: the account name %s is reserved: the node serves /%s itself (reserved: %s)", a.Name, a.Name, strings.Join(ReservedAccountNames, ", "))
		}
		if len(a.Key) == 0 {
			return fmt.Errorf("http: account %s needs a key", a.Name)
		}
		if seen[a.Name] {
			return fmt.Errorf("http: account %s is configured twice", a.Name)
		}
		seen[a.Name] = true
	}
	if len(seen) == 0 {
		return errors.New("http: no account can sign requests: add accounts or keep the development account")
	}
	return nil
}

func (c *Config) defaults() {
	if !c.NoDevAccount {
		c.Accounts = append([]Account{DevAccount()}, c.Accounts...)
	}
	if c.PageBudget <= 0 {
		c.PageBudget = 5 * time.Second
	}
	if c.PositionWait <= 0 {
		c.PositionWait = 10 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.HoldSnapshot <= 0 {
		c.HoldSnapshot = 30 * time.Second
	}
	if c.HeldSnapshots <= 0 {
		c.HeldSnapshots = 4096
	}
	if c.MaxBody <= 0 {
		c.MaxBody = 5 << 20
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = 10 * time.Second
	}
	if c.MinBodyRate <= 0 {
		c.MinBodyRate = 16 << 10
	}
	if c.MaxValue <= 0 {
		c.MaxValue = values.DefaultMaxSize
	}
}

// Committer is what the HTTP API needs of the committer (engine/commit).
type Committer interface {
	// Submit queues a command; done receives its reply exactly once.
	Submit(cmd *engine.Command, done func(*engine.Reply))
	CreateTable(ctx context.Context, name string) (engine.TableInfo, error)
	DeleteTable(ctx context.Context, name string) error
}

// Server is the HTTP API. It is an http.Handler; it starts no goroutines.
type Server struct {
	cfg      Config
	views    *projections.Views
	comm     Committer
	log      *slog.Logger
	accounts map[string]Account
	signers  sync.Map // account name → *sync.Pool of HMACs keyed with its key (sign)
	held     *query.Holds
	metrics  *metrics

	hostRefused atomic.Uint64  // requests HostGuard refused
	hostLog     rate.Sometimes // HostGuard's log lines, at most every hostLogEvery
}

// New returns a server reading from views and writing through c.
func New(views *projections.Views, c Committer, log *slog.Logger, cfg Config) *Server {
	cfg.defaults()
	s := &Server{cfg: cfg, views: views, comm: c, log: log, accounts: map[string]Account{},
		held: query.NewHolds(cfg.HoldSnapshot, cfg.HeldSnapshots), metrics: newMetrics(),
		hostLog: rate.Sometimes{First: 1, Interval: hostLogEvery}}
	for _, a := range cfg.Accounts {
		s.accounts[a.Name] = a
	}
	return s
}

// Header values shared by every response (never modified).
var (
	apiVersion = []string{"2019-02-02"}
	noSniff    = []string{"nosniff"}
)

// call is one request being served.
type call struct {
	s       *Server
	w       http.ResponseWriter
	r       *http.Request
	account string
	sas     *sas // the request's shared access signature, if it used one
	meta    wire.Metadata
	id      string // x-ms-request-id
	op      string // for the request counters
	table   string // the full name of the table the request names (engine.FullTableName)
	// operator: the request came through the operators' door
	// (OperatorHandler), behind the operator token.
	operator bool
	q        url.Values // the query's parameters, parsed once (params)
}

// params returns the request's query parameters, parsed on first use: a
// request reads several (sig, comp, $format, $select…), and each
// URL.Query call parses the whole query again. Nil for an empty query.
// Callers must not change it.
func (c *call) params() url.Values {
	if c.q == nil && c.r.URL.RawQuery != "" {
		c.q = c.r.URL.Query()
	}
	return c.q
}

// fullName returns the full name of the account's table table, refusing a
// name that is not a table name (a dot in it would name another account's
// table).
func (c *call) fullName(table string) (string, error) {
	if err := engine.ValidateTableName(table); err != nil {
		return "", err
	}
	return engine.FullTableName(c.account, table), nil
}

// newCall starts serving a request: the headers every response carries.
func (s *Server) newCall(w http.ResponseWriter, r *http.Request) *call {
	c := &call{s: s, w: w, r: r, id: nuid.Next(), meta: wire.MinimalMetadata}
	// Canonical keys set directly: this runs on every request. net/http
	// adds Date.
	h := w.Header()
	h["X-Ms-Request-Id"] = []string{c.id}
	h["X-Ms-Version"] = apiVersion
	h["X-Content-Type-Options"] = noSniff
	if id := r.Header["X-Ms-Client-Request-Id"]; len(id) > 0 {
		h["X-Ms-Client-Request-Id"] = id[:1]
	}
	return c
}

// ServeHTTP implements http.Handler. It serves the Tables API; /metrics
// is MetricsHandler's, which the node serves behind the operator token.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := s.newCall(w, r)
	h := w.Header()
	defer func() { s.metrics.request(c.op, s.metricTable(c.table)) }()
	// A browser sends Origin with every cross-origin request; the SDKs
	// outside a browser send none. A request from an origin not
	// configured is refused before anything is done: a web page must not
	// reach the API with a simple request (a SAS in the query string needs
	// no header, and the development key is public).
	origin := r.Header.Get("Origin")
	if origin != "" && !s.cfg.CORS.Allows(origin) {
		if r.Method == http.MethodOptions {
			c.fail(engine.Errorf(codeCorsPreflightFailure, "CORS is not enabled for the origin %s (-cors-origins)", origin))
		} else {
			c.fail(engine.Errorf(codeOriginNotAllowed, "requests from the web origin %s are refused: configure it with -cors-origins to allow it", origin))
		}
		return
	}
	if origin != "" {
		h.Set("Access-Control-Allow-Origin", s.cfg.CORS.AllowOrigin(origin))
		h.Set("Access-Control-Expose-Headers", "*")
		h.Add("Vary", "Origin")
	}
	if r.Method == http.MethodOptions {
		c.preflight()
		return
	}
	account, resource, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if !ok && account == "" {
		c.fail(errInvalidURI("the path must start with the account, as in /%s/Tables", DevAccountName))
		return
	}
	c.account = account
	if err := c.authenticate(resource); err != nil {
		c.fail(err)
		return
	}
	c.serve(resource)
}

// serve serves an authenticated request for resource (the path after the
// account).
func (c *call) serve(resource string) {
	// Azure's ?comp= resources (access policies, service properties and
	// statistics) speak XML; answering them before the JSON check tells a
	// client that asked for XML what is missing, not how it asked.
	if comp := c.params().Get("comp"); comp != "" {
		c.fail(compNotImplemented(comp))
		return
	}
	meta, err := c.metadataLevel()
	if err != nil {
		c.fail(err)
		return
	}
	c.meta = meta
	c.route(resource)
}

// metricTable is the table label of a request's counter: the table's name
// as it was created when it exists, "" otherwise, so that requests naming
// tables that do not exist, in any spelling, cannot add series to /metrics.
func (s *Server) metricTable(name string) string {
	if name == "" {
		return ""
	}
	t, ok := s.views.Table(name)
	if !ok {
		return ""
	}
	return t.Name()
}

// route dispatches on the resource path (after the account).
func (c *call) route(resource string) {
	r := c.r
	if entity, rest, ok := splitValuePath(resource); ok {
		c.value(entity, rest)
		return
	}
	// Only a request that carries messages needs its kind (a second
	// parse of an entity's path).
	if err := c.noMessages(); err != nil && !isWrite(r.Method, resource) {
		c.fail(err)
		return
	}
	switch {
	case resource == "Tables" || resource == "Tables()":
		switch r.Method {
		case http.MethodGet:
			c.listTables()
		case http.MethodPost:
			c.createTable()
		default:
			c.fail(errMethod(r.Method, "Tables"))
		}
		return
	case strings.HasPrefix(resource, "Tables("):
		name, err := parseTableRef(resource)
		if err != nil {
			c.fail(err)
			return
		}
		switch r.Method {
		case http.MethodGet:
			c.getTable(name)
		case http.MethodDelete:
			c.deleteTable(name)
		default:
			c.fail(errMethod(r.Method, "Tables('name')"))
		}
		return
	case resource == "$batch":
		if r.Method != http.MethodPost {
			c.fail(errMethod(r.Method, "$batch"))
			return
		}
		c.batch()
		return
	case resource == "$load":
		c.load()
		return
	case resource == "$history":
		c.history()
		return
	case resource == "":
		c.fail(notImplemented("service properties and statistics"))
		return
	}
	table, keys, err := parseEntityPath(resource)
	if err != nil {
		c.fail(err)
		return
	}
	if c.table, err = c.fullName(table); err != nil {
		c.fail(err)
		return
	}
	if keys == nil {
		switch r.Method {
		case http.MethodGet:
			c.query(table)
		case http.MethodPost:
			c.insert(table)
		default:
			c.fail(errMethod(r.Method, table))
		}
		return
	}
	switch r.Method {
	case http.MethodGet:
		c.get(table, *keys)
	case http.MethodPut:
		c.update(table, *keys, false)
	case http.MethodPatch, "MERGE":
		c.update(table, *keys, true)
	case http.MethodDelete:
		c.delete(table, *keys)
	default:
		c.fail(errMethod(r.Method, table+"(PartitionKey,RowKey)"))
	}
}

// isWrite reports whether a request is an entity write or a $batch, the
// requests that may carry X-Cairn-Messages. A malformed path is left to
// route to refuse.
func isWrite(method, resource string) bool {
	switch {
	case resource == "$batch":
		return method == http.MethodPost
	case resource == "" || resource == "$load" || resource == "Tables" || resource == "Tables()" || strings.HasPrefix(resource, "Tables("):
		return false
	}
	_, keys, err := parseEntityPath(resource)
	if err != nil {
		return true
	}
	if keys == nil {
		return method == http.MethodPost
	}
	return method == http.MethodPut || method == http.MethodPatch || method == "MERGE" || method == http.MethodDelete
}

// preflight answers a browser's CORS preflight from a configured origin
// (ServeHTTP refused the others and set Access-Control-Allow-Origin); an
// OPTIONS request that is not a preflight is refused.
func (c *call) preflight() {
	if c.r.Header.Get("Origin") == "" || c.r.Header.Get("Access-Control-Request-Method") == "" {
		c.fail(engine.Errorf(codeCorsPreflightFailure, "OPTIONS answers only a CORS preflight from an origin configured with -cors-origins"))
		return
	}
	h := c.w.Header()
	h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, MERGE, DELETE, OPTIONS")
	if req := c.r.Header.Get("Access-Control-Request-Headers"); req != "" {
		h.Set("Access-Control-Allow-Headers", req)
	}
	h.Set("Access-Control-Max-Age", "86400")
	c.w.WriteHeader(http.StatusOK)
}

// metadataLevel reads the OData metadata level from $format or Accept.
func (c *call) metadataLevel() (wire.Metadata, error) {
	v := c.params().Get("$format")
	if v == "" {
		v = c.r.Header.Get("Accept")
	}
	switch {
	case strings.Contains(v, "odata=nometadata"):
		return wire.NoMetadata, nil
	case strings.Contains(v, "odata=fullmetadata"):
		return wire.FullMetadata, nil
	case v == "" || strings.Contains(v, "json") || strings.Contains(v, "*/*"):
		return wire.MinimalMetadata, nil
	case strings.Contains(v, "atom") || strings.Contains(v, "xml"):
		return 0, engine.Errorf(engine.CodeInvalidInput, "only JSON is served (Accept: application/json;odata=minimalmetadata), not %q", v)
	}
	return wire.MinimalMetadata, nil
}

// base is the URL the OData metadata links are built on.
func (c *call) base() string {
	scheme := "http"
	if c.r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + c.r.Host + "/" + c.account
}
