package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/console"
	"github.com/cairn-dev/cairn/projections"
)

// The health endpoints, served without authentication from the moment the
// node listens for HTTP (before it has connected to NATS) until it stops.
// Only these exact paths: /healthz/… is the Tables API's (and an account
// cannot be named healthz or readyz, httpapi.ReservedAccountNames).
const (
	// HealthPath answers 200 "ok" while the process serves HTTP.
	HealthPath = "/healthz"
	// ReadyPath answers 200 once the node serves (ready) and 503 with
	// what is not ready otherwise.
	ReadyPath = "/readyz"
)

// jsProbeEvery is how often the node asks JetStream whether it answers
// (one small request); a probe older than jsProbeStale counts as no
// answer.
const (
	jsProbeEvery = 2 * time.Second
	jsProbeStale = 3 * jsProbeEvery
)

// readiness is what /readyz reports, kept up to date by the node so that
// a probe costs no NATS round trip: the connection's status (read from
// the client, no I/O), the last answer of JetStream (probeJetStream, every
// 2 s), whether the views have replayed the journal up to the head they
// saw at start (Views.Ready), whether they found a stream of the journal
// missing (Views.Missing) and whether every component serves.
type readiness struct {
	nc atomic.Pointer[nats.Conn]
	// serve is the connection that answers requests, when it is not nc.
	serve   atomic.Pointer[nats.Conn]
	views   atomic.Pointer[projections.Views]
	js      atomic.Pointer[jsAnswer]
	started atomic.Bool // every component serves
	stopped atomic.Bool // the node is shutting down
}

// jsAnswer is the outcome of one JetStream probe.
type jsAnswer struct {
	at time.Time
	ok bool
}

// notReady lists what keeps the node from being ready (nil: ready). The
// reasons are fixed phrases: no error text, which could name a server.
func (r *readiness) notReady(now time.Time) []string {
	var why []string
	if r.stopped.Load() {
		why = append(why, "node: shutting down")
	} else if !r.started.Load() {
		why = append(why, "node: starting")
	}
	if nc := r.nc.Load(); nc == nil {
		why = append(why, "nats: not connected yet")
	} else if st := nc.Status(); st != nats.CONNECTED {
		why = append(why, "nats: "+st.String())
	}
	if sc := r.serve.Load(); sc != nil {
		if st := sc.Status(); st != nats.CONNECTED {
			why = append(why, "nats (serving requests): "+st.String())
		}
	}
	switch a := r.js.Load(); {
	case a == nil:
		why = append(why, "jetstream: no answer yet")
	case !a.ok:
		why = append(why, "jetstream: not answering")
	case now.Sub(a.at) > jsProbeStale:
		why = append(why, "jetstream: no answer for "+now.Sub(a.at).Round(time.Second).String())
	}
	if v := r.views.Load(); v == nil {
		why = append(why, "views: not started")
	} else {
		select {
		case <-v.Ready():
		default:
			why = append(why, "views: replaying the journal")
		}
		why = append(why, missingJournal(v)...)
	}
	return why
}

// missingJournal lists the parts of the journal the views found missing
// (Views.Missing: the views' state, no request). Both are deleted
// streams that nothing brings back, and the node cannot serve what
// they held: the catalog's tables can be neither created nor dropped,
// a table is faulted (its reads and writes answer TableFaulted). The
// tables are counted, not named: /readyz answers without credentials,
// and table names are the accounts' business (the log, the operators'
// $load and cairn_table_faulted name them).
func missingJournal(v *projections.Views) []string {
	var why []string
	catalog, tables := v.Missing()
	if catalog {
		why = append(why, "journal: catalog stream missing")
	}
	switch n := len(tables); {
	case n == 1:
		why = append(why, "journal: the stream of 1 table missing")
	case n > 1:
		why = append(why, fmt.Sprintf("journal: the streams of %d tables missing", n))
	}
	return why
}

// jetStreamAnswered records that JetStream just answered (the node's
// wait for it at start), so that the node is ready without waiting for
// the first probe.
func (r *readiness) jetStreamAnswered() { r.js.Store(&jsAnswer{at: time.Now(), ok: true}) }

// probeJetStream asks JetStream for the account's information now and
// every jsProbeEvery until ctx ends, and records each outcome. It costs one
// request every 2 s.
func (r *readiness) probeJetStream(ctx context.Context, nc *nats.Conn) {
	js, err := jetstream.New(nc)
	if err != nil {
		r.js.Store(&jsAnswer{at: time.Now(), ok: false})
		return
	}
	t := time.NewTicker(jsProbeEvery)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, jsProbeEvery)
		_, err := js.AccountInfo(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		r.js.Store(&jsAnswer{at: time.Now(), ok: err == nil})
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// startProbe runs probeJetStream on nc until the returned stop is called,
// and follows serve's status (the connection that answers requests, when
// it is another); stop returns once it has stopped.
func (r *readiness) startProbe(ctx context.Context, nc, serve *nats.Conn) (stop func()) {
	r.nc.Store(nc)
	if serve != nc {
		r.serve.Store(serve)
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.probeJetStream(pctx, nc)
	}()
	return func() {
		cancel()
		<-done
	}
}

// healthHandler serves HealthPath, or ReadyPath when readyz (GET and
// HEAD). Neither reads a secret or does I/O.
func (r *readiness) healthHandler(readyz bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		if !readyz {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte("ok\n"))
			return
		}
		why := r.notReady(time.Now())
		w.Header().Set("Content-Type", "application/json")
		if len(why) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(struct {
				Ready    bool     `json:"ready"`
				NotReady []string `json:"notReady"`
			}{false, why})
			return
		}
		_, _ = w.Write([]byte(`{"ready":true}` + "\n"))
	})
}

// frontDoor is the node's HTTP server. It serves the health endpoints
// from the moment the node listens, and everything else through a gate
// that the "http api" component opens once the components before it
// serve and closes when the node stops: before and after, a request
// there is answered 503 at once.
type frontDoor struct {
	srv    *http.Server
	failed chan struct{} // closed when the server stopped on its own
	err    error         // why, once failed is closed
	mu     sync.RWMutex
	api    http.Handler   // nil: closed
	busy   sync.WaitGroup // requests inside the gate
}

// newFrontDoor returns the server of r's health endpoints and the gate;
// srv is completed with them as its handler.
func newFrontDoor(srv *http.Server, r *readiness) *frontDoor {
	f := &frontDoor{srv: srv, failed: make(chan struct{})}
	mux := newRoutes()
	mux.handle(HealthPath, r.healthHandler(false))
	mux.handle(ReadyPath, r.healthHandler(true))
	// The console's icon, the same public image for everyone (browsers
	// ask for it on every page): without the token and under any Host.
	mux.handle(console.FaviconPath, console.Favicon())
	mux.handle("/", http.HandlerFunc(f.serveAPI))
	srv.Handler = bodyWait(mux, bodyGap)
	return f
}

// Failed is closed when the server stopped without being asked to (nil,
// never closed, when f is nil: HTTP is off).
func (f *frontDoor) Failed() <-chan struct{} {
	if f == nil {
		return nil
	}
	return f.failed
}

// serveAPI hands a request to the open gate's handler, or answers 503.
func (f *frontDoor) serveAPI(w http.ResponseWriter, r *http.Request) {
	f.mu.RLock()
	h := f.api
	if h != nil {
		f.busy.Add(1)
	}
	f.mu.RUnlock()
	if h == nil {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the node is not serving (starting or stopping): see "+ReadyPath, http.StatusServiceUnavailable)
		return
	}
	defer f.busy.Done()
	h.ServeHTTP(w, r)
}

// open lets requests through to h.
func (f *frontDoor) open(h http.Handler) {
	f.mu.Lock()
	f.api = h
	f.mu.Unlock()
}

// close refuses new requests and waits for those inside the gate to
// finish, for wait at the most; it reports whether they did (if not, the
// goroutine waiting for them ends with the last).
func (f *frontDoor) close(wait time.Duration) bool {
	f.mu.Lock()
	f.api = nil
	f.mu.Unlock()
	done := make(chan struct{})
	go func() {
		f.busy.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(wait):
		return false
	}
}

// apiGate is the "http api" component: it opens the front door's gate to
// the APIs while it runs.
type apiGate struct {
	door    *frontDoor
	handler http.Handler
	log     *slog.Logger
	opened  chan struct{} // closed once the gate is open
}

func newAPIGate(door *frontDoor, handler http.Handler, log *slog.Logger) *apiGate {
	return &apiGate{door: door, handler: handler, log: log, opened: make(chan struct{})}
}

// Ready is closed once the gate is open: the node is ready only then.
func (g *apiGate) Ready() <-chan struct{} { return g.opened }

// Run opens the gate until ctx ends; then requests in flight finish (their
// writes are answered) and new ones are answered 503, for 10 s at the
// most.
func (g *apiGate) Run(ctx context.Context) error {
	g.door.open(g.handler)
	close(g.opened)
	<-ctx.Done()
	if !g.door.close(10 * time.Second) {
		g.log.Warn("http requests still in flight after 10s; stopping without them")
	}
	return nil
}

// serve runs the server on ln until the returned stop is called; stop
// shuts it down (requests in flight get 10 s, then their connections are
// closed) and returns once Serve has returned. A server that fails on its
// own closes Failed, which stops the node.
func (f *frontDoor) serve(ln net.Listener, log *slog.Logger) (stop func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var err error
		if f.srv.TLSConfig != nil {
			err = f.srv.ServeTLS(ln, "", "") // the certificate is in TLSConfig
		} else {
			err = f.srv.Serve(ln)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			f.err = fmt.Errorf("node: http: %w", err)
			log.Error("http server stopped", "err", err)
			close(f.failed)
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.srv.Shutdown(sctx); err != nil {
			log.Warn("http requests still in flight after 10s; closing them", "err", err)
			f.srv.Close()
		}
		<-done
	}
}
